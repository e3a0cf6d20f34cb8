// AVX-512 VNNI kernels of the integer GEMM (igemm.h): the canonical float sequence per output,
// integer sums by vpdpbusd.
//
// Prefill (gemm_rows): 32 weight rows at a time are unpacked into a panel whose every group holds
// the weights as [k/4][32 columns][4 bytes] (one vpdpbusd operand per 4 k-values and 16 columns)
// followed by per-column int32 sub-block scales, the zero-point correction, the float scales and
// the mins. A 4-row x 32-column register tile keeps the sub-block sums, the group's int32 total
// and the float accumulators; activations are broadcast 4 bytes at a time.
// Decode (gemv_rows): the raw blocks of 16 weight rows are unpacked in registers and dotted with
// each activation row, lanes over k; a transpose-add tree turns the 16 rows' lane vectors into one
// vector of exact group totals (lane r = row r), and the float steps run with lanes over rows, in
// the same order as the tile's lanes run them. One activation row of a K-quant (every decode step)
// goes to its own kernel, igemm-gemv1-avx512.cpp, which gives the same bits in fewer instructions.
//
// Operand signs: vpdpbusd multiplies unsigned by signed bytes. q4_0/q5_0/q4_K/q5_K weights stay
// unsigned (0..31) and meet signed activations (q4_0/q5_0's zero point is taken off as zp times
// the activation's block sum); q6_K's zero point (32) sits under a scale that changes every 16
// elements, where it would cost sum_j sc_j * asum16_j per output, so its weights are made signed
// (q - 32) instead and meet activations stored as u8 = s8 + 128, whose extra 128 * sum(w) per
// sub-block depends on the weights only: a per-column correction computed when they are unpacked.

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/arch/x86/igemm-decode-avx512.h"
#include "kernels/cpu/arch/x86/igemm-panel-avx512.h"
#include "kernels/cpu/igemm.h"
#include "kernels/cpu/quants-impl.h"

