// The integer GEMM's packed weight panels (igemm.h), shared by the AVX-512 VNNI kernels
// (igemm-avx512.cpp) and the AMX tile kernels (igemm-amx-impl.h): per-type constants, the
// unpacking of one group into natural element order, and the panel of 32 columns whose every group
// holds the weights as [k/4][32 columns][4 bytes], followed by per-column int32 sub-block scales,
// the zero-point correction, the float scales and the mins. Each 64-byte half of a [k/4] row is
// one vpdpbusd operand of 16 columns, and 16 such rows at a 128-byte stride are exactly an AMX B
// tile (16 columns x 4 bytes per row).
//
// Include only from translation units compiled for AVX-512 (BW/VL/DQ/VNNI + F16C). Everything is
// in an unnamed namespace: each kernel TU gets its own copy, compiled for its own flags (no ODR
// merging of inline functions built for different ISAs).
#pragma once

#include <immintrin.h>

#include <cstdint>
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
    static constexpr int G = 32, SUB = 32, NSUB = 1, BLK = 18, ZP = 8;
    static constexpr bool SC = false, MINS = false, U8ACT = false;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b));
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(x, m4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), m4);
        _mm_store_si128(reinterpret_cast<__m128i*>(u.q), lo);
        _mm_store_si128(reinterpret_cast<__m128i*>(u.q + 16), hi);
    }
};

template <>
struct kt<dtype::q5_0> {
    static constexpr int G = 32, SUB = 32, NSUB = 1, BLK = 22, ZP = 16;
    static constexpr bool SC = false, MINS = false, U8ACT = false;
    static void unpack(const uint8_t* b, unpacked& u) {
        u.d = _cvtsh_ss(ld16(b));
        const __mmask32 qh = ld32(b + 2);
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 6));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m256i q = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_and_si128(x, m4)), _mm_and_si128(_mm_srli_epi16(x, 4), m4), 1);
        const __m256i h = _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(0x10));
        const __m256i v = _mm256_or_si256(q, h);
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
    static constexpr int G = 256, SUB = 32, NSUB = 8, BLK = 144, ZP = 0;
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
    static constexpr int G = 256, SUB = 32, NSUB = 8, BLK = 176, ZP = 0;
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
    static constexpr int G = 256, SUB = 16, NSUB = 16, BLK = 210, ZP = 0;
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



}  // namespace
}  // namespace igemm
}  // namespace cacheblend
