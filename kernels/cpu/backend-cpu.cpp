// The CPU backend: host memory and the ops of kernels/cpu/ops.h on our own thread pool.
#include "kernels/cpu/backend-cpu.h"

#include <cstring>
#include <memory>
#include <utility>

#include "kernels/cpu/blend-ops.h"
#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/encoder-ops.h"
#include "kernels/cpu/ops.h"
#include "kernels/memory.h"

namespace cacheblend {
namespace {

class cpu_backend final : public backend {
public:
    explicit cpu_backend(std::shared_ptr<thread_pool> pool)
        : shared_(std::move(pool)), pool_(*shared_) {}
    const char* name() const override { return "cpu"; }
    int n_threads() const override { return pool_.size(); }
    std::unique_ptr<backend> sibling() override { return std::make_unique<cpu_backend>(shared_); }
    bool host_memory() const override { return true; }

    void* alloc(size_t bytes) override { return aligned_malloc(bytes, 64); }
    void free(void* p) noexcept override { aligned_free(p); }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override {
        std::memcpy(dst, src, bytes);
    }
    void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void synchronize() override {}
    void* alloc_host(size_t bytes) override { return aligned_malloc(bytes, 64); }
    void free_host(void* p) noexcept override { aligned_free(p); }

    void matmul(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                int64_t ldy, const float* bias) override {
        cacheblend::matmul(pool_, w, x, m, ldx, y, ldy, bias);
    }
    void get_rows(const weight_view& w, const int32_t* ids, int64_t m, float* y,
                  int64_t ldy) override {
        cacheblend::get_rows(pool_, w, ids, m, y, ldy);
    }
    void rms_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma, float eps,
                  float* y, int64_t ldy) override {
        cacheblend::rms_norm(pool_, x, m, n, ldx, gamma, eps, y, ldy);
    }
    void rope(float* x, int64_t m, int64_t ldx, int n_head, int head_dim, const int32_t* pos,
              const rope_params& p) override {
        cacheblend::rope(pool_, x, m, ldx, n_head, head_dim, pos, p);
    }
    void store_rows_f16(const float* src, int64_t m, int64_t n, int64_t ldsrc, const int32_t* pos,
                        uint16_t* cache, int64_t ld_cache) override {
        cacheblend::store_rows_f16(pool_, src, m, n, ldsrc, pos, cache, ld_cache);
    }
    void attention(const attention_args& a) override { cacheblend::attention(pool_, a); }
    void swiglu(const float* gate, const float* up, int64_t m, int64_t n, int64_t ld,
                float* out) override {
        cacheblend::swiglu(pool_, gate, up, m, n, ld, out);
    }
    void add_rows(float* y, const float* x, int64_t m, int64_t n, int64_t ld) override {
        cacheblend::add_rows(pool_, y, x, m, n, ld);
    }
    void relocate_kv(const void* k_src, dtype k_type, const uint16_t* v_src, int64_t n,
                     int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                     const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache,
                     int64_t ld_cache) override {
        cacheblend::relocate_kv(pool_, k_src, k_type, v_src, n, ld_src, pos, n_kv_head, head_dim,
                                rope, k_cache, v_cache, ld_cache);
    }
    void kv_deviation(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                      int64_t ld_cached, int64_t n, int64_t width, float* d) override {
        cacheblend::kv_deviation(pool_, fresh, ld_fresh, cached, ld_cached, n, width, d);
    }
    void attention_mass(const attention_args& a, float* scores) override {
        cacheblend::attention_mass(pool_, a, scores);
    }
    void gather_rows(const void* src, size_t src_stride, const int32_t* idx, int64_t n,
                     size_t row_bytes, void* dst, size_t dst_stride) override {
        const auto* s = static_cast<const uint8_t*>(src);
        auto* d = static_cast<uint8_t*>(dst);
        for (int64_t i = 0; i < n; ++i) {
            std::memcpy(d + static_cast<size_t>(i) * dst_stride,
                        s + static_cast<size_t>(idx[i]) * src_stride, row_bytes);
        }
    }
    void layer_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma,
                    const float* beta, float eps, float* y, int64_t ldy) override {
        cacheblend::layer_norm(pool_, x, m, n, ldx, gamma, beta, eps, y, ldy);
    }
    void gelu_erf(float* x, int64_t m, int64_t n, int64_t ld) override {
        cacheblend::gelu_erf(pool_, x, m, n, ld);
    }
    void encoder_attention(const encoder_attention_args& a) override {
        cacheblend::encoder_attention(pool_, a);
    }

private:
    std::shared_ptr<thread_pool> shared_;  // siblings hold the same pool
    thread_pool& pool_;
};

}  // namespace

std::unique_ptr<backend> make_cpu_backend(int n_threads) {
    return std::make_unique<cpu_backend>(
        std::make_shared<thread_pool>(n_threads < 1 ? 1 : n_threads));
}

std::string cpu_isa_name_detected() { return cpu_isa_name(cpu_isa_detected()); }

}  // namespace cacheblend
