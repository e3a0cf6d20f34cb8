// AVX-512 building blocks shared by the *-avx512.cpp kernels. Include only from translation units
// compiled with the AVX-512 flags; everything is `static` so no copy can leak into baseline code.
#pragma once

// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

namespace cacheblend {
namespace avx512_simd {

// Transposes the 16x16 matrix held in r[0..15] (row i = r[i]) in place.
static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // t[2i] = a0 b0 a1 b1 | ..., t[2i+1] = a2 b2 a3 b3 | ... (per 128-bit lane)
    for (int i = 0; i < 4; ++i) {
        const __m512 a = t[4 * i], b = t[4 * i + 1], c = t[4 * i + 2], d = t[4 * i + 3];
        r[4 * i + 0] = _mm512_shuffle_ps(a, c, 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(a, c, 0xee);
        r[4 * i + 2] = _mm512_shuffle_ps(b, d, 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(b, d, 0xee);
    }
    // r[4i + c] now holds, in 128-bit lane L, column 4L + c of rows 4i..4i+3.
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);       // lanes 0,2 of each
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);   // lanes 1,3
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);        // column i
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);    // column 8 + i
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);  // column 4 + i
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd); // column 12 + i
    }
}

// 2^x for x <= 0 (softmax weights); inputs below -126 give (nearly) 0. Degree-5 minimax
// polynomial on [-0.5, 0.5]: 2.3e-7 relative error, 5 FMAs (the softmax shares the FMA pipes with
// the attention GEMMs, so every FMA here costs GEMM throughput).
static inline __m512 exp2_neg(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.f));
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.327647245e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.675540961e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550713092e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402212024e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931469440e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.000000119e+0f));
    return _mm512_scalef_ps(p, n);
}

// e^x with Cody-Waite reduction (~1-2 ulp); overflows to inf above ~88.7, 0 below ~-103.
static inline __m512 exp(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.f)), _mm512_set1_ps(89.f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);  // r in [-ln2/2, ln2/2]
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}

// ggml's ggml_v_expf (AVX-512 branch of ggml-cpu/vec.h), operation for operation: what the peer's
// SwiGLU and softmax use, so results match it bit for bit.
static inline __m512 ggml_expf(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
                                        _mm512_set1_ps(0x1.573e2ep-5f)),
                        u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
                                        _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0F)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (_mm512_kortestz(d, d)) return res;
    const __m512 zero = _mm512_setzero_ps();
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ),
                                            _mm512_set1_ps(__builtin_inff()), zero);
    return _mm512_mask_blend_ps(d, res, alt);
}

// Lane mask for the first n (clamped to [0, 16]) floats.
static inline __mmask16 tail_mask(int64_t n) {
    if (n >= 16) return static_cast<__mmask16>(0xffff);
    return n <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace avx512_simd
}  // namespace cacheblend
