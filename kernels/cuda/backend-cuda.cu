// cacheblend::backend on one CUDA device. Ops are queued on the context's stream in call order;
// upload / download / synchronize order host memory against them. Errors are
// kernel_error(kernel_status::device); after a sticky one (the CUDA context is unusable) every later call
// fails fast with the first message (docs/ARCHITECTURE.md, 'C ABI').
#include "kernels/cuda/backend-cuda.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/attention-gemm.cuh"
#include "kernels/cuda/attention-mass.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/copy-lane.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gather-rows.cuh"
#include "kernels/cuda/kv-deviation.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/recording.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/store-rows.cuh"

namespace cacheblend {
namespace {

// CBL_CUDA_GRAPHS=0 records nothing, so every op is launched as it is called: the benchmark's
// other side (scripts/gpu-check.sh) and a way around a driver that mishandles graphs. Read once.
bool graphs_disabled() {
    static const bool off = [] {
        const char* v = std::getenv("CBL_CUDA_GRAPHS");
        return v != nullptr && std::strcmp(v, "0") == 0;
    }();
    return off;
}

class backend_cuda final : public backend {
public:
    explicit backend_cuda(int device)
        : ctx_(device), lane_(ctx_), name_("cuda:" + std::to_string(device)) {}

    const char* name() const override { return name_.c_str(); }
    int n_threads() const override { return 1; }  // host threads: the device does the work
    // Its own stream, scratch and cuBLASLt state on the same device (device memory is the
    // process's: weights another sibling uploaded and synchronized are readable here). Not
    // through run(): a runtime's sessions call this from many threads, and it reads nothing of
    // this backend's state but the device number.
    std::unique_ptr<backend> sibling() override { return create_cuda_backend(ctx_.device()); }
    bool host_memory() const override { return false; }

