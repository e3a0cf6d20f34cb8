#include "kernels/cuda/store-rows.cuh"

#include "kernels/fp16.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;
constexpr int64_t k_max_blocks = int64_t(1) << 20;

__global__ void store_rows_kernel(const float* src, int64_t m, int64_t n, int64_t ldsrc,
                                  const int32_t* pos, uint16_t* cache, int64_t ld_cache) {
    const int64_t total = m * n;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = idx / n;
        const int64_t c = idx - r * n;
        cache[int64_t(pos[r]) * ld_cache + c] = hd::f2h(src[r * ldsrc + c]);
    }
}

}  // namespace

void cbl_cuda_store_rows_f16(cuda_ctx& ctx, const float* src, int64_t m, int64_t n, int64_t ldsrc,
                             const int32_t* pos, uint16_t* cache, int64_t ld_cache) {
    if (m <= 0 || n <= 0) return;
    const int64_t b = (m * n + k_threads - 1) / k_threads;
    CBL_CUDA_LAUNCH(unsigned(b < k_max_blocks ? b : k_max_blocks), k_threads, ctx.stream(),
                    store_rows_kernel)
    (src, m, n, ldsrc, pos, cache, ld_cache);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
