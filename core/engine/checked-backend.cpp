#include "core/engine/checked-backend.h"

#include <utility>

namespace cacheblend {

error to_error(const kernel_error& e) {
    switch (e.code()) {
        case kernel_status::invalid_arg: return error(status::invalid_arg, e.what());
        case kernel_status::nomem: return error(status::nomem, e.what());
        case kernel_status::unsupported: return error(status::unsupported, e.what());
        case kernel_status::device: return error(status::device, e.what());
        case kernel_status::device_oom:
            // CBL_DEVICE_OOM (cacheblend.h): the extended code device | 1 << 8.
            return error(static_cast<status>(static_cast<int32_t>(status::device) | 1 << 8),
                         e.what());
        case kernel_status::range: return error(status::range, e.what());
        case kernel_status::internal: return error(status::internal, e.what());
        case kernel_status::error: break;
    }
    return error(status::error, e.what());
}

namespace {

// Runs f, rethrowing a kernel_error as cacheblend::error. No cost on the path that does not throw.
template <typename F>
decltype(auto) guarded(F&& f) {
    try {
        return std::forward<F>(f)();
    } catch (const kernel_error& e) {
        throw to_error(e);
    }
}

class checked_replay final : public recorded_ops {
public:
    explicit checked_replay(std::unique_ptr<recorded_ops> inner) : r_(std::move(inner)) {}
    void replay() override {
        guarded([&] { r_->replay(); });
    }

private:
    std::unique_ptr<recorded_ops> r_;
};

class checked final : public backend {
public:
    explicit checked(std::unique_ptr<backend> inner) : b_(std::move(inner)) {}
    const char* name() const override { return b_->name(); }
    int n_threads() const override { return b_->n_threads(); }
    std::unique_ptr<backend> sibling() override {
        std::unique_ptr<backend> s = guarded([&] { return b_->sibling(); });
        return s ? checked_backend(std::move(s)) : nullptr;
    }
    bool host_memory() const override { return b_->host_memory(); }

    void* alloc(size_t bytes) override {
        return guarded([&] { return b_->alloc(bytes); });
    }
    void free(void* p) noexcept override { b_->free(p); }
    void upload(void* dst, const void* src, size_t bytes) override {
        guarded([&] { b_->upload(dst, src, bytes); });
    }
    void download(void* dst, const void* src, size_t bytes) override {
        guarded([&] { b_->download(dst, src, bytes); });
    }
    void copy(void* dst, const void* src, size_t bytes) override {
        guarded([&] { b_->copy(dst, src, bytes); });
    }
    void synchronize() override {
        guarded([&] { b_->synchronize(); });
    }
    void* alloc_host(size_t bytes) override {
        return guarded([&] { return b_->alloc_host(bytes); });
    }
    void free_host(void* p) noexcept override { b_->free_host(p); }
    uint64_t upload_async(void* dst, const void* src, size_t bytes) override {
        return guarded([&] { return b_->upload_async(dst, src, bytes); });
    }
    void wait_upload(uint64_t ticket) override {
        guarded([&] { b_->wait_upload(ticket); });
    }
    void finish_upload(uint64_t ticket) override {
        guarded([&] { b_->finish_upload(ticket); });
    }

    void rope_qk_store_kv(const rope_store_args& a) override {
        guarded([&] { b_->rope_qk_store_kv(a); });
    }

    // The recording's replay throws kernel_errors too; ops() calls this adapter, so its errors
    // are already cacheblend::error.
    std::unique_ptr<recorded_ops> record(const std::function<void()>& ops) override {
        std::unique_ptr<recorded_ops> r = guarded([&] { return b_->record(ops); });
        return r ? std::make_unique<checked_replay>(std::move(r)) : nullptr;
    }

