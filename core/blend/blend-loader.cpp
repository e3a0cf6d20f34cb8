#include "core/blend/blend-loader.h"

#include <algorithm>
#include <chrono>

#include "core/engine/host-staging.h"

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace

layer_loader::layer_loader(backend& be, loader_memory* mem, std::vector<chunk_kv_reader*> readers,
                           std::vector<int64_t> row_offset, int64_t n_rows, int64_t kv_dim,
                           std::vector<int32_t> layers)
    : readers_(std::move(readers)),
      row_offset_(std::move(row_offset)),
      kv_dim_(kv_dim),
      layers_(std::move(layers)) {
    const auto elems = static_cast<size_t>(std::max<int64_t>(1, n_rows * kv_dim));
    for (int i = 0; i < 2; ++i) {
        // 64 bytes of slack past the rows, as aligned_array keeps, for vector loads at the end.
        slots_[i].k = grow_buffer<float>(be, &mem->k[i], elems + 16, backend_buffer::memory::host);
        slots_[i].v =
            grow_buffer<uint16_t>(be, &mem->v[i], elems + 32, backend_buffer::memory::host);
    }
    if (!layers_.empty() && !readers_.empty()) thread_ = std::thread([this] { loop(); });
}

layer_loader::~layer_loader() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::pair<const float*, const uint16_t*> layer_loader::acquire(int32_t layer, double* wait_ms) {
    const auto t0 = clock_type::now();
    std::unique_lock<std::mutex> lk(mu_);
    slot& s = slots_[static_cast<size_t>(layer) % 2];
    cv_.wait(lk, [&] { return failed_ || (s.layer == layer && s.ready); });
    *wait_ms += ms_since(t0);
    if (failed_) std::rethrow_exception(error_);
    return {s.k, s.v};
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

// The loader thread: fills a free slot with the next layer of every reader, stops at the first
// reader error (kept for acquire() to rethrow on the compute thread).
void layer_loader::loop() {
    for (int32_t layer : layers_) {
        slot& s = slots_[static_cast<size_t>(layer) % 2];
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || (s.layer == -1 && !s.ready); });
            if (stop_) return;
        }
        const auto t0 = clock_type::now();
        for (size_t c = 0; c < readers_.size(); ++c) {
            try {
                const int64_t off = row_offset_[c] * kv_dim_;
                readers_[c]->read_layer(layer, s.k + off, s.v + off, kv_dim_);
            } catch (...) {
                std::lock_guard<std::mutex> lk(mu_);
                failed_ = true;
                failed_reader_ = readers_[c];
                error_ = std::current_exception();
                cv_.notify_all();
                return;
            }
        }
        busy_ms_ += ms_since(t0);
        {
            std::lock_guard<std::mutex> lk(mu_);
            s.layer = layer;
            s.ready = true;
        }
        cv_.notify_all();
    }
}

}  // namespace cacheblend
