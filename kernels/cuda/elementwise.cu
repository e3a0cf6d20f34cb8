#include "kernels/cuda/elementwise.cuh"

#include <cuda_fp16.h>

#include "kernels/cuda/math/elementwise.h"

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
    rows_kernel<<<unsigned(blocks < k_max_blocks ? blocks : k_max_blocks), k_threads, 0,
                  ctx.stream()>>>(m, n, f);
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

struct to_f16_op {
    const float* x;
    int64_t ldx;
    __half* out;
    int64_t ld_out;
    __device__ void operator()(int64_t r, int64_t c) const {
        out[r * ld_out + c] = __float2half_rn(x[r * ldx + c]);
    }
};

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

void cbl_cuda_f32_to_f16_rows(cuda_ctx& ctx, const float* x, int64_t m, int64_t n, int64_t ldx,
                              void* out, int64_t ld_out) {
    launch_rows(ctx, m, n, to_f16_op{x, ldx, static_cast<__half*>(out), ld_out});
}

}  // namespace cuda
}  // namespace cacheblend
