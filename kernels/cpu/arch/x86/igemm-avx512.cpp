// AVX-512 VNNI kernels of the integer GEMM (igemm.h): the canonical float sequence per output,
// integer sums by vpdpbusd.
//
// Prefill (gemm_rows): 32 weight rows at a time are unpacked into a panel whose every group holds
// the weights as [k/4][32 columns][4 bytes] (one vpdpbusd operand per 4 k-values and 16 columns)
// followed by per-column int32 sub-block scales, the zero-point correction, the float scales and
// the mins. A 4-row x 32-column register tile keeps the sub-block sums, the group's int32 total
// and the float accumulators; activations are broadcast 4 bytes at a time.
// Decode (gemv_rows): each weight row's group is unpacked into natural element order in L1 and
// dotted with every activation row, lanes over k; the group's total is reduced exactly and the
// float steps run per output, in the same order as the tile's lanes do.
//
// Operand signs: vpdpbusd multiplies unsigned by signed bytes. q4_K/q5_K weights are unsigned
// (0..31) and meet signed activations; q4_0/q5_0/q6_K weights are signed once their zero point is
// removed and meet activations stored as u8 = s8 + 128, whose extra 128 * sum(w) per sub-block is
// taken off by a per-column correction computed when the weights are unpacked.

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/igemm.h"
#include "kernels/cpu/quants-impl.h"

namespace cacheblend {
namespace igemm {
namespace {

using namespace qimpl;

inline uint32_t ld32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline uint16_t ld16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

inline __m512i ld512(const uint8_t* p) { return _mm512_load_si512(p); }

inline int32_t hsum256(__m256i p) {
    const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    const __m128i h2 = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    return _mm_cvtsi128_si32(h2) + _mm_extract_epi32(h2, 1);
}

// ---------------------------------------------------------------------------------------------
// Per-type parameters and the unpacking of one group into natural element order.
// ---------------------------------------------------------------------------------------------

// One unpacked group: G weight bytes (u8 for mins types, s8 otherwise), int32 sub-block scales,
// int16 mins, float scales.
struct unpacked {
    alignas(64) uint8_t q[256];
    alignas(64) int32_t sc[16];
    alignas(16) int16_t mn[8];
    float d, dmin;
};

template <dtype T>
struct kt;

template <>
struct kt<dtype::q4_0> {
    static constexpr int G = 32, SUB = 32, NSUB = 1, BLK = 18;
    static constexpr bool SC = false, MINS = false, U8ACT = true;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b));
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
        const __m128i m4 = _mm_set1_epi8(0x0F), m8 = _mm_set1_epi8(8);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(x, m4), m8);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), m4), m8);
        _mm_store_si128(reinterpret_cast<__m128i*>(u.q), lo);
        _mm_store_si128(reinterpret_cast<__m128i*>(u.q + 16), hi);
    }
};

template <>
struct kt<dtype::q5_0> {
    static constexpr int G = 32, SUB = 32, NSUB = 1, BLK = 22;
    static constexpr bool SC = false, MINS = false, U8ACT = true;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b));
        const __mmask32 qh = ld32(b + 2);
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 6));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m256i q = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_and_si128(x, m4)), _mm_and_si128(_mm_srli_epi16(x, 4), m4), 1);
        const __m256i h = _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(0x10));
        const __m256i v = _mm256_sub_epi8(_mm256_or_si256(q, h), _mm256_set1_epi8(16));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q), v);
    }
};

// q4_K / q5_K: 6-bit scales and mins of 8 sub-blocks of 32.
inline void k4_scales(const uint8_t* s, unpacked& u) {
    for (int j = 0; j < 8; ++j) {
        uint8_t d, m;
        scale_min_k4(j, s, &d, &m);
        u.sc[j] = d;
        u.mn[j] = m;
    }
}

template <>
struct kt<dtype::q4_k> {
    static constexpr int G = 256, SUB = 32, NSUB = 8, BLK = 144;
    static constexpr bool SC = true, MINS = true, U8ACT = false;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b));
        u.dmin = _cvtsh_ss(ld16(b + 2));
        k4_scales(b + 4, u);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int c = 0; c < 4; ++c) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * c));
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c), _mm256_and_si256(x, m4));
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c + 32),
                               _mm256_and_si256(_mm256_srli_epi16(x, 4), m4));
        }
    }
};

template <>
struct kt<dtype::q5_k> {
    static constexpr int G = 256, SUB = 32, NSUB = 8, BLK = 176;
    static constexpr bool SC = true, MINS = true, U8ACT = false;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b));
        u.dmin = _cvtsh_ss(ld16(b + 2));
        k4_scales(b + 4, u);
        const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
        for (int c = 0; c < 4; ++c) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 48 + 32 * c));
            const __m256i hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4);
            const __m256i hh =
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4);
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c),
                               _mm256_or_si256(_mm256_and_si256(x, m4), hl));
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c + 32),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4), hh));
        }
    }
};

