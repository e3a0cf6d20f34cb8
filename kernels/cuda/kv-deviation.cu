#include "kernels/cuda/kv-deviation.cuh"

#include "kernels/cuda/math/kv-deviation.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_warps = 8;  // rows per block

// One warp per row: lanes stride the row, then a shuffle reduction.
__global__ void kv_deviation_kernel(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                                    int64_t ld_cached, int64_t n, int64_t width, float* d) {
    const int lane = threadIdx.x & 31;
    const int64_t row = int64_t(blockIdx.x) * k_warps + (threadIdx.x >> 5);
    if (row >= n) return;
    const float* f = fresh + row * ld_fresh;
    const uint16_t* c = cached + row * ld_cached;
    float s = 0.f;
    for (int64_t j = lane; j < width; j += 32) s += hd::kv_dev_term(f[j], c[j]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) d[row] = s;
}

}  // namespace

void cbl_cuda_kv_deviation(cuda_ctx& ctx, const float* fresh, int64_t ld_fresh,
                           const uint16_t* cached, int64_t ld_cached, int64_t n, int64_t width,
                           float* d) {
    if (n <= 0) return;
    CBL_CUDA_LAUNCH(grid_1d(n, k_warps), k_warps * 32, ctx.stream(), kv_deviation_kernel)
    (fresh, ld_fresh, cached, ld_cached, n, width, d);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
