// RMSNorm pieces for the CUDA kernel, the CPU's float math (ggml's): float squares summed in
// double, mean rounded to float, scale = 1 / sqrt(mean + eps), y = (x * scale) * gamma.
// The kernel reduces a row in parallel, so its double sum may differ from the CPU's strictly
// ordered one in the last bits of a double; rms_norm_row is the serial composition.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

CBL_HD inline double rms_sq_term(float x) { return static_cast<double>(mul_rn(x, x)); }

CBL_HD inline float rms_norm_scale(double sum_sq, int64_t n, float eps) {
    const float mean = static_cast<float>(sum_sq / static_cast<double>(n));
    return 1.0f / sqrt_f(add_rn(mean, eps));
}

CBL_HD inline float rms_norm_apply(float x, float scale, float gamma) {
    return mul_rn(mul_rn(x, scale), gamma);
}

// y[0..n) = rmsnorm(x[0..n)) * gamma (y may alias x).
CBL_HD inline void rms_norm_row(const float* x, int64_t n, const float* gamma, float eps,
                                float* y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += rms_sq_term(x[i]);
    const float scale = rms_norm_scale(s, n, eps);
    for (int64_t i = 0; i < n; ++i) y[i] = rms_norm_apply(x[i], scale, gamma[i]);
}

}  // namespace hd
}  // namespace cacheblend