template <>
struct kt<dtype::q6_k> {
    static constexpr int G = 256, SUB = 16, NSUB = 16, BLK = 210;
    static constexpr bool SC = true, MINS = false, U8ACT = true;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b + 208));
        _mm512_store_si512(u.sc, _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
        const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3), k32 = _mm512_set1_epi8(32);
        for (int h = 0; h < 2; ++h) {
            const __m512i l = _mm512_loadu_si512(b + 64 * h);
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
            // high bits of elements 0..63: [qh | qh >> 2], of 64..127: [qh >> 4 | qh >> 6]
            const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            const __m512i h23 = _mm512_srli_epi16(h01, 4);
            const __m512i lo = _mm512_or_si512(_mm512_and_si512(l, m4),
                                               _mm512_slli_epi16(_mm512_and_si512(h01, m3), 4));
            const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                               _mm512_slli_epi16(_mm512_and_si512(h23, m3), 4));
            _mm512_store_si512(u.q + 128 * h, _mm512_sub_epi8(lo, k32));
            _mm512_store_si512(u.q + 128 * h + 64, _mm512_sub_epi8(hi, k32));
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Prefill: packed panels of 32 columns and the 4 x 32 register tile.
// ---------------------------------------------------------------------------------------------

// Byte layout of one group of a packed panel.
template <dtype T>
struct panel_layout {
    using K = kt<T>;
    static constexpr int w_bytes = K::G / 4 * 128;
    static constexpr int sc_off = w_bytes;
    static constexpr int init_off = sc_off + (K::SC ? K::NSUB * 128 : 0);
    static constexpr int dw_off = init_off + (K::U8ACT ? 128 : 0);
    static constexpr int dmin_off = dw_off + 128;
    static constexpr int mp_off = dmin_off + (K::MINS ? 128 : 0);
    static constexpr int bytes = mp_off + (K::MINS ? K::NSUB / 2 * 128 : 0);
};

// Packs 32 weight rows (rows[c], duplicates allowed) of ng groups into pk.
template <dtype T>
void pack_panel(const uint8_t* const* rows, int64_t ng, uint8_t* pk) {
    using K = kt<T>;
    using L = panel_layout<T>;
    alignas(64) static thread_local unpacked u[32];
    for (int64_t g = 0; g < ng; ++g) {
        uint8_t* P = pk + g * L::bytes;
        for (int c = 0; c < 32; ++c) K::unpack(rows[c] + g * K::BLK, u[c]);
        // Weights: [k/4][32][4]: gather each column's 4-byte word t.
        auto* w32 = reinterpret_cast<uint32_t*>(P);
        for (int t = 0; t < K::G / 4; ++t) {
            for (int c = 0; c < 32; ++c) w32[t * 32 + c] = ld32(u[c].q + 4 * t);
        }
        if (K::SC) {
            auto* sc = reinterpret_cast<int32_t*>(P + L::sc_off);
            for (int j = 0; j < K::NSUB; ++j) {
                for (int c = 0; c < 32; ++c) sc[j * 32 + c] = u[c].sc[j];
            }
        }
        if (K::U8ACT) {
            // -128 * sum_j sc_j * sum_{k in j} w_k: cancels the +128 of the u8 activations.
            auto* init = reinterpret_cast<int32_t*>(P + L::init_off);
            for (int c = 0; c < 32; ++c) {
                int32_t tot = 0;
                for (int j = 0; j < K::NSUB; ++j) {
                    int32_t s = 0;
                    for (int e = j * K::SUB; e < (j + 1) * K::SUB; ++e) s += static_cast<int8_t>(u[c].q[e]);
                    tot += (K::SC ? u[c].sc[j] : 1) * s;
                }
                init[c] = -128 * tot;
            }
        }
        auto* dw = reinterpret_cast<float*>(P + L::dw_off);
        for (int c = 0; c < 32; ++c) dw[c] = u[c].d;
        if (K::MINS) {
            auto* dm = reinterpret_cast<float*>(P + L::dmin_off);
            auto* mp = reinterpret_cast<int16_t*>(P + L::mp_off);
            for (int c = 0; c < 32; ++c) dm[c] = u[c].dmin;
            for (int p = 0; p < K::NSUB / 2; ++p) {
                for (int c = 0; c < 32; ++c) {
                    mp[(p * 32 + c) * 2] = u[c].mn[2 * p];
                    mp[(p * 32 + c) * 2 + 1] = u[c].mn[2 * p + 1];
                }
            }
        }
    }
}


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