namespace cacheblend {
namespace igemm {
namespace {

using namespace qimpl;

// MR activation rows x 32 columns over all groups. aq[i]: row i's bytes; ad[i]: its group scales;
// as[i]: its sums per 32 (mins types).
template <dtype T, int MR>
void tile(const uint8_t* pk, int64_t ng, const uint8_t* const* aq, const float* const* ad,
          const int16_t* const* as, float* out, int64_t ldo) {
    using K = kt<T>;
    using L = panel_layout<T>;
    __m512 acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        const uint8_t* P = pk + g * L::bytes;
        __m512i tot[MR][2];
        for (int i = 0; i < MR; ++i) {
            if (K::U8ACT) {
                tot[i][0] = ld512(P + L::init_off);
                tot[i][1] = ld512(P + L::init_off + 64);
            } else if (K::ZP) {
                // q4_0 / q5_0: raw unsigned weights; their zero point times the activation sum
                tot[i][0] = tot[i][1] = _mm512_set1_epi32(-K::ZP * as[i][g]);
            } else {
                tot[i][0] = tot[i][1] = _mm512_setzero_si512();
            }
        }
        for (int j = 0; j < K::NSUB; ++j) {
            __m512i s[MR][2];
            for (int i = 0; i < MR; ++i) s[i][0] = s[i][1] = _mm512_setzero_si512();
            for (int t = 0; t < K::SUB / 4; ++t) {
                const uint8_t* wp = P + (j * (K::SUB / 4) + t) * 128;
                const __m512i w0 = ld512(wp), w1 = ld512(wp + 64);
                const int64_t e = g * K::G + j * K::SUB + 4 * t;
                for (int i = 0; i < MR; ++i) {
                    const __m512i a = _mm512_set1_epi32(static_cast<int>(ld32(aq[i] + e)));
                    if (K::U8ACT) {
                        s[i][0] = _mm512_dpbusd_epi32(s[i][0], a, w0);
                        s[i][1] = _mm512_dpbusd_epi32(s[i][1], a, w1);
                    } else {
                        s[i][0] = _mm512_dpbusd_epi32(s[i][0], w0, a);
                        s[i][1] = _mm512_dpbusd_epi32(s[i][1], w1, a);
                    }
                }
            }
            if (K::SC) {
                const __m512i sc0 = ld512(P + L::sc_off + j * 128), sc1 = ld512(P + L::sc_off + j * 128 + 64);
                for (int i = 0; i < MR; ++i) {
                    tot[i][0] = _mm512_add_epi32(tot[i][0], _mm512_mullo_epi32(s[i][0], sc0));
                    tot[i][1] = _mm512_add_epi32(tot[i][1], _mm512_mullo_epi32(s[i][1], sc1));
                }
            } else {
                for (int i = 0; i < MR; ++i) {
                    tot[i][0] = _mm512_add_epi32(tot[i][0], s[i][0]);
                    tot[i][1] = _mm512_add_epi32(tot[i][1], s[i][1]);
                }
            }
        }
        const __m512 dw0 = _mm512_load_ps(P + L::dw_off), dw1 = _mm512_load_ps(P + L::dw_off + 64);
        for (int i = 0; i < MR; ++i) {
            const __m512 da = _mm512_set1_ps(ad[i][g]);
            acc[i][0] = _mm512_fmadd_ps(_mm512_mul_ps(dw0, da), _mm512_cvtepi32_ps(tot[i][0]), acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(_mm512_mul_ps(dw1, da), _mm512_cvtepi32_ps(tot[i][1]), acc[i][1]);
        }
        if (K::MINS) {
            const __m512 dm0 = _mm512_load_ps(P + L::dmin_off), dm1 = _mm512_load_ps(P + L::dmin_off + 64);
            for (int i = 0; i < MR; ++i) {
                __m512i ms0 = _mm512_setzero_si512(), ms1 = _mm512_setzero_si512();
                for (int p = 0; p < K::NSUB / 2; ++p) {
                    const __m512i a = _mm512_set1_epi32(static_cast<int>(
                        ld32(reinterpret_cast<const uint8_t*>(as[i] + g * 8 + 2 * p))));
                    ms0 = _mm512_add_epi32(ms0, _mm512_madd_epi16(ld512(P + L::mp_off + p * 128), a));
                    ms1 = _mm512_add_epi32(ms1, _mm512_madd_epi16(ld512(P + L::mp_off + p * 128 + 64), a));
                }
                const __m512 da = _mm512_set1_ps(ad[i][g]);
                acc[i][0] = _mm512_fnmadd_ps(_mm512_mul_ps(dm0, da), _mm512_cvtepi32_ps(ms0), acc[i][0]);
                acc[i][1] = _mm512_fnmadd_ps(_mm512_mul_ps(dm1, da), _mm512_cvtepi32_ps(ms1), acc[i][1]);
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        _mm512_storeu_ps(out + i * ldo, acc[i][0]);
        _mm512_storeu_ps(out + i * ldo + 16, acc[i][1]);
    }
}

template <dtype T>
void gemm_t(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t i0,
            int64_t m, float* out, int64_t ldo) {
    using K = kt<T>;
    using L = panel_layout<T>;
    const int64_t ng = k / K::G;
    static thread_local aligned_array<uint8_t> pk_buf;
    if (pk_buf.size() < static_cast<size_t>(ng * L::bytes)) pk_buf.resize(static_cast<size_t>(ng * L::bytes));
    uint8_t* pk = pk_buf.data();
    const int64_t nsum = k / 32;
    for (int64_t r0 = 0; r0 < nrows; r0 += 32) {
        const int nw = static_cast<int>(nrows - r0 < 32 ? nrows - r0 : 32);
        const uint8_t* rows[32];
        for (int c = 0; c < 32; ++c) rows[c] = w + (r0 + (c < nw ? c : nw - 1)) * w_stride;
        pack_panel<T>(rows, ng, pk);
        for (int64_t ib = 0; ib < m; ib += 4) {
            const int mi = static_cast<int>(m - ib < 4 ? m - ib : 4);
            const uint8_t* aq[4];
            const float* ad[4];
            const int16_t* as[4];
            for (int i = 0; i < 4; ++i) {
                const int64_t ii = i0 + ib + (i < mi ? i : mi - 1);
                aq[i] = a.q + ii * a.ldq;
                ad[i] = a.d + ii * a.ng;
                as[i] = a.asum + ii * nsum;
            }
            alignas(64) float tmp[4 * 32];
            float* dst = out + ib * ldo + r0;
            const bool direct = nw == 32;
            float* o = direct ? dst : tmp;
            const int64_t ldt = direct ? ldo : 32;
            switch (mi) {
                case 4: tile<T, 4>(pk, ng, aq, ad, as, o, ldt); break;
                case 3: tile<T, 3>(pk, ng, aq, ad, as, o, ldt); break;
                case 2: tile<T, 2>(pk, ng, aq, ad, as, o, ldt); break;
                default: tile<T, 1>(pk, ng, aq, ad, as, o, ldt); break;
            }
            if (!direct) {
                for (int i = 0; i < mi; ++i) {
                    for (int c = 0; c < nw; ++c) dst[i * ldo + c] = tmp[i * 32 + c];
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decode: raw blocks, lanes over k.
// ---------------------------------------------------------------------------------------------

// K-quants: 16 weight rows per pass. Each row's group is unpacked into registers and dotted with
// the activation rows (lanes over k, sub-block scales applied per lane); the 16 rows' lane vectors
// are then reduced together (a transpose-add tree: lane r of the result is row r's exact group
// total) and the float steps run with lanes over rows, as the prefill tile's lanes do.

// One K-quant group in registers: the 256 values as 4 chunks of 64 (natural order), the lanes'
// sub-block scales per chunk, the mins as int16 pairs (q4_K/q5_K) and the float scales.
// A lane of one vpdpbusd (4 products) fits int16 (q5_K: 4 * 31 * 127, q6_K: 4 * 255 * 32), so the
// scale is applied by vpdpwssd against lanes holding {scale, 0} as int16 pairs: one instruction
// for multiply and add.
struct kregs {
    __m512i q[4];
    __m512i scl[4];
    __m128i mp;  // 4 int32 lanes, each a pair of int16 mins {mn[2p], mn[2p + 1]}
    float d, dmin;
};

template <dtype T>
inline void unpack_k(const uint8_t* b, kregs& r) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (T == dtype::q6_k) {
        r.d = _cvtsh_ss(ld16(b + 208));
        const __m512i scv = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
        for (int c = 0; c < 4; ++c) {
            // lane l of chunk c: sub-block 4c + l / 4
            const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(4 * c),
                                                 _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2));
            r.scl[c] = _mm512_and_si512(_mm512_permutexvar_epi32(idx, scv), _mm512_set1_epi32(0xFFFF));
        }
        const __m512i m3 = _mm512_set1_epi8(3), k32 = _mm512_set1_epi8(32);
        for (int h = 0; h < 2; ++h) {
            const __m512i l = _mm512_loadu_si512(b + 64 * h);
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
            const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            const __m512i h23 = _mm512_srli_epi16(h01, 4);
            r.q[2 * h] = _mm512_sub_epi8(
                _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m3), 4)), k32);
            r.q[2 * h + 1] = _mm512_sub_epi8(
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                _mm512_slli_epi16(_mm512_and_si512(h23, m3), 4)),
                k32);
        }
        return;
    }
    const bool five = T == dtype::q5_k;
    r.d = _cvtsh_ss(ld16(b));
    r.dmin = _cvtsh_ss(ld16(b + 2));
    const __m128i sb = k4_scale_bytes(b + 4);
    const __m512i scv = _mm512_cvtepu8_epi32(sb);
    for (int c = 0; c < 4; ++c) {
        // lane l of chunk c: sub-block 2c + l / 8
        const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(2 * c),
                                             _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3));
        r.scl[c] = _mm512_permutexvar_epi32(idx, scv);
    }
    r.mp = _mm_cvtepu8_epi16(_mm_srli_si128(sb, 8));
    const uint8_t* qs = b + (five ? 48 : 16);
    const __m256i h = five ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)) : _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
        __m512i z = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(x), _mm256_srli_epi16(x, 4), 1), m4);
        if (five) {
            const __m256i one = _mm256_set1_epi8(1);
            const __m256i hl = _mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one);
            const __m256i hh = _mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one);
            const __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(hl), hh, 1);
            z = _mm512_or_si512(z, _mm512_slli_epi16(hb, 4));
        }
        r.q[c] = z;
    }
}

