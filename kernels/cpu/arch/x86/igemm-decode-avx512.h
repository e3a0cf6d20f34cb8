// Pieces of the integer GEMM's decode GEMVs (igemm.h) shared by the many-row kernel
// (igemm-avx512.cpp) and the one-row kernel (igemm-gemv1-avx512.cpp): the transpose-add tree that
// turns 16 weight rows' lane vectors into one vector of exact row totals, the q4_K/q5_K scale and
// min bytes, and the mins' sums with lanes over rows.
//
// Include only from translation units compiled for AVX-512 (BW/VL/DQ/VNNI + F16C); unnamed
// namespace, as igemm-panel-avx512.h.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/igemm.h"

namespace cacheblend {
namespace igemm {
namespace {

// Lane r of lo / hi: row r's sum over lanes 0-7 / 8-15 of v[r].
inline void reduce16_halves(const __m512i* v, __m512i& lo, __m512i& hi) {
    __m512i t[8], u[4], w[2];
    for (int p = 0; p < 8; ++p) {
        t[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]),
                                _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
    }
    for (int q = 0; q < 4; ++q) {
        u[q] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * q], t[2 * q + 1]),
                                _mm512_unpackhi_epi64(t[2 * q], t[2 * q + 1]));
    }
    for (int r = 0; r < 2; ++r) {
        w[r] = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * r], u[2 * r + 1], 0x88),
                                _mm512_shuffle_i32x4(u[2 * r], u[2 * r + 1], 0xDD));
    }
    lo = _mm512_shuffle_i32x4(w[0], w[1], 0x88);
    hi = _mm512_shuffle_i32x4(w[0], w[1], 0xDD);
}

// Row r's 16 lanes summed into lane r (integer, exact).
inline __m512i reduce16(const __m512i* v) {
    __m512i lo, hi;
    reduce16_halves(v, lo, hi);
    return _mm512_add_epi32(lo, hi);
}

// q4_K / q5_K scales and mins of 8 sub-blocks: bytes 0..7 scales, 8..15 mins (ggml's bit moves on
// the three 32-bit words u0, u1, u2, in one xmm: no store-and-reload). s must have 16 readable
// bytes (the block's quants follow its scales).
inline __m128i k4_scale_bytes(const uint8_t* s) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i m6 = _mm_set1_epi32(0x3f3f3f3f), m4 = _mm_set1_epi32(0x0f0f0f0f),
                  m2 = _mm_set1_epi32(0x03030303);
    // lanes 0, 2: u0 & m6, u1 & m6
    const __m128i p = _mm_and_si128(_mm_shuffle_epi32(x, _MM_SHUFFLE(1, 1, 0, 0)), m6);
    // lanes 1, 3: (u2 >> {0, 4}) & m4 | ((u0, u1) >> 6 & m2) << 4
    const __m128i q = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 2, 2)),
                                                   _mm_setr_epi32(0, 0, 0, 4)),
                                    m4);
    const __m128i r = _mm_slli_epi32(
        _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(x, _MM_SHUFFLE(1, 1, 0, 0)), 6), m2), 4);
    return _mm_blend_epi32(p, _mm_or_si128(q, r), 0xA);
}

// Row r's four q4_K/q5_K min pairs (mrow[r]: 4 int32 lanes, each the int16 pair
// {mn[2p], mn[2p + 1]}) regrouped as mpv[p] (lane r: row r's pair p).
inline void min_pairs_by_row(const __m128i* mrow, __m512i* mpv) {
    const __m512i* z = reinterpret_cast<const __m512i*>(mrow);  // z[q] lane 4j + p: row 4q + j
    for (int p = 0; p < 4; ++p) {
        const __m512i idx =
            _mm512_setr_epi32(p, p + 4, p + 8, p + 12, p + 16, p + 20, p + 24, p + 28, p, p + 4,
                              p + 8, p + 12, p + 16, p + 20, p + 24, p + 28);
        const __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]);
        const __m512i hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);
        mpv[p] = _mm512_shuffle_i64x2(lo, hi, 0x44);
    }
}

// Lane r: sum_j mn_j * asum_j of row r (exact int32); as: the activation's 8 sums per 32 of the group.
inline __m512i min_sums(const __m512i* mpv, const int16_t* as) {
    __m512i ms = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
        int32_t pair;
        std::memcpy(&pair, as + 2 * p, 4);
        ms = _mm512_add_epi32(ms, _mm512_madd_epi16(mpv[p], _mm512_set1_epi32(pair)));
    }
    return ms;
}

}  // namespace

// The one-row decode GEMV of the K-quants (igemm-gemv1-avx512.cpp): out[r] for weight rows r <
// nrows and activation row i of a, the bits of gemv_rows. False (nothing written) for other types
// and for rows longer than its activation buffer; the caller then runs the many-row kernel.
bool gemv1_rows(dtype w, int64_t k, const uint8_t* wbase, size_t w_stride, int64_t nrows,
                const acts& a, int64_t i, float* out);

}  // namespace igemm
}  // namespace cacheblend
