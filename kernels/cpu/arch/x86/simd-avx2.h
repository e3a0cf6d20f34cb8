// AVX2/FMA building blocks shared by the *-avx2.cpp kernels. Include only from translation units
// compiled with the AVX2 flags; everything is `static` so no copy can leak into baseline code.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace cacheblend {
namespace avx2_simd {

// Lane mask for the first n (clamped to [0, 8]) floats, for maskload / maskstore.
static inline __m256i tail_mask(int64_t n) {
    const int c = n < 0 ? 0 : (n > 8 ? 8 : static_cast<int>(n));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Transposes the 8x8 matrix held in r[0..7] in place.
static inline void transpose8(__m256 r[8]) {
    __m256 t[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    __m256 u[8];
    for (int i = 0; i < 2; ++i) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    // u[4g + c], 128-bit lane L: column 4L + c of rows 4g..4g+3.
    for (int c = 0; c < 4; ++c) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 2^n for integral float n in [-126, 127].
static inline __m256 pow2i(__m256 n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                         _mm256_set1_epi32(127)), 23);
    return _mm256_castsi256_ps(e);
}

// 2^x for x <= 0 (softmax weights); inputs below -126 give (nearly) 0. Degree-5 minimax
// polynomial on [-0.5, 0.5]: 2.3e-7 relative error.
static inline __m256 exp2_neg(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-126.f));
    const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(x, n);
    __m256 p = _mm256_set1_ps(1.327647245e-3f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.675540961e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550713092e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402212024e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931469440e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.000000119e+0f));
    return _mm256_mul_ps(p, pow2i(n));
}

// e^x with Cody-Waite reduction (~1-2 ulp); inf above ~88.7, 0 below ~-87.3 (no subnormals).
static inline __m256 exp(__m256 x) {
    const __m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(88.8f), _CMP_GT_OQ);
    const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(-87.4f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.4f)), _mm256_set1_ps(88.8f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.f));
    // n may be 128 near the top: split the scaling so 2^n never overflows the exponent field.
    const __m256 n1 = _mm256_round_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)),
                                      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(_mm256_sub_ps(n, n1)));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), hi);
    return _mm256_blendv_ps(y, _mm256_setzero_ps(), lo);
}

}  // namespace avx2_simd
}  // namespace cacheblend