constexpr int k_gemv_rows = 16;  // weight rows per pass
constexpr int k_gemv_acts = 8;   // activation rows per pass

template <dtype T, int MF>
void gemv_k(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t i0,
            int m_rt, float* out, int64_t ldo) {
    const int m = MF > 0 ? MF : m_rt;
    using K = kt<T>;
    const int64_t ng = k / K::G;
    const int64_t nsum = k / 32;
    const __m512i ones = _mm512_set1_epi8(1);
    alignas(64) __m512i tb[k_gemv_acts][16];
    alignas(64) __m512i ib[16];
    alignas(64) float dws[16], dms[16];
    alignas(64) __m128i mrow[16];  // row r's 4 min pairs
    const uint8_t* aq[k_gemv_acts];
    for (int i = 0; i < m; ++i) aq[i] = a.q + (i0 + i) * a.ldq;
    for (int64_t r0 = 0; r0 < nrows; r0 += k_gemv_rows) {
        const int nr = static_cast<int>(nrows - r0 < k_gemv_rows ? nrows - r0 : k_gemv_rows);
        __m512 acc[k_gemv_acts];
        for (int i = 0; i < m; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; ++g) {
#pragma GCC unroll 16
            for (int rr = 0; rr < 16; ++rr) {
                const uint8_t* blk = w + (r0 + (rr < nr ? rr : nr - 1)) * w_stride + g * K::BLK;
                // The pass jumps between 16 rows, which defeats the hardware prefetchers; the next
                // pass's rows are contiguous, so fetch them evenly: one block's bytes per step.
                if (r0 + 2 * k_gemv_rows <= nrows) {
                    const uint8_t* pf = w + (r0 + k_gemv_rows) * w_stride + (g * 16 + rr) * K::BLK;
                    for (int o = 0; o < K::BLK; o += 64) _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T0);
                }
                kregs u;
                unpack_k<T>(blk, u);
                if (K::U8ACT) {
                    __m512i t = _mm512_setzero_si512();
                    for (int c = 0; c < 4; ++c) {
                        t = _mm512_dpwssd_epi32(t, _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, u.q[c]), u.scl[c]);
                    }
                    ib[rr] = t;
                }
                for (int i = 0; i < m; ++i) {
                    const uint8_t* ap = aq[i] + g * K::G;
                    __m512i t = _mm512_setzero_si512();
                    for (int c = 0; c < 4; ++c) {
                        const __m512i av = ld512(ap + 64 * c);
                        const __m512i p = K::U8ACT ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), av, u.q[c])
                                                   : _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[c], av);
                        t = _mm512_dpwssd_epi32(t, p, u.scl[c]);
                    }
                    tb[i][rr] = t;
                }
                dws[rr] = u.d;
                if (K::MINS) {
                    dms[rr] = u.dmin;
                    mrow[rr] = u.mp;
                }
            }
            __m512i init = _mm512_setzero_si512();
            if (K::U8ACT) init = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(reduce16(ib), 7));
            const __m512 dwv = _mm512_load_ps(dws);
            __m512i mpv[4];
            if (K::MINS) min_pairs_by_row(mrow, mpv);
            for (int i = 0; i < m; ++i) {
                const int64_t ii = i0 + i;
                const __m512i isum = _mm512_add_epi32(reduce16(tb[i]), init);
                const __m512 da = _mm512_set1_ps(a.d[ii * a.ng + g]);
                acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dwv, da), _mm512_cvtepi32_ps(isum), acc[i]);
                if (K::MINS) {
                    const __m512i ms = min_sums(mpv, a.asum + ii * nsum + g * 8);
                    acc[i] = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_load_ps(dms), da), _mm512_cvtepi32_ps(ms), acc[i]);
                }
            }
        }
        const __mmask16 keep = static_cast<__mmask16>((1u << nr) - 1);
        for (int i = 0; i < m; ++i) _mm512_mask_storeu_ps(out + i * ldo + r0, keep, acc[i]);
    }
}

