// The decode GEMV for one activation row and K-quant weights (q4_K, q5_K, q6_K): the bits of the
// many-row kernel (igemm-avx512.cpp, gemv_k), in fewer instructions per block, because one row is
// what every decode step runs and, with the weights in cache, that kernel is bound by vector issue
// (Qwen2.5-1.5B's matmuls from L3: 20 GB/s per core, this one 22). From DRAM both run at what the
// memory gives (27-28 GB/s on two cores of the development VM): the gain shows where cores, not
// memory bandwidth, are the limit. The activation is prepared by each thread for its own rows:
// k bytes against that thread's nrows * k / 256 weight blocks.
//
// What it does differently, all of it integer and exact (isum is the same int32):
// - The activation row is prepared once per call to meet the weights as they come out of their
//   bytes: for q4_K/q5_K, a 64-byte load of quants gives sub-blocks {0, 2} in its low nibbles and
//   {1, 3} in its high ones, so the activation's 32-byte quarters 1 and 2 of every 128 are swapped
//   (no lane-crossing unpack per block); for q6_K the activation is made signed again (its buffer
//   holds s8 + 128 for the many-row kernels) and its sums per 16 are kept, so the weights stay
//   unsigned (0..63) and the zero point 32 comes off as sum_j (32 sc_j) * (-asum16_j) in one
//   vpdpwssd, instead of the per-block correction sum over the weights.
// - Two vpdpbusd results (int32 lanes that fit int16: q5_K 4 * 31 * 128, q6_K 4 * 63 * 128) are
//   packed into one vector of int16 and scaled by one vpdpwssd, whose scale vector is one vpshufb
//   of the block's scale bytes broadcast to every 128-bit lane: half the scale multiplies and no
//   permutes.
// The 16-row pass, the transpose-add tree and the float steps are gemv_k's.

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <array>
#include <cstring>

#include "kernels/cpu/arch/x86/igemm-decode-avx512.h"
#include "kernels/cpu/arch/x86/igemm-panel-avx512.h"
#include "kernels/cpu/igemm.h"

