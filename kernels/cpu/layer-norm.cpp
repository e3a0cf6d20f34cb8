// LayerNorm and erf-GELU for encoders (kernels/cpu/encoder-ops.h); GELU's vector body is in
// encoder-ops-impl.h.
#include <cmath>

#include "kernels/cpu/encoder-ops-isa.h"
#include "kernels/cpu/encoder-ops.h"

namespace cacheblend {

void layer_norm(thread_pool& pool, const float* x, int64_t m, int64_t n, int64_t ldx,
                const float* gamma, const float* beta, float eps, float* y, int64_t ldy) {
    if (m <= 0 || n <= 0) return;
    pool.parallel_for(m, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float* xr = x + i * ldx;
            float* yr = y + i * ldy;
            // Two passes in double: the mean and variance of 384 floats, exact enough that the
            // result does not depend on summation order.
            double sum = 0;
            for (int64_t j = 0; j < n; ++j) sum += xr[j];
            const float mean = float(sum / double(n));
            double var = 0;
            for (int64_t j = 0; j < n; ++j) {
                const double d = double(xr[j]) - mean;
                var += d * d;
            }
            const float inv = float(1.0 / std::sqrt(var / double(n) + double(eps)));
            if (beta) {
                for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) * inv * gamma[j] + beta[j];
            } else {
                for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) * inv * gamma[j];
            }
        }
    });
}

void gelu_erf(thread_pool& pool, float* x, int64_t m, int64_t n, int64_t ld) {
    if (m <= 0 || n <= 0) return;
    const enc::isa_kernels& k = enc::kernels_for(cpu_isa_active());
    pool.parallel_for(m, 8, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) k.gelu_row(x + i * ld, n);
    });
}

}  // namespace cacheblend