// q4_0 / q5_0: two blocks of a row per zmm (lanes 0-7 block g, 8-15 block g + 1), 16 rows per
// pass; reduce16_halves leaves each row's two block sums in separate lanes.
template <dtype T>
inline __m512i unpack_pair(const uint8_t* b0, const uint8_t* b1) {
    const int qs_off = T == dtype::q5_0 ? 6 : 2;
    const __m256i x = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + qs_off))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + qs_off)), 1);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(x, m4)),
                                         _mm256_and_si256(_mm256_srli_epi16(x, 4), m4), 1);
    __m512i v = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));  // [lo0 hi0 lo1 hi1]
    if (T == dtype::q5_0) {
        const __mmask64 qh = static_cast<__mmask64>(ld32(b0 + 2)) | (static_cast<__mmask64>(ld32(b1 + 2)) << 32);
        v = _mm512_or_si512(v, _mm512_maskz_mov_epi8(qh, _mm512_set1_epi8(0x10)));
    }
    return v;  // raw unsigned values: the zero point is taken off with the activation sums
}

// MF > 0: exactly MF activation rows, known at compile time (decode: 1), so the 16 rows' lane
// vectors stay in registers through the reduction.
template <dtype T, int MF>
void gemv_l(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t i0,
            int m_rt, float* out, int64_t ldo) {
    const int m = MF > 0 ? MF : m_rt;
    using K = kt<T>;
    const int64_t ng = k / K::G;
    const int64_t nsum = k / 32;
    alignas(64) __m512i tb[k_gemv_acts][16];
    alignas(64) float dws[2][16];
    const uint8_t* aq[k_gemv_acts];
    for (int i = 0; i < m; ++i) aq[i] = a.q + (i0 + i) * a.ldq;
    for (int64_t r0 = 0; r0 < nrows; r0 += k_gemv_rows) {
        const int nr = static_cast<int>(nrows - r0 < k_gemv_rows ? nrows - r0 : k_gemv_rows);
        __m512 acc[k_gemv_acts];
        for (int i = 0; i < m; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; g += 2) {
            const bool pair = g + 1 < ng;  // an odd last block: its pair repeats it, and is unused
#pragma GCC unroll 16
            for (int rr = 0; rr < 16; ++rr) {
                const uint8_t* row = w + (r0 + (rr < nr ? rr : nr - 1)) * w_stride;
                const uint8_t* b0 = row + g * K::BLK;
                const uint8_t* b1 = pair ? b0 + K::BLK : b0;
                if (r0 + 2 * k_gemv_rows <= nrows) {
                    const uint8_t* pf = w + (r0 + k_gemv_rows) * w_stride + (g * 16 + 2 * rr) * K::BLK;
                    for (int o = 0; o < 2 * K::BLK; o += 64) _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T0);
                }
                const __m512i q = unpack_pair<T>(b0, b1);
                for (int i = 0; i < m; ++i) {
                    // Activation rows are padded to 64 bytes: the odd last block reads padding.
                    tb[i][rr] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, ld512(aq[i] + g * K::G));
                }
                dws[0][rr] = _cvtsh_ss(ld16(b0));
                dws[1][rr] = _cvtsh_ss(ld16(b1));
            }
            for (int i = 0; i < m; ++i) {
                const int64_t ii = i0 + i;
                __m512i is[2];
                reduce16_halves(tb[i], is[0], is[1]);
                for (int h = 0; h < (pair ? 2 : 1); ++h) {
                    const __m512i zp = _mm512_set1_epi32(-K::ZP * a.asum[ii * nsum + g + h]);
                    const __m512 da = _mm512_set1_ps(a.d[ii * a.ng + g + h]);
                    acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(dws[h]), da),
                                             _mm512_cvtepi32_ps(_mm512_add_epi32(is[h], zp)), acc[i]);
                }
            }
        }
        const __mmask16 keep = static_cast<__mmask16>((1u << nr) - 1);
        for (int i = 0; i < m; ++i) _mm512_mask_storeu_ps(out + i * ldo + r0, keep, acc[i]);
    }
}

}  // namespace

