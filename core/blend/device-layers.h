// The blended prefill's stored layers on a device backend (host_memory() false): the loader's
// layer (host, pinned) goes to the device whole, once, through backend::upload_async, and the
// next layer's upload is started while the current layer computes, so on a GPU the stored KV
// crosses PCIe on the copy engine beside the forward pass (after the disk read, which the
// loader thread already overlaps). The check layer's deviation and the relocation then gather
// their rows on the device (backend::gather_rows). The CPU reads the loader's slots in place and
// never comes here.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "core/blend/blend-loader.h"
#include "core/engine/backend.h"

namespace cacheblend {

// Device copies of the loader's two slots, kept by the engine across requests.
struct device_layer_memory {
    backend_buffer k[2], v[2];
};

class device_layers {
public:
    // The loader's layer l as host pointers (blocking; throws what the engine's acquire throws).
    using acquire_fn = std::function<kv_layer_rows(int32_t)>;

    // K rows are k_type (the loader's, as stored: f16 keys cross PCIe in half the bytes of f32).
    device_layers(backend& be, device_layer_memory* mem, int64_t n_rows, int64_t kv_dim,
                  dtype k_type, acquire_fn acquire);
    // Waits for uploads still in flight (a request that failed midway), so no copy reads a
    // loader slot the next request refills.
    ~device_layers();
    device_layers(const device_layers&) = delete;
    device_layers& operator=(const device_layers&) = delete;

    // Layer l's rows on the device, [n_rows][kv_dim]; the ops queued from now on see them.
    // Uploads the layer now when prefetch() did not.
    kv_layer_rows get(int32_t l);
    // Every op reading layer l is queued: waits (host) for its upload and lets the loader refill
    // its slot.
    void retire(int32_t l, layer_loader& loader);
    // Starts uploading layer l when the loader has it already; never waits for the disk.
    void prefetch(int32_t l, layer_loader& loader);

private:
    struct slot {
        int32_t layer = -1;
        uint64_t ticket_k = 0, ticket_v = 0;  // uploads not yet finished (0: none)
    };
    void upload(int32_t l);
    void finish(slot* s);

    backend& be_;
    device_layer_memory* mem_;
    dtype k_type_;
    size_t k_bytes_, v_bytes_;
    acquire_fn acquire_;
    slot slots_[2];
};

}  // namespace cacheblend
