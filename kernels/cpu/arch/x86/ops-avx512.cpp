// AVX-512 elementwise kernels for ops.cpp (RMS-norm pieces, SwiGLU, residual add).
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/arch/x86/simd-avx512.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

using avx512_simd::tail_mask;

// ggml's rms_norm: float products summed in double, strictly in order (GCC does not reorder
// the scalar loop), so the sum has the peer's bits.
double sum_sq(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
    return s;
}

void scale_mul(const float* x, float s, const float* g, float* y, int64_t n) {
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, g + i)));
    }
}

// ggml_vec_swiglu_f32: ggml_v_silu(x) = x / (1 + ggml_v_expf(-x)) per 16 lanes, the tail in
// scalar code with expf (ggml_silu_f32).
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.f);
    int64_t i = 0;
    for (; i + 15 < n; i += 16) {
        const __m512 x = _mm512_loadu_ps(gate + i);
        const __m512 e = avx512_simd::ggml_expf(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
    }
    for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
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
