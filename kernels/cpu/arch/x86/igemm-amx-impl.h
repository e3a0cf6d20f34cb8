// The AMX-INT8 prefill kernel of the integer GEMM (igemm.h), written once over a "tile ops" policy
// so the same code runs on the hardware (igemm-amx.cpp: the intrinsics) and, on machines without
// AMX, on a scalar emulator of the documented instruction semantics (igemm-amx-emu-avx512.cpp).
//
// Every output keeps the canonical sequence of igemm.h: tile products give exact int32 sums, the
// scales are applied as exact integer operations, and the float steps per group run exactly as
// the VNNI tile runs them (igemm-avx512.cpp), so every output has the VNNI kernels' bits.
//
// q4_0 / q5_0: the VNNI kernel's panels (igemm-panel-avx512.h, 32 weight columns, each group
// [k/4][32][4 bytes]). The 64-byte halves of a panel row are B-tile rows (16 columns x 4 bytes),
// so a group's weights are two B tiles read in place at a 128-byte stride; up to 32 activation
// rows are two A tiles (16 rows x the group's 32 bytes, read in place). Per group four C tiles get
// A x B from zero (TDPBSUD: signed activations, unsigned weights), the exact sums of a 32 x 32
// block of outputs; AVX-512 takes the zero point off with the activation's block sum and runs
// the float step. Tiles: 0..3 C (rows 0-15 x cols 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x
// 16-31), 4, 5 A (activation rows 0-15, 16-31), 6, 7 B (columns 0-15, 16-31); a block of fewer
// than 17 rows leaves tiles 2, 3, 5 unconfigured and unused.
//
// K-quants: scaled panels (below). The sub-block scales are split into digits multiplied into
// copies of the weights (two for q4_K / q5_K, four for q6_K), so the tiles sum a whole group at
// full K (64 bytes per A row) with no per-sub-block store or integer multiply; the digits' sums
// are combined by shifts and adds. q6_K keeps the VNNI kernel's operand signs (weights q - 32,
// activations stored as u8 = s8 + 128: TDPBUSD) and its per-column correction of the +128.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "kernels/cpu/arch/x86/igemm-panel-avx512.h"
#include "kernels/cpu/igemm.h"
#include "kernels/memory.h"

