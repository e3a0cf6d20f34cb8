// f32 rows -> the f16 KV cache at absolute positions: cache[pos[i]][0..n) = src[i][0..n), with
// the CPU's exact rounding (hd::f2h), so a cache written here has the CPU's bytes.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

void cbl_cuda_store_rows_f16(cuda_ctx& ctx, const float* src, int64_t m, int64_t n, int64_t ldsrc,
                             const int32_t* pos, uint16_t* cache, int64_t ld_cache);

}  // namespace cuda
}  // namespace cacheblend
