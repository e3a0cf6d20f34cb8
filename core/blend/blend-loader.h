// The blended prefill's load step: streams the stored layers of every hit chunk into a double
// buffer on its own thread, one layer ahead of compute, so reading the KV store overlaps the
// forward pass (the paper's pipelining; see core/blend/blend.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/engine/backend.h"
#include "core/kvstore/kv-store.h"

namespace cacheblend {

// The loader's two slots (K f32 and V f16 of one layer each), kept by the engine across requests
// so they are allocated once: host memory of the session's backend (pinned on a GPU, so a loaded
// layer is uploaded beside compute).
struct loader_memory {
    backend_buffer k[2], v[2];  // memory::host
};

class layer_loader {
public:
    // readers[c] fills rows [row_offset[c], ...) of an [n_rows][kv_dim] buffer in *mem (grown on
    // `be` as needed); `layers` are loaded in order (none: no thread starts).
    layer_loader(backend& be, loader_memory* mem, std::vector<chunk_kv_reader*> readers,
                 std::vector<int64_t> row_offset, int64_t n_rows, int64_t kv_dim,
                 std::vector<int32_t> layers);
    ~layer_loader();
    layer_loader(const layer_loader&) = delete;
    layer_loader& operator=(const layer_loader&) = delete;

    // Blocks until `layer` is loaded; returns its K (f32) and V (f16) rows, [n_rows][kv_dim].
    // Adds the time waited to *wait_ms. Rethrows a reader's error (see failed_reader()).
    std::pair<const float*, const uint16_t*> acquire(int32_t layer, double* wait_ms);
    // True when acquire(layer) would not wait (the layer is loaded, or loading failed).
    bool ready(int32_t layer);
    // The layer's slot may be refilled (with the layer two ahead).
    void release(int32_t layer);
    double busy_ms() const { return busy_ms_; }
    uint64_t bytes() const;
    chunk_kv_reader* failed_reader() const { return failed_reader_; }

private:
    struct slot {
        float* k = nullptr;
        uint16_t* v = nullptr;
        int32_t layer = -1;
        bool ready = false;
    };

    void loop();

    std::vector<chunk_kv_reader*> readers_;
    std::vector<int64_t> row_offset_;
    int64_t kv_dim_;
    std::vector<int32_t> layers_;
    slot slots_[2];
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false, failed_ = false;
    std::exception_ptr error_;
    chunk_kv_reader* failed_reader_ = nullptr;
    double busy_ms_ = 0;
    std::thread thread_;
};

}  // namespace cacheblend
