// RMSNorm on device rows: y = x / sqrt(mean(x^2) + eps) * gamma (y may alias x).
#pragma once

#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

struct rms_norm_args {
    const float* x = nullptr;
    int64_t m = 0, n = 0, ldx = 0;
    const float* gamma = nullptr;  // n floats (device)
    float eps = 0.f;
    float* y = nullptr;
    int64_t ldy = 0;
};

void cbl_cuda_rms_norm(cuda_ctx& ctx, const rms_norm_args& a);

}  // namespace cuda
}  // namespace cacheblend
