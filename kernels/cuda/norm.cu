#include "kernels/cuda/norm.cuh"

#include "kernels/cuda/math/rms-norm.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;

// One block per row. The sum of squares is kept in double like the CPU's (ggml's) so that the
// reordered parallel sum still rounds to the CPU's float mean in all but rare ties.
__global__ void rms_norm_kernel(rms_norm_args a) {
    const int64_t row = blockIdx.x;
    const float* x = a.x + row * a.ldx;
    float* y = a.y + row * a.ldy;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x) s += hd::rms_sq_term(x[i]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    __shared__ double partial[k_threads / 32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) partial[warp] = s;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < k_threads / 32; ++w) total += partial[w];  // same order in every thread
    const float scale = hd::rms_norm_scale(total, a.n, a.eps);
    // Every read of x happened before the barrier or is by the thread that writes y[i]: aliasing
    // y = x is safe.
    for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x) {
        y[i] = hd::rms_norm_apply(x[i], scale, a.gamma[i]);
    }
}

}  // namespace

void cbl_cuda_rms_norm(cuda_ctx& ctx, const rms_norm_args& a) {
    if (a.m <= 0 || a.n <= 0) return;
    if (a.m > 0x7fffffff) throw kernel_error(kernel_status::range, "cuda rms_norm: too many rows");
    CBL_CUDA_LAUNCH(unsigned(a.m), k_threads, ctx.stream(), rms_norm_kernel)(a);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
