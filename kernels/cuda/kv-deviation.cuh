// KV deviation scores for blended prefill: d[i] = sum_j (fresh[i][j] - cached[i][j])^2 over
// `width` elements, fresh f32 and cached f16 (device rows). Top-k selection stays on the host.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

void cbl_cuda_kv_deviation(cuda_ctx& ctx, const float* fresh, int64_t ld_fresh,
                           const uint16_t* cached, int64_t ld_cached, int64_t n, int64_t width,
                           float* d);

}  // namespace cuda
}  // namespace cacheblend
