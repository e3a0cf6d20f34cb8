#include "kernels/cuda/norm.cuh"

#include "kernels/cuda/math/rms-norm.h"
#include "kernels/cuda/rms-block-sum.cuh"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = k_rms_threads;

// One block per row. The sum of squares is kept in double like the CPU's (ggml's) so that the
// reordered parallel sum still rounds to the CPU's float mean in all but rare ties; its order is
// rms_block_sum's, which the decode GEMV's own norm shares.
__global__ void rms_norm_kernel(rms_norm_args a) {
    const int64_t row = blockIdx.x;
    const float* x = a.x + row * a.ldx;
    float* y = a.y + row * a.ldy;
    __shared__ double partial[k_threads / 32];
    const double total = rms_block_sum<k_threads>(x, a.n, partial);
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