    void* alloc(size_t bytes) override {
        return run([&] {
            void* p = nullptr;
            if (bytes) CBL_CUDA_CHECK(cudaMalloc(&p, bytes));  // 256-byte aligned
            return p;
        });
    }
    // cudaFree waits for queued work that may still use p. Errors cannot be reported here.
    void free(void* p) noexcept override {
        if (!p) return;
        const cuda::device_guard on(ctx_.device(), false);
        cudaFree(p);
        (void)cudaGetLastError();  // unreported, so it must not surface as a later op's failure
    }
    void upload(void* dst, const void* host_src, size_t bytes) override {
        // From pageable memory the call returns once host_src has been staged, so the caller may
        // reuse it; ordered on our stream (a legacy-stream cudaMemcpy would not be).
        run([&] {
            CBL_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice,
                                           ctx_.stream()));
        });
    }
    void download(void* host_dst, const void* src, size_t bytes) override {
        run([&] {
            CBL_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost,
                                           ctx_.stream()));
            ctx_.synchronize();
        });
    }
    void copy(void* dst, const void* src, size_t bytes) override {
        run([&] {
            CBL_CUDA_CHECK(
                cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()));
        });
    }
    void synchronize() override {
        run([&] { ctx_.synchronize(); });
    }
    // Pinned, so upload_async's copies run on the copy engine without a staging copy.
    void* alloc_host(size_t bytes) override {
        return run([&] {
            void* p = nullptr;
            CBL_CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault));
            return p;
        });
    }
    void free_host(void* p) noexcept override {
        if (!p) return;
        const cuda::device_guard on(ctx_.device(), false);
        cudaFreeHost(p);  // waits for copies that may still read it; errors cannot be reported
        (void)cudaGetLastError();  // ... nor surface as a later op's failure
    }
    uint64_t upload_async(void* dst, const void* host_src, size_t bytes) override {
        return run([&] { return lane_.start(dst, host_src, bytes); });
    }
    void wait_upload(uint64_t ticket) override {
        run([&] { lane_.wait(ticket); });
    }
    void finish_upload(uint64_t ticket) override {
        run([&] { lane_.finish(ticket); });
    }

    std::unique_ptr<recorded_ops> record(const std::function<void()>& ops) override {
        if (graphs_disabled()) return nullptr;
        return run([&]() -> std::unique_ptr<recorded_ops> {
            return std::make_unique<graph>(*this, cuda::cbl_cuda_record(ctx_, ops));
        });
    }

    void matmul(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                int64_t ldy, const float* bias) override {
        run([&] { cuda::cbl_cuda_matmul(ctx_, w, x, m, ldx, y, ldy, bias); });
    }
    void matmuls(const float* x, int64_t m, int64_t ldx, const matmul_out* outs, int n,
                 const pre_norm* norm) override {
        run([&] { cuda::cbl_cuda_matmuls(ctx_, x, m, ldx, outs, n, norm); });
    }
    void matmul_add(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                    int64_t ldy, float* tmp) override {
        run([&] { cuda::cbl_cuda_matmul_add(ctx_, w, x, m, ldx, y, ldy, tmp); });
    }
    void matmul_swiglu(const weight_view& gate, const weight_view& up, const float* x, int64_t m,
                       int64_t ldx, float* out, int64_t ld, float* tmp,
                       const pre_norm* norm) override {
        run([&] { cuda::cbl_cuda_matmul_swiglu(ctx_, gate, up, x, m, ldx, out, ld, tmp, norm); });
    }
    void get_rows(const weight_view& w, const int32_t* ids, int64_t m, float* y,
                  int64_t ldy) override {
        run([&] { cuda::cbl_cuda_get_rows(ctx_, w, ids, m, y, ldy); });
    }
    void rms_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma, float eps,
                  float* y, int64_t ldy) override {
        run([&] { cuda::cbl_cuda_rms_norm(ctx_, {x, m, n, ldx, gamma, eps, y, ldy}); });
    }
    void rope(float* x, int64_t m, int64_t ldx, int n_head, int head_dim, const int32_t* pos,
              const rope_params& p) override {
        run([&] { cuda::cbl_cuda_rope(ctx_, {x, m, ldx, n_head, head_dim, pos, p}); });
    }
    void store_rows_f16(const float* src, int64_t m, int64_t n, int64_t ldsrc, const int32_t* pos,
                        uint16_t* cache, int64_t ld_cache) override {
        run([&] { cuda::cbl_cuda_store_rows_f16(ctx_, src, m, n, ldsrc, pos, cache, ld_cache); });
    }
    void rope_qk_store_kv(const rope_store_args& a) override {
        run([&] { cuda::cbl_cuda_rope_qk_store_kv(ctx_, a); });
    }
    void attention(const attention_args& a) override {
        run([&] { cuda::cbl_cuda_attention(ctx_, a); });
    }
    void swiglu(const float* gate, const float* up, int64_t m, int64_t n, int64_t ld,
                float* out) override {
        run([&] { cuda::cbl_cuda_swiglu(ctx_, gate, up, m, n, ld, out); });
    }
    void add_rows(float* y, const float* x, int64_t m, int64_t n, int64_t ld) override {
        run([&] { cuda::cbl_cuda_add_rows(ctx_, y, x, m, n, ld); });
    }
    void relocate_kv(const void* k_src, dtype k_type, const uint16_t* v_src, int64_t n,
                     int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                     const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache,
                     int64_t ld_cache) override {
        run([&] {
            cuda::cbl_cuda_relocate_kv(ctx_, {k_src, k_type, v_src, n, ld_src, pos, n_kv_head,
                                              head_dim, rope, k_cache, v_cache, ld_cache});
        });
    }
    void kv_deviation(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                      int64_t ld_cached, int64_t n, int64_t width, float* d) override {
        run([&] {
            cuda::cbl_cuda_kv_deviation(ctx_, fresh, ld_fresh, cached, ld_cached, n, width, d);
        });
    }

    void gather_rows(const void* src, size_t src_stride, const int32_t* idx, int64_t n,
                     size_t row_bytes, void* dst, size_t dst_stride) override {
        run([&] {
            cuda::cbl_cuda_gather_rows(ctx_, src, src_stride, idx, n, row_bytes, dst, dst_stride);
        });
    }

    // The query selection policies' signal (core/blend/selection.h).
    void attention_mass(const attention_args& a, float* scores) override {
        run([&] { cuda::cbl_cuda_attention_mass(ctx_, a, scores); });
    }

    // The encoder runs on the CPU backend (the runtime's); these are not on the GPU yet.
    void layer_norm(const float*, int64_t, int64_t, int64_t, const float*, const float*, float,
                    float*, int64_t) override {
        not_yet("layer_norm");
    }
    void gelu_erf(float*, int64_t, int64_t, int64_t) override { not_yet("gelu_erf"); }
    void encoder_attention(const encoder_attention_args&) override { not_yet("encoder_attention"); }

