// AVX2/FMA elementwise kernels for ops.cpp (RMS-norm pieces, SwiGLU, residual add).
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/arch/x86/simd-avx2.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

// Products in float, sums in double lanes (ggml sums rms_norm in ggml_float = double).
double sum_sq(const float* x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 sq = _mm256_mul_ps(v, v);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
    alignas(32) double t[4];
    _mm256_store_pd(t, _mm256_add_pd(a0, a1));
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
    return s;
}

void scale_mul(const float* x, float s, const float* g, float* y, int64_t n) {
    const __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(g + i)));
    }
    for (; i < n; ++i) y[i] = (x[i] * s) * g[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(gate + i);
        const __m256 e = avx2_simd::exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; ++i) out[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

void add(float* y, const float* x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    }
    for (; i < n; ++i) y[i] += x[i];
}

const elem_kernels k_table = {sum_sq, scale_mul, swiglu, add};

}  // namespace

const elem_kernels& elem_avx2() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