namespace cacheblend {
namespace igemm {
namespace {

constexpr int64_t k_max = 16384;  // activation bytes prepared on the stack
constexpr int k_rows = 16;        // weight rows per pass (lanes of the reduction)

struct prepared_act {
    alignas(64) uint8_t q[k_max];
    alignas(64) int16_t nsum16[k_max / 16];  // q6_K: -(sum of the 16 signed values)
};

// pshufb controls giving one int16 scale per word of a packed pair (p_lo, p_hi) of vpdpbusd
// results: in 128-bit lane j, words 0-3 come from p_lo's lanes 4j..4j+3 and words 4-7 from p_hi's.
// q4_K/q5_K (sub-blocks of 32, unsigned scale bytes 0..7): p_lo holds sub-blocks {c, c + 2} in
// lanes 0-7 / 8-15 and p_hi {c + 1, c + 3}; the scale byte goes to each word's low byte.
// q6_K (sub-blocks of 16, signed scale bytes 0..15): p_lo's lanes 4j.. are sub-block base + j and
// p_hi's base + 4 + j; the byte goes to the high byte (an arithmetic shift by 8 sign-extends it).
using ctl = std::array<uint8_t, 64>;
constexpr ctl k4_ctl(int base) {
    ctl c{};
    for (int j = 0; j < 4; ++j) {
        for (int w = 0; w < 8; ++w) {
            c[16 * j + 2 * w] = static_cast<uint8_t>(base + (j < 2 ? 0 : 2) + (w < 4 ? 0 : 1));
            c[16 * j + 2 * w + 1] = 0x80;
        }
    }
    return c;
}
constexpr ctl q6_ctl(int base) {
    ctl c{};
    for (int j = 0; j < 4; ++j) {
        for (int w = 0; w < 8; ++w) {
            c[16 * j + 2 * w] = 0x80;
            c[16 * j + 2 * w + 1] = static_cast<uint8_t>(base + j + (w < 4 ? 0 : 4));
        }
    }
    return c;
}
alignas(64) constexpr ctl k4_ctl_lo = k4_ctl(0), k4_ctl_hi = k4_ctl(4);
alignas(64) constexpr ctl q6_ctl_lo = q6_ctl(0), q6_ctl_hi = q6_ctl(8);

inline __m512i ldc(const ctl& c) { return _mm512_load_si512(c.data()); }

// (a | (b & c)) and ((a & c) | b), bitwise
constexpr int k_or_and = 0xF8, k_and_or = 0xEC;

void prepare_k4(const uint8_t* a, int64_t k, prepared_act& p) {
    for (int64_t h = 0; h < k; h += 128) {
        const uint8_t* s = a + h;
        uint8_t* d = p.q + h;
        std::memcpy(d, s, 32);
        std::memcpy(d + 32, s + 64, 32);
        std::memcpy(d + 64, s + 32, 32);
        std::memcpy(d + 96, s + 96, 32);
    }
}

void prepare_q6(const uint8_t* a, int64_t k, prepared_act& p) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t e = 0; e < k; e += 64) {
        const __m512i u = _mm512_loadu_si512(a + e);  // s8 + 128
        _mm512_store_si512(p.q + e, _mm512_xor_si512(u, flip));
        alignas(64) uint64_t s8[8];  // sums of 8 unsigned bytes
        _mm512_store_si512(s8, _mm512_sad_epu8(u, _mm512_setzero_si512()));
        for (int t = 0; t < 4; ++t) {
            p.nsum16[e / 16 + t] =
                static_cast<int16_t>(16 * 128 - static_cast<int>(s8[2 * t] + s8[2 * t + 1]));
        }
    }
}

// Row's block b against the prepared activation of its group: lanes whose sum is the block's
// exact isum. Also its float scales and (q4_K/q5_K) min pairs.
template <dtype T>
inline __m512i block_dot(const uint8_t* b, const uint8_t* ap, const int16_t* nsum16, float& d,
                         float& dmin, __m128i& mins) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i x[4];
    __m512i s_lo, s_hi;
    __m128i sc;  // q6_K: the 16 signed sub-block scales
    if (T == dtype::q6_k) {
        d = _cvtsh_ss(ld16(b + 208));
        sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
        const __m512i scb = _mm512_broadcast_i32x4(sc);
        s_lo = _mm512_srai_epi16(_mm512_shuffle_epi8(scb, ldc(q6_ctl_lo)), 8);
        s_hi = _mm512_srai_epi16(_mm512_shuffle_epi8(scb, ldc(q6_ctl_hi)), 8);
        const __m512i m30 = _mm512_set1_epi8(0x30);
        const __m512i shift02 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
        for (int h = 0; h < 2; ++h) {
            const __m512i l = _mm512_loadu_si512(b + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h)));
            const __m512i h01 = _mm512_srlv_epi16(qh, shift02);  // bytes 0-31: qh, 32-63: qh >> 2
            x[2 * h] =
                _mm512_ternarylogic_epi32(l, _mm512_and_si512(_mm512_slli_epi16(h01, 4), m30), m4,
                                          k_and_or);
            x[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4),
                                                     _mm512_and_si512(h01, m30), m4, k_and_or);
        }
    } else {
        const bool five = T == dtype::q5_k;
        d = _cvtsh_ss(ld16(b));
        dmin = _cvtsh_ss(ld16(b + 2));
        const __m128i sb = k4_scale_bytes(b + 4);
        mins = _mm_cvtepu8_epi16(_mm_srli_si128(sb, 8));
        const __m512i sbb = _mm512_broadcast_i32x4(sb);
        s_lo = _mm512_shuffle_epi8(sbb, ldc(k4_ctl_lo));
        s_hi = _mm512_shuffle_epi8(sbb, ldc(k4_ctl_hi));
        const uint8_t* qs = b + (five ? 48 : 16);
        const __m512i z0 = _mm512_loadu_si512(qs), z1 = _mm512_loadu_si512(qs + 64);
        x[0] = _mm512_and_si512(z0, m4);                        // sub-blocks 0 | 2
        x[1] = _mm512_and_si512(_mm512_srli_epi16(z0, 4), m4);  // 1 | 3
        x[2] = _mm512_and_si512(z1, m4);                        // 4 | 6
        x[3] = _mm512_and_si512(_mm512_srli_epi16(z1, 4), m4);  // 5 | 7
        if (five) {
            // bit 2c of qh[l] is the fifth bit of value 64c + l, bit 2c + 1 that of 64c + 32 + l
            const __m512i qh = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
            const __m512i hb = _mm512_srlv_epi16(qh, _mm512_inserti64x4(_mm512_setzero_si512(),
                                                                        _mm256_set1_epi16(2), 1));
            const __m512i b4 = _mm512_set1_epi8(0x10);
            x[0] = _mm512_ternarylogic_epi32(x[0], _mm512_slli_epi16(hb, 4), b4, k_or_and);
            x[1] = _mm512_ternarylogic_epi32(x[1], _mm512_slli_epi16(hb, 3), b4, k_or_and);
            x[2] = _mm512_ternarylogic_epi32(x[2], hb, b4, k_or_and);
            x[3] = _mm512_ternarylogic_epi32(x[3], _mm512_srli_epi16(hb, 1), b4, k_or_and);
        }
    }
    __m512i p[4];
    for (int c = 0; c < 4; ++c)
        p[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x[c], ld512(ap + 64 * c));
    __m512i t = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(p[0], p[1]), s_lo);
    t = _mm512_dpwssd_epi32(t, _mm512_packs_epi32(p[2], p[3]), s_hi);
    if (T == dtype::q6_k) {
        // - 32 * sum_j sc_j * asum16_j: (32 sc_j) fits int16, and so does -asum16_j
        const __m256i sc32 = _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc), 5);
        const __m256i ns = _mm256_load_si256(reinterpret_cast<const __m256i*>(nsum16));
        t = _mm512_dpwssd_epi32(t, _mm512_zextsi256_si512(sc32), _mm512_zextsi256_si512(ns));
    }
    return t;
}

