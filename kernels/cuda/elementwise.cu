#include "kernels/cuda/elementwise.cuh"

#include <cuda_fp16.h>

#include "kernels/cuda/block-reduce.cuh"
#include "kernels/cuda/math/elementwise.h"
#include "kernels/cuda/math/f16-staging.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;
constexpr int64_t k_max_blocks = int64_t(1) << 20;  // grid-stride beyond this

// Calls f(r, c) for every element of an m x n block, one thread per element, grid-stride.
template <typename F>
__global__ void rows_kernel(int64_t m, int64_t n, F f) {
    const int64_t total = m * n;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = idx / n;
        f(r, idx - r * n);
    }
}

template <typename F>
void launch_rows(cuda_ctx& ctx, int64_t m, int64_t n, F f) {
    if (m <= 0 || n <= 0) return;
    const int64_t blocks = (m * n + k_threads - 1) / k_threads;
    CBL_CUDA_LAUNCH(unsigned(blocks < k_max_blocks ? blocks : k_max_blocks), k_threads,
                    ctx.stream(), rows_kernel<F>)
    (m, n, f);
    CBL_CUDA_LAUNCH_CHECK();
}

// Functors rather than extended lambdas: no --extended-lambda flag needed.
struct swiglu_op {
    const float* gate;
    const float* up;
    float* out;
    int64_t ld;
    __device__ void operator()(int64_t r, int64_t c) const {
        out[r * ld + c] = hd::swiglu(gate[r * ld + c], up[r * ld + c]);
    }
};

struct add_op {
    float* y;
    const float* x;
    int64_t ld;
    __device__ void operator()(int64_t r, int64_t c) const {
        y[r * ld + c] = hd::add(y[r * ld + c], x[r * ld + c]);
    }
};

struct bias_op {
    float* y;
    const float* bias;
    int64_t ldy;
    __device__ void operator()(int64_t r, int64_t c) const {
        y[r * ldy + c] = hd::add(y[r * ldy + c], bias[c]);
    }
};

// Rows handled by the one-block-per-row kernels below, grid-stride beyond this many blocks.
constexpr int64_t k_max_row_blocks = int64_t(1) << 16;

unsigned row_blocks(int64_t m) { return unsigned(m < k_max_row_blocks ? m : k_max_row_blocks); }

// One block per row: the row's largest magnitude (NaNs ignored by fmaxf, inf kept), its staging
// exponent, then the staged f16 values; the second read of the row comes from the cache.
__global__ void f16_stage_kernel(const float* x, int64_t m, int64_t n, int64_t ldx, __half* out,
                                 int64_t ld_out, int32_t* exps) {
    __shared__ float partial[k_threads / 32];
    for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
        const float* xr = x + r * ldx;
        float amax = 0.f;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x) amax = fmaxf(amax, fabsf(xr[c]));
        const int e = hd::f16_stage_exponent(block_reduce<true, k_threads>(amax, partial));
        if (threadIdx.x == 0) exps[r] = e;
        __half* o = out + r * ld_out;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
            o[c] = __float2half_rn(hd::f16_stage(xr[c], e));
        }
    }
}

__global__ void f16_unstage_kernel(float* y, int64_t m, int64_t n, int64_t ldy, const int32_t* exps,
                                   const float* bias) {
    for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
        const int e = exps[r];
        if (e == 0 && bias == nullptr) continue;  // the common case: nothing to do
        float* yr = y + r * ldy;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
            const float v = hd::f16_unstage(yr[c], e);
            yr[c] = bias ? hd::add(v, bias[c]) : v;
        }
    }
}

}  // namespace

void cbl_cuda_swiglu(cuda_ctx& ctx, const float* gate, const float* up, int64_t m, int64_t n,
                     int64_t ld, float* out) {
    launch_rows(ctx, m, n, swiglu_op{gate, up, out, ld});
}

void cbl_cuda_add_rows(cuda_ctx& ctx, float* y, const float* x, int64_t m, int64_t n, int64_t ld) {
    launch_rows(ctx, m, n, add_op{y, x, ld});
}

void cbl_cuda_add_bias(cuda_ctx& ctx, float* y, int64_t m, int64_t n, int64_t ldy,
                       const float* bias) {
    launch_rows(ctx, m, n, bias_op{y, bias, ldy});
}

void cbl_cuda_f16_stage_rows(cuda_ctx& ctx, const float* x, int64_t m, int64_t n, int64_t ldx,
                             void* out, int64_t ld_out, int32_t* exps) {
    if (m <= 0) return;
    CBL_CUDA_LAUNCH(row_blocks(m), k_threads, ctx.stream(), f16_stage_kernel)
    (x, m, n, ldx, static_cast<__half*>(out), ld_out, exps);
    CBL_CUDA_LAUNCH_CHECK();
}

void cbl_cuda_f16_unstage_rows(cuda_ctx& ctx, float* y, int64_t m, int64_t n, int64_t ldy,
                               const int32_t* exps, const float* bias) {
    if (m <= 0 || n <= 0) return;
    CBL_CUDA_LAUNCH(row_blocks(m), k_threads, ctx.stream(), f16_unstage_kernel)
    (y, m, n, ldy, exps, bias);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