namespace cacheblend {
namespace igemm {
namespace {

// The 64-byte memory image LDTILECFG reads (palette 1).
struct alignas(64) tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];  // bytes per row of tile t
    uint8_t rows[16];    // rows of tile t
};
static_assert(sizeof(tile_config) == 64, "LDTILECFG reads 64 bytes");

enum amx_tile : int { t_c00 = 0, t_c01 = 1, t_c10 = 2, t_c11 = 3, t_a0 = 4, t_a1 = 5, t_b0 = 6, t_b1 = 7 };

constexpr int k_amx_rows = 16;      // palette 1: rows per tile
constexpr int k_amx_colsb = 64;     // palette 1: bytes per tile row
constexpr int k_amx_block_m = 32;   // activation rows per pass (two A tiles)

// Configuration for ma0 (1..16) + ma1 (0..16) activation rows and A rows of `sub` bytes (the K
// of one tile product: a sub-block, or 64 for the scaled panels).
inline void make_tile_config(tile_config& c, int ma0, int ma1, int sub) {
    std::memset(&c, 0, sizeof(c));
    c.palette = 1;
    auto set = [&c](int t, int rows, int colsb) {
        c.rows[t] = static_cast<uint8_t>(rows);
        c.colsb[t] = static_cast<uint16_t>(colsb);
    };
    set(t_a0, ma0, sub);
    set(t_b0, sub / 4, k_amx_colsb);
    set(t_b1, sub / 4, k_amx_colsb);
    set(t_c00, ma0, k_amx_colsb);
    set(t_c01, ma0, k_amx_colsb);
    if (ma1 > 0) {
        set(t_a1, ma1, sub);
        set(t_c10, ma1, k_amx_colsb);
        set(t_c11, ma1, k_amx_colsb);
    }
}

// q4_0 / q5_0: rows [ia, ia + mi) of the activations (mi <= 32) x one packed panel (32 columns,
// ng groups of 32), written to out[i * ldo + c] for c < nw. Every group is one tile product per C
// tile (K = 32 bytes) and a float step; the configuration for mi rows is loaded.
template <class Ops, dtype T>
void amx_block(const uint8_t* pk, int64_t ng, const acts& a, int64_t ia, int mi, float* out,
               int64_t ldo, int nw) {
    using K = kt<T>;
    using L = panel_layout<T>;
    static_assert(K::G == 32 && K::NSUB == 1 && !K::SC && !K::MINS && !K::U8ACT && K::ZP > 0, "q4_0 / q5_0 only");
    const int64_t nsum = a.k / 32;
    const bool two = mi > k_amx_rows;
    Ops::fence();  // the packed panel and the activations are in memory before the tile loads
    const uint8_t* aq0 = a.q + ia * a.ldq;
    const uint8_t* aq1 = aq0 + k_amx_rows * a.ldq;
    const size_t lda = static_cast<size_t>(a.ldq);
    alignas(64) int32_t cb[k_amx_block_m][32];  // the group's C tiles
    __m512 acc[k_amx_block_m][2];
    for (int i = 0; i < mi; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        const uint8_t* P = pk + g * L::bytes;
        const int64_t e = g * K::G;
        Ops::template zero<t_c00>();
        Ops::template zero<t_c01>();
        Ops::template load<t_a0>(aq0 + e, lda);
        Ops::template load<t_b0>(P, 128);
        Ops::template load<t_b1>(P + 64, 128);
        Ops::template dpbsud<t_c00, t_a0, t_b0>();
        Ops::template dpbsud<t_c01, t_a0, t_b1>();
        Ops::template store<t_c00>(&cb[0][0], 128);
        Ops::template store<t_c01>(&cb[0][16], 128);
        if (two) {
            Ops::template zero<t_c10>();
            Ops::template zero<t_c11>();
            Ops::template load<t_a1>(aq1 + e, lda);
            Ops::template dpbsud<t_c10, t_a1, t_b0>();
            Ops::template dpbsud<t_c11, t_a1, t_b1>();
            Ops::template store<t_c10>(&cb[k_amx_rows][0], 128);
            Ops::template store<t_c11>(&cb[k_amx_rows][16], 128);
        }
        Ops::fence();  // the C tiles are in cb before the vector loads below
        // The VNNI tile's steps: the raw unsigned weights' zero point off with the activation's
        // block sum, then the float step.
        const __m512 dw0 = _mm512_load_ps(P + L::dw_off), dw1 = _mm512_load_ps(P + L::dw_off + 64);
        for (int i = 0; i < mi; ++i) {
            const __m512i zp = _mm512_set1_epi32(-K::ZP * a.asum[(ia + i) * nsum + g]);
            const __m512 da = _mm512_set1_ps(a.d[(ia + i) * a.ng + g]);
            const __m512i t0 = _mm512_add_epi32(zp, _mm512_load_si512(cb[i]));
            const __m512i t1 = _mm512_add_epi32(zp, _mm512_load_si512(cb[i] + 16));
            acc[i][0] = _mm512_fmadd_ps(_mm512_mul_ps(dw0, da), _mm512_cvtepi32_ps(t0), acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(_mm512_mul_ps(dw1, da), _mm512_cvtepi32_ps(t1), acc[i][1]);
        }
    }
    const __mmask16 k0 = static_cast<__mmask16>(nw >= 16 ? 0xFFFF : (1u << nw) - 1);
    const __mmask16 k1 = static_cast<__mmask16>(nw <= 16 ? 0 : nw >= 32 ? 0xFFFF : (1u << (nw - 16)) - 1);
    for (int i = 0; i < mi; ++i) {
        _mm512_mask_storeu_ps(out + i * ldo, k0, acc[i][0]);
        _mm512_mask_storeu_ps(out + i * ldo + 16, k1, acc[i][1]);
    }
}

// ---------------------------------------------------------------------------------------------
// K-quants on scaled panels: the sub-block scales go into the weights, so a group needs no
// per-sub-block store and fold, and A tiles span 64 elements (full K per tile product).
// Each scale is split into NDIG digits of BITS bits, sc = sum_d digit_d << (BITS * d), the top
// digit taken with sc's sign (arithmetic shift), and the panel holds one copy of the weights per
// digit, w * digit_d(sc of w's sub-block), which is a byte:
//   q4_K / q5_K: w in 0..31, sc in 0..63, two 3-bit digits: w * digit <= 217 (unsigned);
//   q6_K: w = q - 32 in -32..31, sc in -128..127, digits 0..3, 0..3, 0..3 and -2..1:
//         w * digit in -96..96 (signed).
// The group's isum = sum_d (C_d << (BITS * d)) where C_d = sum_k (w_k digit_d) a_k are exact tile
// sums (|C_d| <= 256 * 217 * 128 < 2^23, q6_K: <= 256 * 96 * 255; the shifted sum stays below
// 2^29), plus the zero-point correction of q6_K's u8 activations, as in the VNNI panel.
// Tiles: C of A tile r, digit d = r * NDIG + d; A tile r = 4 + r; digit d's B = 6 + (d & 1)
// (digits 2, 3 of q6_K reload the two B registers). q6_K's four C tiles per A leave room for one A
// tile: it takes 16 activation rows per pass, q4_K / q5_K 32.
// ---------------------------------------------------------------------------------------------

template <dtype T>
struct scaled_traits;
template <>
struct scaled_traits<dtype::q4_k> {
    static constexpr int NDIG = 2, BITS = 3, ROWS = 32;
};
template <>
struct scaled_traits<dtype::q5_k> {
    static constexpr int NDIG = 2, BITS = 3, ROWS = 32;
};
template <>
struct scaled_traits<dtype::q6_k> {
    static constexpr int NDIG = 4, BITS = 2, ROWS = 16;
};

template <dtype T>
constexpr int scale_digit(int sc, int d) {
    using D = scaled_traits<T>;
    return d == D::NDIG - 1 ? sc >> (D::BITS * d) : (sc >> (D::BITS * d)) & ((1 << D::BITS) - 1);
}

// Byte layout of one group of a 32-column scaled panel: per half h of 16 columns and digit d, the
// scaled weights as [k/4][16][4] (B tiles of 16 rows at a 64-byte stride); then the VNNI panel's
// zero-point correction (q6_K), float scales and min pairs (q4_K / q5_K).
template <dtype T>
struct scaled_layout {
    using K = kt<T>;
    using D = scaled_traits<T>;
    static constexpr int copy_bytes = K::G / 4 * 64;
    static constexpr int w_off(int h, int d) { return (h * D::NDIG + d) * copy_bytes; }
    static constexpr int init_off = 2 * D::NDIG * copy_bytes;
    static constexpr int dw_off = init_off + (K::U8ACT ? 128 : 0);
    static constexpr int dmin_off = dw_off + 128;
    static constexpr int mp_off = dmin_off + (K::MINS ? 128 : 0);
    static constexpr int bytes = mp_off + (K::MINS ? K::NSUB / 2 * 128 : 0);
};

template <int I, int N, class F>
inline void static_for(F&& f) {
    if constexpr (I < N) {
        f(std::integral_constant<int, I>{});
        static_for<I + 1, N>(f);
    }
}

// r[i] lane j <- r[j] lane i (16 x 16 dwords).
inline void transpose16_epi32(__m512i* r) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + e], 128-bit lane k: rows 4i..4i+3 of dword 4k + e
    for (int i = 0; i < 4; ++i) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int e = 0; e < 4; ++e) {
        const __m512i a0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88), b0 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
        const __m512i a1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD), b1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
        r[e] = _mm512_shuffle_i32x4(a0, b0, 0x88);
        r[8 + e] = _mm512_shuffle_i32x4(a0, b0, 0xDD);
        r[4 + e] = _mm512_shuffle_i32x4(a1, b1, 0x88);
        r[12 + e] = _mm512_shuffle_i32x4(a1, b1, 0xDD);
    }
}

