#include "core/blend/blend-loader.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/engine/host-staging.h"
#include "core/util/error.h"

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace

// Beside a GPU: a 2300-token request on the 28-layer default model is ~65 MB of stored KV, which
// one thread reads, checks and copies at ~5 GB/s (13 ms on this project's CPU); by estimate an
// H100 computes the blended layers in less (not yet measured: README, 'GPU check').
constexpr int k_device_loader_threads = 8;

int loader_threads(const backend& be, int requested, size_t n_readers) {
    const int most = static_cast<int>(std::max<size_t>(1, n_readers));
    if (requested > 0) return std::min(requested, most);
    if (be.host_memory()) return 1;
    // The host thread that drives the device keeps one core.
    const int spare = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
    return std::min({k_device_loader_threads, spare, most});
}

layer_loader::layer_loader(backend& be, loader_memory* mem, std::vector<chunk_kv_reader*> readers,
                           std::vector<int64_t> row_offset, int64_t n_rows, int64_t kv_dim,
                           dtype k_type, std::vector<int32_t> layers, int n_threads)
    : readers_(std::move(readers)),
      row_offset_(std::move(row_offset)),
      kv_dim_(kv_dim),
      k_type_(k_type),
      k_elem_bytes_(dtype_row_bytes(k_type, 1)),
      layers_(std::move(layers)) {
    if (k_type != dtype::f32 && k_type != dtype::f16)
        throw error(status::invalid_arg, "layer_loader: K rows are f32 or f16");
    const auto elems = static_cast<size_t>(std::max<int64_t>(1, n_rows * kv_dim));
    for (int i = 0; i < 2; ++i) {
        // 64 bytes of slack past the rows, as aligned_array keeps, for vector loads at the end.
        slots_[i].k = grow_buffer<uint8_t>(be, &mem->k[i], elems * k_elem_bytes_ + 64,
                                           backend_buffer::memory::host);
        slots_[i].v =
            grow_buffer<uint16_t>(be, &mem->v[i], elems + 32, backend_buffer::memory::host);
    }
    if (layers_.empty() || readers_.empty()) return;
    const size_t n_helpers =
        std::min(readers_.size(), static_cast<size_t>(std::max(1, n_threads))) - 1;
    try {
        for (size_t i = 0; i < n_helpers; ++i) helpers_.emplace_back([this] { help(); });
        thread_ = std::thread([this] { loop(); });
    } catch (...) {
        stop_threads();  // no thread may outlive a constructor that throws
        throw;
    }
}

layer_loader::~layer_loader() { stop_threads(); }

void layer_loader::stop_threads() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
        abort_ = true;
    }
    cv_.notify_all();
    help_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (std::thread& t : helpers_) t.join();
    helpers_.clear();
}

kv_layer_rows layer_loader::acquire(int32_t layer, double* wait_ms) {
    const auto t0 = clock_type::now();
    std::unique_lock<std::mutex> lk(mu_);
    slot& s = slots_[static_cast<size_t>(layer) % 2];
    cv_.wait(lk, [&] { return failed_ || (s.layer == layer && s.ready); });
    *wait_ms += ms_since(t0);
    // A layer loaded before a later one failed is still good.
    if (s.layer == layer && s.ready) return {s.k, k_type_, s.v};
    std::rethrow_exception(error_);
}

bool layer_loader::ready(int32_t layer) {
    std::lock_guard<std::mutex> lk(mu_);
    const slot& s = slots_[static_cast<size_t>(layer) % 2];
    return failed_ || (s.layer == layer && s.ready);
}

void layer_loader::release(int32_t layer) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        slot& s = slots_[static_cast<size_t>(layer) % 2];
        s.ready = false;
        s.layer = -1;
    }
    cv_.notify_all();
}

uint64_t layer_loader::bytes() const {
    uint64_t b = 0;
    for (auto* r : readers_) b += r->bytes_read();
    return b;
}

// The loader thread: fills a free slot with the next layer of every reader, with the helpers,
// and stops at the first reader error (kept for acquire() to rethrow on the compute thread).
void layer_loader::loop() {
    for (int32_t layer : layers_) {
        slot& s = slots_[static_cast<size_t>(layer) % 2];
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || (s.layer == -1 && !s.ready); });
            if (stop_) return;
            job_layer_ = layer;
            next_chunk_ = 0;
            helpers_busy_ = helpers_.size();
            ++job_;
        }
        help_cv_.notify_all();
        const auto t0 = clock_type::now();
        read_chunks(layer);
        {
            // The helpers write into the slot until they are done: wait for them even after an
            // error, so the slot is never published (or refilled) under their writes.
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return helpers_busy_ == 0; });
            busy_ms_ += ms_since(t0);
            if (failed_ || stop_) return;
            s.layer = layer;
            s.ready = true;
        }
        cv_.notify_all();
    }
}

void layer_loader::help() {
    uint64_t done = 0;
    for (;;) {
        int32_t layer = -1;
        {
            std::unique_lock<std::mutex> lk(mu_);
            help_cv_.wait(lk, [&] { return stop_ || job_ != done; });
            // A job handed out is finished (quickly: abort_ is set) before stopping, so loop()
            // never waits for a helper that left.
            if (job_ == done) return;
            done = job_;
            layer = job_layer_;
        }
        read_chunks(layer);
        {
            std::lock_guard<std::mutex> lk(mu_);
            --helpers_busy_;
        }
        cv_.notify_all();
    }
}

void layer_loader::read_chunks(int32_t layer) {
    const slot& s = slots_[static_cast<size_t>(layer) % 2];
    while (!abort_) {
        const size_t c = next_chunk_.fetch_add(1);
        if (c >= readers_.size()) return;
        try {
            const int64_t off = row_offset_[c] * kv_dim_;
            readers_[c]->read_layer_as(layer, s.k + static_cast<size_t>(off) * k_elem_bytes_,
                                       k_type_, s.v + off, kv_dim_);
        } catch (...) {
            std::lock_guard<std::mutex> lk(mu_);
            if (!failed_) {  // the first error is the one reported
                failed_ = true;
                failed_reader_ = readers_[c];
                error_ = std::current_exception();
            }
            abort_ = true;
            cv_.notify_all();
            return;
        }
    }
}

}  // namespace cacheblend
