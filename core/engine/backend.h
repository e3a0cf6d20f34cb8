// The compute backend interface the engine runs on. The CPU backend (kernels/cpu/backend-cpu.cpp)
// is the reference; a CUDA backend implements the same ops on device memory. Pointers passed to
// ops are backend memory (from alloc()); for the CPU backend that is ordinary host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cpu/blend-ops.h"
#include "kernels/cpu/ops.h"

namespace cacheblend {

class backend {
public:
    virtual ~backend() = default;
    virtual const char* name() const = 0;
    virtual int n_threads() const = 0;

    // ---- memory ----
    virtual void* alloc(size_t bytes) = 0;  // 64-byte aligned; throws status::nomem / device
    virtual void free(void* p) noexcept = 0;
    virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
    virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
    virtual void synchronize() = 0;

    // ---- ops (semantics as in kernels/cpu/ops.h) ----
    virtual void matmul(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                        int64_t ldy, const float* bias) = 0;
    virtual void get_rows(const weight_view& w, const int32_t* ids, int64_t m, float* y,
                          int64_t ldy) = 0;
    virtual void rms_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma,
                          float eps, float* y, int64_t ldy) = 0;
    virtual void rope(float* x, int64_t m, int64_t ldx, int n_head, int head_dim,
                      const int32_t* pos, const rope_params& p) = 0;
    virtual void store_rows_f16(const float* src, int64_t m, int64_t n, int64_t ldsrc,
                                const int32_t* pos, uint16_t* cache, int64_t ld_cache) = 0;
    virtual void attention(const attention_args& a) = 0;
    virtual void swiglu(const float* gate, const float* up, int64_t m, int64_t n, int64_t ld,
                        float* out) = 0;
    virtual void add_rows(float* y, const float* x, int64_t m, int64_t n, int64_t ld) = 0;

    // ---- blending (kernels/cpu/blend-ops.h) ----
    virtual void relocate_kv(const float* k_src, const uint16_t* v_src, int64_t n,
                             int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                             const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache,
                             int64_t ld_cache) = 0;
    virtual void kv_deviation(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                              int64_t ld_cached, int64_t n, int64_t width, float* d) = 0;
};

std::unique_ptr<backend> create_cpu_backend(int n_threads);

// A buffer owned by a backend, freed on destruction.
class backend_buffer {
public:
    backend_buffer() = default;
    backend_buffer(backend& be, size_t bytes) : be_(&be), p_(be.alloc(bytes)), bytes_(bytes) {}
    ~backend_buffer() { reset(); }
    backend_buffer(backend_buffer&& o) noexcept : be_(o.be_), p_(o.p_), bytes_(o.bytes_) {
        o.p_ = nullptr;
    }
    backend_buffer& operator=(backend_buffer&& o) noexcept {
        if (this != &o) {
            reset();
            be_ = o.be_; p_ = o.p_; bytes_ = o.bytes_;
            o.p_ = nullptr;
        }
        return *this;
    }
    void reset() noexcept {
        if (p_) be_->free(p_);
        p_ = nullptr;
        bytes_ = 0;
    }
    template <typename T> T* as() const noexcept { return static_cast<T*>(p_); }
    size_t size() const noexcept { return bytes_; }

private:
    backend* be_ = nullptr;
    void* p_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace cacheblend