private:
    // What record() returns: replays go through run() like every other entry.
    class graph final : public recorded_ops {
    public:
        graph(backend_cuda& be, cuda::graph_exec g) : be_(be), g_(std::move(g)) {}
        void replay() override {
            be_.run([&] { cuda::cbl_cuda_replay(be_.ctx_, g_); });
        }

    private:
        backend_cuda& be_;
        cuda::graph_exec g_;
    };

    // Every entry: refuse after a sticky error, make the device current, and on a device error
    // check whether the context survived (a sticky error is also returned by a stream query).
    // While ops are recorded a failed op is the recording's failure, and a query of the
    // capturing stream would be refused (and invalidate the capture): the recording reports it.
    template <typename F>
    auto run(F&& f) -> decltype(f()) {
        if (!poisoned_.empty()) {
            throw kernel_error(kernel_status::device,
                               "cuda: device unusable after an earlier error: " + poisoned_);
        }
        try {
            const cuda::device_guard on(ctx_.device());
            return f();
        } catch (const kernel_error& e) {
            if (!ctx_.recording() &&
                (e.code() == kernel_status::device || e.code() == kernel_status::device_oom)) {
                const cudaError_t q = cudaStreamQuery(ctx_.stream_if_created());
                if (q != cudaSuccess && q != cudaErrorNotReady) poisoned_ = e.what();
            }
            throw;
        }
    }

    [[noreturn]] static void not_yet(const char* op) {
        throw kernel_error(kernel_status::unsupported,
                           kernel_fmt("cuda %s: not implemented (the encoder runs on the CPU)",
                                      op));
    }

    cuda::cuda_ctx ctx_;
    cuda::copy_lane lane_;  // after ctx_: destroyed first, while the compute stream exists
    std::string name_;
    std::string poisoned_;  // first sticky error's message; empty while healthy
};

}  // namespace

namespace {

// cudaGetDeviceCount, with n = 0 and the error cleared when it fails (no driver, or one older
// than this build's runtime): not an error the next CUDA call should see.
cudaError_t count_devices(int* n) noexcept {
    *n = 0;
    const cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *n = 0;
    }
    return e;
}

}  // namespace

int cuda_device_count() noexcept {
    int n = 0;
    count_devices(&n);
    return n;
}

std::string cuda_unavailable_reason() noexcept {
    try {
        int n = 0;
        const cudaError_t e = count_devices(&n);
        if (e != cudaSuccess)
            return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
        return n == 0 ? "the CUDA driver lists no device" : "";
    } catch (...) {  // std::string's allocation
        return "";
    }
}

int64_t cuda_attention_gemm_calls() noexcept { return cuda::cbl_cuda_attention_gemm_calls(); }
int64_t cuda_attention_split_calls() noexcept { return cuda::cbl_cuda_attention_split_calls(); }

std::unique_ptr<backend> create_cuda_backend(int device) {
    int n = 0;
    const cudaError_t e = count_devices(&n);
    if (e != cudaSuccess) {
        // Why there is none matters: no driver, or one older than this build's runtime.
        throw kernel_error(kernel_status::device,
                           kernel_fmt("cuda: no device %d: %s (%s)", device, cudaGetErrorName(e),
                                      cudaGetErrorString(e)));
    }
    if (device < 0 || device >= n) {
        throw kernel_error(kernel_status::device,
                           kernel_fmt("cuda: no device %d (%d present)", device, n));
    }
    // Creates the device's context now, so a device that cannot be used fails here, not at the
    // first op; the caller's current device is left as it was.
    { const cuda::device_guard on(device); }
    return std::make_unique<backend_cuda>(device);
}

}  // namespace cacheblend
