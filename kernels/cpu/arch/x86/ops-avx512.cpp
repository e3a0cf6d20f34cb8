// AVX-512 elementwise kernels for ops.cpp (RMS-norm pieces, SwiGLU, residual add).
#include <immintrin.h>

#include "kernels/cpu/arch/x86/simd-avx512.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

using avx512_simd::tail_mask;

// Products in float, sums in double lanes (ggml sums rms_norm in ggml_float = double).
double sum_sq(const float* x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        const __m512 sq = _mm512_mul_ps(v, v);
        const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1));
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(hi));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

void scale_mul(const float* x, float s, const float* g, float* y, int64_t n) {
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, g + i)));
    }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, gate + i);
        const __m512 e = avx512_simd::exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
    }
}

void add(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i),
                                                      _mm512_maskz_loadu_ps(m, x + i)));
    }
}

const elem_kernels k_table = {sum_sq, scale_mul, swiglu, add};

}  // namespace

const elem_kernels& elem_avx512() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