void gemm_rows(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
               const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo) {
    const auto* wb = static_cast<const uint8_t*>(wbase);
    switch (w) {
        case dtype::q4_0: return gemm_t<dtype::q4_0>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q5_0: return gemm_t<dtype::q5_0>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q4_k: return gemm_t<dtype::q4_k>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q5_k: return gemm_t<dtype::q5_k>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q6_k: return gemm_t<dtype::q6_k>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        default: return;
    }
}

void gemv_rows(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
               const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo) {
    const auto* wb = static_cast<const uint8_t*>(wbase);
    for (int64_t ib = 0; ib < m; ib += k_gemv_acts) {
        const int mi = static_cast<int>(m - ib < k_gemv_acts ? m - ib : k_gemv_acts);
        float* o = out + ib * ldo;
        if (mi == 1 && gemv1_rows(w, k, wb, w_stride, nrows, a, i0 + ib, o)) continue;
        switch (w) {
            case dtype::q4_0: (mi == 1 ? gemv_l<dtype::q4_0, 1> : gemv_l<dtype::q4_0, 0>)(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q5_0: (mi == 1 ? gemv_l<dtype::q5_0, 1> : gemv_l<dtype::q5_0, 0>)(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q4_k: (mi == 1 ? gemv_k<dtype::q4_k, 1> : gemv_k<dtype::q4_k, 0>)(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q5_k: (mi == 1 ? gemv_k<dtype::q5_k, 1> : gemv_k<dtype::q5_k, 0>)(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q6_k: (mi == 1 ? gemv_k<dtype::q6_k, 1> : gemv_k<dtype::q6_k, 0>)(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            default: return;
        }
    }
}

}  // namespace igemm
}  // namespace cacheblend