template <dtype T>
void pack_scaled_panel(const uint8_t* const* rows, int64_t ng, uint8_t* pk) {
    using K = kt<T>;
    using D = scaled_traits<T>;
    using L = scaled_layout<T>;
    static_assert(K::SC && K::G == 256 && (K::SUB == 16 || K::SUB == 32), "K-quants only");
    constexpr int per_chunk = 64 / K::SUB;  // sub-blocks per 64 elements
    alignas(64) static thread_local unpacked u[32];
    // Column c's scaled weights in natural order, one copy per digit.
    alignas(64) static thread_local uint8_t sw[32][D::NDIG][K::G];
    const __m512i low_bytes = _mm512_set1_epi16(0x00FF);
    // Byte b of a 64-element chunk belongs to its sub-block (b / 16) / (SUB / 16): the byte that
    // vpshufb picks (within b's 128-bit lane) from a word holding one digit per sub-block.
    alignas(64) uint8_t lane_idx[64];
    for (int b = 0; b < 64; ++b) lane_idx[b] = static_cast<uint8_t>(b / 16 / (K::SUB / 16));
    const __m512i lane_sub = ld512(lane_idx);
    for (int64_t g = 0; g < ng; ++g) {
        uint8_t* P = pk + g * L::bytes;
        for (int c = 0; c < 32; ++c) {
            K::unpack(rows[c] + g * K::BLK, u[c]);
            for (int q = 0; q < K::G / 64; ++q) {
                const __m512i w = ld512(u[c].q + 64 * q);
                for (int d = 0; d < D::NDIG; ++d) {
                    uint32_t dig = 0;  // byte j: the digit of the chunk's sub-block j
                    for (int j = 0; j < per_chunk; ++j) {
                        dig |= static_cast<uint32_t>(static_cast<uint8_t>(scale_digit<T>(u[c].sc[q * per_chunk + j], d)))
                               << (8 * j);
                    }
                    const __m512i sv = _mm512_shuffle_epi8(_mm512_set1_epi32(static_cast<int>(dig)), lane_sub);
                    // Byte products by 16-bit multiplies (exact mod 256, and each product is a
                    // byte): the low byte of x * s is x_lo * s_lo; the high bytes' product comes
                    // from the words shifted down.
                    const __m512i ev = _mm512_and_si512(_mm512_mullo_epi16(w, sv), low_bytes);
                    const __m512i od = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(w, 8), _mm512_srli_epi16(sv, 8)), 8);
                    _mm512_store_si512(sw[c][d] + 64 * q, _mm512_or_si512(ev, od));
                }
            }
        }
        // [k/4][16][4] per half and digit: 16 x 16 transposes of the columns' 4-byte words.
        for (int h = 0; h < 2; ++h) {
            for (int d = 0; d < D::NDIG; ++d) {
                uint8_t* dst = P + L::w_off(h, d);
                for (int blk = 0; blk < K::G / 64; ++blk) {
                    __m512i r[16];
                    for (int c = 0; c < 16; ++c) r[c] = ld512(sw[16 * h + c][d] + 64 * blk);
                    transpose16_epi32(r);
                    for (int t = 0; t < 16; ++t) _mm512_store_si512(dst + (16 * blk + t) * 64, r[t]);
                }
            }
        }
        if (K::U8ACT) {
            // -128 * sum_j sc_j * sum_{k in j} w_k: cancels the +128 of the u8 activations.
            auto* init = reinterpret_cast<int32_t*>(P + L::init_off);
            for (int c = 0; c < 32; ++c) {
                int32_t tot = 0;
                for (int j = 0; j < K::NSUB; ++j) {
                    int32_t sum = 0;
                    for (int e = j * K::SUB; e < (j + 1) * K::SUB; ++e) sum += static_cast<int8_t>(u[c].q[e]);
                    tot += u[c].sc[j] * sum;
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

// Configuration of the scaled block: ma0 (1..16) + ma1 (0..16) activation rows, NDIG digits.
inline void make_scaled_config(tile_config& c, int ma0, int ma1, int ndig) {
    std::memset(&c, 0, sizeof(c));
    c.palette = 1;
    const int ma[2] = {ma0, ma1};
    for (int r = 0; r < 2; ++r) {
        if (ma[r] == 0) continue;
        c.rows[t_a0 + r] = static_cast<uint8_t>(ma[r]);
        c.colsb[t_a0 + r] = k_amx_colsb;
        for (int d = 0; d < ndig; ++d) {
            c.rows[r * ndig + d] = static_cast<uint8_t>(ma[r]);
            c.colsb[r * ndig + d] = k_amx_colsb;
        }
    }
    for (int t : {t_b0, t_b1}) {
        c.rows[t] = k_amx_rows;
        c.colsb[t] = k_amx_colsb;
    }
}

// Rows [ia, ia + mi) (mi <= ROWS) x one scaled panel; the configuration for mi rows is loaded.
template <class Ops, dtype T>
void amx_scaled_block(const uint8_t* pk, int64_t ng, const acts& a, int64_t ia, int mi, float* out,
                      int64_t ldo, int nw) {
    using K = kt<T>;
    using D = scaled_traits<T>;
    using L = scaled_layout<T>;
    constexpr int NA = D::ROWS / k_amx_rows;  // A tiles
    const int64_t nsum = a.k / 32;
    const int na = mi > k_amx_rows ? 2 : 1;
    const size_t lda = static_cast<size_t>(a.ldq);
    alignas(64) int32_t cs[D::NDIG][D::ROWS][16];  // the group's C tiles, per digit
    Ops::fence();  // the packed panel and the activations are in memory before the tile loads
    for (int h = 0; h < 2; ++h) {
        const int nh = nw - 16 * h;  // valid columns of this half
        if (nh <= 0) break;
        __m512 acc[D::ROWS];
        for (int i = 0; i < mi; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; ++g) {
            const uint8_t* P = pk + g * L::bytes;
            static_for<0, NA>([&](auto r) {
                if (r.value < na) static_for<0, D::NDIG>([&](auto d) { Ops::template zero<r.value * D::NDIG + d.value>(); });
            });
            for (int s = 0; s < K::G / 64; ++s) {
                const int64_t e = g * K::G + 64 * s;
                static_for<0, NA>([&](auto r) {
                    if (r.value < na) Ops::template load<t_a0 + r.value>(a.q + (ia + k_amx_rows * r.value) * a.ldq + e, lda);
                });
                static_for<0, D::NDIG>([&](auto d) {
                    constexpr int B = t_b0 + (d.value & 1);
                    Ops::template load<B>(P + L::w_off(h, d.value) + s * 16 * 64, 64);
                    static_for<0, NA>([&](auto r) {
                        if (r.value >= na) return;
                        if (K::U8ACT) {
                            Ops::template dpbusd<r.value * D::NDIG + d.value, t_a0 + r.value, B>();
                        } else {
                            Ops::template dpbsud<r.value * D::NDIG + d.value, t_a0 + r.value, B>();
                        }
                    });
                });
            }
            static_for<0, NA>([&](auto r) {
                if (r.value < na) {
                    static_for<0, D::NDIG>([&](auto d) {
                        Ops::template store<r.value * D::NDIG + d.value>(&cs[d.value][k_amx_rows * r.value][0], 64);
                    });
                }
            });
            Ops::fence();  // the C tiles are in cs before the vector loads below
            // The float steps of the VNNI tile, in its order, on this half's 16 columns.
            const __m512 dw = _mm512_load_ps(P + L::dw_off + 64 * h);
            const __m512i init = K::U8ACT ? ld512(P + L::init_off + 64 * h) : _mm512_setzero_si512();
            for (int i = 0; i < mi; ++i) {
                __m512i tot = init;
                for (int d = 0; d < D::NDIG; ++d) {
                    tot = _mm512_add_epi32(tot, _mm512_slli_epi32(_mm512_load_si512(cs[d][i]), static_cast<unsigned>(D::BITS * d)));
                }
                const __m512 da = _mm512_set1_ps(a.d[(ia + i) * a.ng + g]);
                acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(tot), acc[i]);
                if (K::MINS) {
                    const int16_t* as = a.asum + (ia + i) * nsum + g * 8;
                    __m512i ms = _mm512_setzero_si512();
                    for (int p = 0; p < K::NSUB / 2; ++p) {
                        const __m512i av = _mm512_set1_epi32(static_cast<int>(ld32(reinterpret_cast<const uint8_t*>(as + 2 * p))));
                        ms = _mm512_add_epi32(ms, _mm512_madd_epi16(ld512(P + L::mp_off + p * 128 + 64 * h), av));
                    }
                    const __m512 dm = _mm512_load_ps(P + L::dmin_off + 64 * h);
                    acc[i] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(ms), acc[i]);
                }
            }
        }
        const __mmask16 keep = static_cast<__mmask16>(nh >= 16 ? 0xFFFF : (1u << nh) - 1);
        for (int i = 0; i < mi; ++i) _mm512_mask_storeu_ps(out + i * ldo + 16 * h, keep, acc[i]);
    }
}

// Which panel and block a type uses: scaled (K-quants) or per-sub-block fold (q4_0, q5_0).
template <dtype T, bool Scaled = kt<T>::G == 256>
struct amx_scheme {
    static constexpr bool scaled = true;
    static constexpr int bytes = scaled_layout<T>::bytes;
    static constexpr int block_m = scaled_traits<T>::ROWS;  // activation rows per pass
};
template <dtype T>
struct amx_scheme<T, false> {
    static constexpr bool scaled = false;
    static constexpr int bytes = panel_layout<T>::bytes;
    static constexpr int block_m = k_amx_block_m;
};

template <class Ops, dtype T>
void amx_gemm_t(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t i0,
                int64_t m, float* out, int64_t ldo) {
    using K = kt<T>;
    using S = amx_scheme<T>;
    const int64_t ng = k / K::G;
    static thread_local aligned_array<uint8_t> pk_buf;
    if (pk_buf.size() < static_cast<size_t>(ng * S::bytes)) pk_buf.resize(static_cast<size_t>(ng * S::bytes));
    uint8_t* pk = pk_buf.data();
    tile_config cfg;
    int cfg_m = 0;  // rows the loaded configuration is for (0: none loaded)
    for (int64_t r0 = 0; r0 < nrows; r0 += 32) {
        const int nw = static_cast<int>(nrows - r0 < 32 ? nrows - r0 : 32);
        const uint8_t* rows[32];
        for (int c = 0; c < 32; ++c) rows[c] = w + (r0 + (c < nw ? c : nw - 1)) * w_stride;
        if constexpr (S::scaled) {
            pack_scaled_panel<T>(rows, ng, pk);
        } else {
            pack_panel<T>(rows, ng, pk);
        }
        for (int64_t ib = 0; ib < m; ib += S::block_m) {
            const int mi = static_cast<int>(m - ib < S::block_m ? m - ib : S::block_m);
            if (mi != cfg_m) {
                const int ma0 = mi < k_amx_rows ? mi : k_amx_rows;
                if constexpr (S::scaled) {
                    make_scaled_config(cfg, ma0, mi - ma0, scaled_traits<T>::NDIG);
                } else {
                    make_tile_config(cfg, ma0, mi - ma0, kt<T>::SUB);
                }
                Ops::config(cfg);
                cfg_m = mi;
            }
            if constexpr (S::scaled) {
                amx_scaled_block<Ops, T>(pk, ng, a, i0 + ib, mi, out + ib * ldo + r0, ldo, nw);
            } else {
                amx_block<Ops, T>(pk, ng, a, i0 + ib, mi, out + ib * ldo + r0, ldo, nw);
            }
        }
    }
    if (cfg_m) Ops::release();
}

template <class Ops>
void amx_gemm_rows(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows, const acts& a,
                   int64_t i0, int64_t m, float* out, int64_t ldo) {
    const auto* wb = static_cast<const uint8_t*>(wbase);
    switch (w) {
        case dtype::q4_0: return amx_gemm_t<Ops, dtype::q4_0>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q5_0: return amx_gemm_t<Ops, dtype::q5_0>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q4_k: return amx_gemm_t<Ops, dtype::q4_k>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q5_k: return amx_gemm_t<Ops, dtype::q5_k>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        case dtype::q6_k: return amx_gemm_t<Ops, dtype::q6_k>(k, wb, w_stride, nrows, a, i0, m, out, ldo);
        default: return;
    }
}

}  // namespace
}  // namespace igemm
}  // namespace cacheblend