template <dtype T>
void gemv1_k(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t ii,
             const prepared_act& pa, float* out) {
    using K = kt<T>;
    const int64_t ng = k / K::G;
    const int64_t nsum = k / 32;
    alignas(64) __m512i tb[k_rows];
    alignas(64) float dws[k_rows], dms[k_rows];
    alignas(64) __m128i mrow[k_rows];
    for (int64_t r0 = 0; r0 < nrows; r0 += k_rows) {
        const int nr = static_cast<int>(nrows - r0 < k_rows ? nrows - r0 : k_rows);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; ++g) {
#pragma GCC unroll 16
            for (int rr = 0; rr < k_rows; ++rr) {
                const uint8_t* blk = w + (r0 + (rr < nr ? rr : nr - 1)) * w_stride + g * K::BLK;
                // As gemv_k: the next pass's rows are contiguous, fetch one block's bytes per step.
                if (r0 + 2 * k_rows <= nrows) {
                    const uint8_t* pf = w + (r0 + k_rows) * w_stride + (g * k_rows + rr) * K::BLK;
                    for (int o = 0; o < K::BLK; o += 64)
                        _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T0);
                }
                tb[rr] = block_dot<T>(blk, pa.q + g * K::G, pa.nsum16 + g * 16, dws[rr], dms[rr],
                                      mrow[rr]);
            }
            const __m512i isum = reduce16(tb);
            const __m512 da = _mm512_set1_ps(a.d[ii * a.ng + g]);
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(dws), da), _mm512_cvtepi32_ps(isum),
                                  acc);
            if (K::MINS) {
                __m512i mpv[4];
                min_pairs_by_row(mrow, mpv);
                const __m512i ms = min_sums(mpv, a.asum + ii * nsum + g * 8);
                acc = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_load_ps(dms), da),
                                       _mm512_cvtepi32_ps(ms), acc);
            }
        }
        _mm512_mask_storeu_ps(out + r0, static_cast<__mmask16>((1u << nr) - 1), acc);
    }
}

}  // namespace

bool gemv1_rows(dtype w, int64_t k, const uint8_t* wbase, size_t w_stride, int64_t nrows,
                const acts& a, int64_t i, float* out) {
    if (k > k_max || (w != dtype::q4_k && w != dtype::q5_k && w != dtype::q6_k)) return false;
    prepared_act pa;
    const uint8_t* aq = a.q + i * a.ldq;
    switch (w) {
        case dtype::q4_k:
            prepare_k4(aq, k, pa);
            gemv1_k<dtype::q4_k>(k, wbase, w_stride, nrows, a, i, pa, out);
            break;
        case dtype::q5_k:
            prepare_k4(aq, k, pa);
            gemv1_k<dtype::q5_k>(k, wbase, w_stride, nrows, a, i, pa, out);
            break;
        default:
            prepare_q6(aq, k, pa);
            gemv1_k<dtype::q6_k>(k, wbase, w_stride, nrows, a, i, pa, out);
            break;
    }
    return true;
}

}  // namespace igemm
}  // namespace cacheblend