    void matmul(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
                const float* bias) override {
        guarded([&] { b_->matmul(w, x, m, ldx, y, ldy, bias); });
    }
    void matmuls(const float* x, int64_t m, int64_t ldx, const matmul_out* outs, int n,
                 const pre_norm* norm) override {
        guarded([&] { b_->matmuls(x, m, ldx, outs, n, norm); });
    }
    void matmul_add(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                    int64_t ldy, float* tmp) override {
        guarded([&] { b_->matmul_add(w, x, m, ldx, y, ldy, tmp); });
    }
    void matmul_swiglu(const weight_view& gate, const weight_view& up, const float* x, int64_t m,
                       int64_t ldx, float* out, int64_t ld, float* tmp,
                       const pre_norm* norm) override {
        guarded([&] { b_->matmul_swiglu(gate, up, x, m, ldx, out, ld, tmp, norm); });
    }
    void get_rows(const weight_view& w, const int32_t* ids, int64_t m, float* y,
                  int64_t ldy) override {
        guarded([&] { b_->get_rows(w, ids, m, y, ldy); });
    }
    void rms_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma, float eps,
                  float* y, int64_t ldy) override {
        guarded([&] { b_->rms_norm(x, m, n, ldx, gamma, eps, y, ldy); });
    }
    void rope(float* x, int64_t m, int64_t ldx, int n_head, int head_dim, const int32_t* pos,
              const rope_params& p) override {
        guarded([&] { b_->rope(x, m, ldx, n_head, head_dim, pos, p); });
    }
    void store_rows_f16(const float* src, int64_t m, int64_t n, int64_t ldsrc, const int32_t* pos,
                        uint16_t* cache, int64_t ld_cache) override {
        guarded([&] { b_->store_rows_f16(src, m, n, ldsrc, pos, cache, ld_cache); });
    }
    void attention(const attention_args& a) override {
        guarded([&] { b_->attention(a); });
    }
    void swiglu(const float* gate, const float* up, int64_t m, int64_t n, int64_t ld,
                float* out) override {
        guarded([&] { b_->swiglu(gate, up, m, n, ld, out); });
    }
    void add_rows(float* y, const float* x, int64_t m, int64_t n, int64_t ld) override {
        guarded([&] { b_->add_rows(y, x, m, n, ld); });
    }
    void relocate_kv(const void* k_src, dtype k_type, const uint16_t* v_src, int64_t n,
                     int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                     const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache,
                     int64_t ld_cache) override {
        guarded([&] {
            b_->relocate_kv(k_src, k_type, v_src, n, ld_src, pos, n_kv_head, head_dim, rope,
                            k_cache, v_cache, ld_cache);
        });
    }
    void kv_deviation(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                      int64_t ld_cached, int64_t n, int64_t width, float* d) override {
        guarded([&] { b_->kv_deviation(fresh, ld_fresh, cached, ld_cached, n, width, d); });
    }
    void attention_mass(const attention_args& a, float* scores) override {
        guarded([&] { b_->attention_mass(a, scores); });
    }
    void gather_rows(const void* src, size_t src_stride, const int32_t* idx, int64_t n,
                     size_t row_bytes, void* dst, size_t dst_stride) override {
        guarded([&] { b_->gather_rows(src, src_stride, idx, n, row_bytes, dst, dst_stride); });
    }
    void layer_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma,
                    const float* beta, float eps, float* y, int64_t ldy) override {
        guarded([&] { b_->layer_norm(x, m, n, ldx, gamma, beta, eps, y, ldy); });
    }
    void gelu_erf(float* x, int64_t m, int64_t n, int64_t ld) override {
        guarded([&] { b_->gelu_erf(x, m, n, ld); });
    }
    void encoder_attention(const encoder_attention_args& a) override {
        guarded([&] { b_->encoder_attention(a); });
    }

private:
    std::unique_ptr<backend> b_;
};

}  // namespace

std::unique_ptr<backend> checked_backend(std::unique_ptr<backend> inner) {
    return std::make_unique<checked>(std::move(inner));
}

}  // namespace cacheblend
