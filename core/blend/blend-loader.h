// The blended prefill's load step: streams the stored layers of every hit chunk into a double
// buffer on its own thread, one layer ahead of compute, so reading the KV store overlaps the
// forward pass (the paper's pipelining; see core/blend/blend.h). A layer's chunks may be read by
// several threads at once (loader_threads()): on a GPU the forward pass leaves the host's cores
// idle while reading and checking stored KV on one core is slower than the device computes the
// blended layers. Keys come as the store format keeps them (kv-store.h, stored_k_type): f16 ones
// are copied, not widened, so they cross to a device in two thirds of the bytes of f32 K + f16 V.
#pragma once

#include <atomic>
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

// The loader's two slots (K and V of one layer each), kept by the engine across requests so they
// are allocated once: host memory of the session's backend (pinned on a GPU, so a loaded layer is
// uploaded beside compute).
struct loader_memory {
    backend_buffer k[2], v[2];  // memory::host
};

// One loaded layer of the request's stored chunks: K (pre-RoPE) rows in k_type (f16 or f32, the
// store format's stored_k_type) and V rows in f16, [n_rows][kv_dim] each.
struct kv_layer_rows {
    const void* k = nullptr;
    dtype k_type = dtype::f32;
    const uint16_t* v = nullptr;
};

// How many threads read a layer's chunks when the caller leaves it to us (requested <= 0): one
// beside a backend that computes on the host's cores (it would take cores from the forward pass),
// else up to 8 (about 4.5 GB/s each on this project's CPU), no more than the host has cores to
// spare or the request has chunks.
int loader_threads(const backend& be, int requested, size_t n_readers);

class layer_loader {
public:
    // readers[c] fills rows [row_offset[c], ...) of an [n_rows][kv_dim] buffer in *mem (grown on
    // `be` as needed), K in k_type (every reader's format must give it: read_layer_as);
    // `layers` are loaded in order (none: no thread starts). n_threads >= 1 threads read each
    // layer, taking its chunks one at a time (distinct readers are independent: kv-store.h).
    layer_loader(backend& be, loader_memory* mem, std::vector<chunk_kv_reader*> readers,
                 std::vector<int64_t> row_offset, int64_t n_rows, int64_t kv_dim, dtype k_type,
                 std::vector<int32_t> layers, int n_threads = 1);
    ~layer_loader();
    layer_loader(const layer_loader&) = delete;
    layer_loader& operator=(const layer_loader&) = delete;

    // Blocks until `layer` is loaded; returns its rows. Adds the time waited to *wait_ms.
    // Rethrows a reader's error (see failed_reader()) for the layer it failed on and every layer
    // after it.
    kv_layer_rows acquire(int32_t layer, double* wait_ms);
    dtype k_type() const { return k_type_; }
    // True when acquire(layer) would not wait (the layer is loaded, or loading failed).
    bool ready(int32_t layer);
    // The layer's slot may be refilled (with the layer two ahead).
    void release(int32_t layer);
    double busy_ms() const { return busy_ms_; }
    uint64_t bytes() const;
    chunk_kv_reader* failed_reader() const { return failed_reader_; }

private:
    struct slot {
        uint8_t* k = nullptr;  // k_type_ elements
        uint16_t* v = nullptr;
        int32_t layer = -1;
        bool ready = false;
    };

    void loop();
    void stop_threads();
    // A helper thread: reads the chunks of each layer loop() hands out, until stop.
    void help();
    // Reads chunks of `layer` into its slot until none is left (or a read failed or stop).
    void read_chunks(int32_t layer);

    std::vector<chunk_kv_reader*> readers_;
    std::vector<int64_t> row_offset_;
    int64_t kv_dim_;
    dtype k_type_;
    size_t k_elem_bytes_;
    std::vector<int32_t> layers_;
    slot slots_[2];
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false, failed_ = false;
    std::exception_ptr error_;
    chunk_kv_reader* failed_reader_ = nullptr;
    double busy_ms_ = 0;  // wall time of the loads, helpers' reads inside it
    // The layer being read (guarded by mu_ but next_chunk_): loop() bumps job_ and waits until
    // every helper has finished it (helpers_busy_ == 0).
    uint64_t job_ = 0;
    int32_t job_layer_ = -1;
    size_t helpers_busy_ = 0;
    std::atomic<size_t> next_chunk_{0};
    std::atomic<bool> abort_{false};  // a read failed or stop: take no more chunks
    std::condition_variable help_cv_;
    std::vector<std::thread> helpers_;
    std::thread thread_;
};

}  // namespace cacheblend