template <dtype T>
void gemv_t(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t i0,
            int64_t m, float* out, int64_t ldo) {
    using K = kt<T>;
    const int64_t ng = k / K::G;
    const int64_t nsum = k / 32;
    constexpr int NCH = K::G / 64 > 0 ? K::G / 64 : 1;  // 64-element chunks (q4_0/q5_0: one ymm)
    // Lane l of chunk c covers elements 64c + 4l .. 64c + 4l + 3: sub-block (64c + 4l) / SUB.
    __m512i lane_sub[NCH];
    for (int c = 0; c < NCH; ++c) {
        alignas(64) int32_t idx[16];
        for (int l = 0; l < 16; ++l) idx[l] = (64 * c + 4 * l) / K::SUB;
        lane_sub[c] = _mm512_load_si512(idx);
    }
    const __m512i ones = _mm512_set1_epi8(1);
    alignas(64) unpacked u;
    for (int64_t r = 0; r < nrows; ++r) {
        const uint8_t* wr = w + r * w_stride;
        float acc[16];
        for (int64_t i = 0; i < m; ++i) acc[i] = 0.f;
        for (int64_t g = 0; g < ng; ++g) {
            K::unpack(wr + g * K::BLK, u);
            __m512i scl[NCH];
            if (K::SC) {
                const __m512i scv = _mm512_load_si512(u.sc);
                for (int c = 0; c < NCH; ++c) scl[c] = _mm512_permutexvar_epi32(lane_sub[c], scv);
            }
            int32_t init = 0;
            if (K::U8ACT) {
                if (K::G == 32) {
                    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                                          _mm256_load_si256(reinterpret_cast<const __m256i*>(u.q)));
                    init = -128 * hsum256(p);
                } else {
                    __m512i t = _mm512_setzero_si512();
                    for (int c = 0; c < NCH; ++c) {
                        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, ld512(u.q + 64 * c));
                        t = _mm512_add_epi32(t, K::SC ? _mm512_mullo_epi32(p, scl[c]) : p);
                    }
                    init = -128 * _mm512_reduce_add_epi32(t);
                }
            }
            for (int64_t i = 0; i < m; ++i) {
                const int64_t ii = i0 + i;
                const uint8_t* aq = a.q + ii * a.ldq + g * K::G;
                int32_t isum;
                if (K::G == 32) {
                    const __m256i av = _mm256_load_si256(reinterpret_cast<const __m256i*>(aq));
                    const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(u.q));
                    isum = hsum256(_mm256_dpbusd_epi32(_mm256_setzero_si256(), av, wv)) + init;
                } else {
                    __m512i t = _mm512_setzero_si512();
                    for (int c = 0; c < NCH; ++c) {
                        const __m512i av = ld512(aq + 64 * c), wv = ld512(u.q + 64 * c);
                        const __m512i p = K::U8ACT ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), av, wv)
                                                   : _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, av);
                        t = _mm512_add_epi32(t, _mm512_mullo_epi32(p, scl[c]));
                    }
                    isum = _mm512_reduce_add_epi32(t) + init;
                }
                const float da = a.d[ii * a.ng + g];
                const __m128 f = _mm_mul_ss(_mm_set_ss(u.d), _mm_set_ss(da));
                __m128 x = _mm_fmadd_ss(f, _mm_cvtsi32_ss(_mm_setzero_ps(), isum), _mm_set_ss(acc[i]));
                if (K::MINS) {
                    const __m128i mn = _mm_load_si128(reinterpret_cast<const __m128i*>(u.mn));
                    const __m128i sv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.asum + ii * nsum + g * 8));
                    const __m128i pr = _mm_madd_epi16(mn, sv);
                    const __m128i h = _mm_add_epi32(pr, _mm_unpackhi_epi64(pr, pr));
                    const int32_t msum = _mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 1);
                    const __m128 fm = _mm_mul_ss(_mm_set_ss(u.dmin), _mm_set_ss(da));
                    x = _mm_fnmadd_ss(fm, _mm_cvtsi32_ss(_mm_setzero_ps(), msum), x);
                }
                acc[i] = _mm_cvtss_f32(x);
            }
        }
        for (int64_t i = 0; i < m; ++i) out[i * ldo + r] = acc[i];
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
    // At most 16 activation rows per pass (the per-row accumulators live on the stack).
    for (int64_t ib = 0; ib < m; ib += 16) {
        const int64_t mi = m - ib < 16 ? m - ib : 16;
        float* o = out + ib * ldo;
        switch (w) {
            case dtype::q4_0: gemv_t<dtype::q4_0>(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q5_0: gemv_t<dtype::q5_0>(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q4_k: gemv_t<dtype::q4_k>(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q5_k: gemv_t<dtype::q5_k>(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            case dtype::q6_k: gemv_t<dtype::q6_k>(k, wb, w_stride, nrows, a, i0 + ib, mi, o, ldo); break;
            default: return;
        }
    }
}

}  // namespace igemm
}  // namespace cacheblend
