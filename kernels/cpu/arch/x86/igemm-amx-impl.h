// The AMX-INT8 prefill kernel of the integer GEMM (igemm.h), written once over a "tile ops" policy
// so the same code runs on the hardware (igemm-amx.cpp: the intrinsics) and, on machines without
// AMX, on a scalar emulator of the documented instruction semantics (igemm-amx-emu-avx512.cpp).
//
// Shape: the panels of igemm-panel-avx512.h (32 weight columns, each group [k/4][32][4 bytes]).
// The 64-byte halves of a panel row are B-tile rows (16 columns x 4 bytes), so a sub-block's
// weights are two B tiles read in place at a 128-byte stride; up to 32 activation rows are two A
// tiles (16 rows x one sub-block's bytes, read in place from the activation rows). Per sub-block
// (32 elements, q6_K 16) four C tiles get A x B from zero: the exact int32 sub-block sums of a
// 32 x 32 block of outputs. They are stored and folded into the group's int32 total with the
// sub-block scales (int32 multiplies) by AVX-512; the float steps per group then run exactly as
// the VNNI tile runs them (igemm-avx512.cpp), so every output has the canonical bits.
//
// Operand signs, as in the VNNI kernel: q4_0/q5_0/q4_K/q5_K weights are unsigned and meet signed
// activations (TDPBSUD: A signed, B unsigned); q6_K's weights are signed (q - 32) and meet
// activations stored as u8 = s8 + 128 (TDPBUSD), whose extra 128 * sum(w) per column is the
// panel's precomputed correction. The int32 sums are those of the VNNI kernel.
//
// Tile registers: 0..3 C (rows 0-15 x cols 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x 16-31),
// 4, 5 A (activation rows 0-15, 16-31), 6, 7 B (columns 0-15, 16-31). A block of fewer than 17
// activation rows leaves tiles 2, 3, 5 unconfigured and unused.
//
// q4_K / q5_K (most of a Q4_K_M model) use scaled panels instead (below): their sub-block scales
// are split into two 3-bit digits multiplied into two copies of the weights, so the tiles sum a
// whole group at full K (64 bytes) with no per-sub-block store and fold; the two sums are
// combined by a shift and an add. q4_0 / q5_0 (one group per 32 elements) and q6_K (signed 8-bit
// scales, which do not split into byte-sized products with its weights) keep the fold.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

// C += A x B for this type's operand signs.
template <class Ops, dtype T, int C, int A, int B>
inline void amx_dot() {
    if (kt<T>::U8ACT) {
        Ops::template dpbusd<C, A, B>();
    } else {
        Ops::template dpbsud<C, A, B>();
    }
}

// Rows [ib, ib + mi) of the activations (mi <= 32) x one packed panel (32 columns, ng groups),
// written to out[i * ldo + c] for c < nw. The tile configuration for mi rows is loaded.
template <class Ops, dtype T>
void amx_block(const uint8_t* pk, int64_t ng, const acts& a, int64_t ia, int mi, float* out,
               int64_t ldo, int nw) {
    using K = kt<T>;
    using L = panel_layout<T>;
    constexpr int KB = K::SUB / 4;  // B-tile rows per sub-block
    const int64_t nsum = a.k / 32;
    const bool two = mi > k_amx_rows;
    Ops::fence();  // the packed panel and the activations are in memory before the tile loads
    const uint8_t* aq0 = a.q + ia * a.ldq;
    const uint8_t* aq1 = aq0 + k_amx_rows * a.ldq;
    const size_t lda = static_cast<size_t>(a.ldq);
    alignas(64) int32_t cb[k_amx_block_m][32];   // one sub-block's C tiles
    alignas(64) int32_t tot[k_amx_block_m][32];  // the group's int32 totals
    __m512 acc[k_amx_block_m][2];
    for (int i = 0; i < mi; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        const uint8_t* P = pk + g * L::bytes;
        for (int i = 0; i < mi; ++i) {
            __m512i t0, t1;
            if (K::U8ACT) {
                t0 = ld512(P + L::init_off);
                t1 = ld512(P + L::init_off + 64);
            } else if (K::ZP) {
                t0 = t1 = _mm512_set1_epi32(-K::ZP * a.asum[(ia + i) * nsum + g]);
            } else {
                t0 = t1 = _mm512_setzero_si512();
            }
            _mm512_store_si512(tot[i], t0);
            _mm512_store_si512(tot[i] + 16, t1);
        }
        for (int j = 0; j < K::NSUB; ++j) {
            const int64_t e = g * K::G + j * K::SUB;
            const uint8_t* bp = P + j * KB * 128;
            Ops::template zero<t_c00>();
            Ops::template zero<t_c01>();
            Ops::template load<t_a0>(aq0 + e, lda);
            Ops::template load<t_b0>(bp, 128);
            Ops::template load<t_b1>(bp + 64, 128);
            amx_dot<Ops, T, t_c00, t_a0, t_b0>();
            amx_dot<Ops, T, t_c01, t_a0, t_b1>();
            Ops::template store<t_c00>(&cb[0][0], 128);
            Ops::template store<t_c01>(&cb[0][16], 128);
            if (two) {
                Ops::template zero<t_c10>();
                Ops::template zero<t_c11>();
                Ops::template load<t_a1>(aq1 + e, lda);
                amx_dot<Ops, T, t_c10, t_a1, t_b0>();
                amx_dot<Ops, T, t_c11, t_a1, t_b1>();
                Ops::template store<t_c10>(&cb[k_amx_rows][0], 128);
                Ops::template store<t_c11>(&cb[k_amx_rows][16], 128);
            }
            Ops::fence();  // the C tiles are in cb before the vector loads below
            if (K::SC) {
                const __m512i sc0 = ld512(P + L::sc_off + j * 128), sc1 = ld512(P + L::sc_off + j * 128 + 64);
                for (int i = 0; i < mi; ++i) {
                    _mm512_store_si512(tot[i], _mm512_add_epi32(_mm512_load_si512(tot[i]),
                                                                _mm512_mullo_epi32(_mm512_load_si512(cb[i]), sc0)));
                    _mm512_store_si512(tot[i] + 16, _mm512_add_epi32(_mm512_load_si512(tot[i] + 16),
                                                                     _mm512_mullo_epi32(_mm512_load_si512(cb[i] + 16), sc1)));
                }
            } else {
                for (int i = 0; i < mi; ++i) {
                    _mm512_store_si512(tot[i], _mm512_add_epi32(_mm512_load_si512(tot[i]), _mm512_load_si512(cb[i])));
                    _mm512_store_si512(tot[i] + 16,
                                       _mm512_add_epi32(_mm512_load_si512(tot[i] + 16), _mm512_load_si512(cb[i] + 16)));
                }
            }
        }
        // The float steps of the VNNI tile, in its order.
        const __m512 dw0 = _mm512_load_ps(P + L::dw_off), dw1 = _mm512_load_ps(P + L::dw_off + 64);
        for (int i = 0; i < mi; ++i) {
            const __m512 da = _mm512_set1_ps(a.d[(ia + i) * a.ng + g]);
            acc[i][0] = _mm512_fmadd_ps(_mm512_mul_ps(dw0, da), _mm512_cvtepi32_ps(_mm512_load_si512(tot[i])), acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(_mm512_mul_ps(dw1, da), _mm512_cvtepi32_ps(_mm512_load_si512(tot[i] + 16)),
                                        acc[i][1]);
        }
        if (K::MINS) {
            const __m512 dm0 = _mm512_load_ps(P + L::dmin_off), dm1 = _mm512_load_ps(P + L::dmin_off + 64);
            for (int i = 0; i < mi; ++i) {
                const int16_t* as = a.asum + (ia + i) * nsum + g * 8;
                __m512i ms0 = _mm512_setzero_si512(), ms1 = _mm512_setzero_si512();
                for (int p = 0; p < K::NSUB / 2; ++p) {
                    const __m512i av = _mm512_set1_epi32(static_cast<int>(ld32(reinterpret_cast<const uint8_t*>(as + 2 * p))));
                    ms0 = _mm512_add_epi32(ms0, _mm512_madd_epi16(ld512(P + L::mp_off + p * 128), av));
                    ms1 = _mm512_add_epi32(ms1, _mm512_madd_epi16(ld512(P + L::mp_off + p * 128 + 64), av));
                }
                const __m512 da = _mm512_set1_ps(a.d[(ia + i) * a.ng + g]);
                acc[i][0] = _mm512_fnmadd_ps(_mm512_mul_ps(dm0, da), _mm512_cvtepi32_ps(ms0), acc[i][0]);
                acc[i][1] = _mm512_fnmadd_ps(_mm512_mul_ps(dm1, da), _mm512_cvtepi32_ps(ms1), acc[i][1]);
            }
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
// q4_K / q5_K: the sub-block scales go into the weights, so a group needs no per-sub-block fold.
// With sc = 8 * hi + lo (hi, lo in 0..7) and unsigned weights w <= 31, w * lo and w * hi are bytes
// (<= 217), and isum = sum_k (w_k sc_j(k)) a_k = 8 * sum_k (w_k hi_j(k)) a_k + sum_k (w_k lo_j(k)) a_k:
// two exact int32 tile sums over the whole group (|each| <= 256 * 217 * 128 < 2^23), combined
// per group by a shift and an add. A tiles then span 64 elements (full K per TDPBSUD).
// Tiles: 0 / 2 the lo sums of activation rows 0-15 / 16-31, 1 / 3 the hi sums; 4, 5 A; 6 the lo
// weights, 7 the hi weights of 16 columns.
// ---------------------------------------------------------------------------------------------

// Byte layout of one group of a 32-column scaled panel: per half of 16 columns, the lo and hi
// weights as [k/4][16][4] (B tiles of 16 rows at a 64-byte stride), then the VNNI panel's float
// scales and min pairs.
template <dtype T>
struct scaled_layout {
    using K = kt<T>;
    static constexpr int half_bytes = K::G / 4 * 64;
    static constexpr int lo_off(int h) { return 2 * h * half_bytes; }
    static constexpr int hi_off(int h) { return lo_off(h) + half_bytes; }
    static constexpr int dw_off = 4 * half_bytes;
    static constexpr int dmin_off = dw_off + 128;
    static constexpr int mp_off = dmin_off + 128;
    static constexpr int bytes = mp_off + K::NSUB / 2 * 128;
};

template <dtype T>
void pack_scaled_panel(const uint8_t* const* rows, int64_t ng, uint8_t* pk) {
    using K = kt<T>;
    using L = scaled_layout<T>;
    static_assert(K::MINS && K::SC && !K::U8ACT && K::SUB == 32, "q4_K / q5_K only");
    alignas(64) static thread_local unpacked u[32];
    // Column c's scaled weights in natural order: sw[c][0] = w * lo digit, sw[c][1] = w * hi digit.
    alignas(64) static thread_local uint8_t sw[32][2][K::G];
    const __m512i low_bytes = _mm512_set1_epi16(0x00FF);
    for (int64_t g = 0; g < ng; ++g) {
        uint8_t* P = pk + g * L::bytes;
        for (int c = 0; c < 32; ++c) {
            K::unpack(rows[c] + g * K::BLK, u[c]);
            for (int q = 0; q < K::G / 64; ++q) {  // 64 elements: sub-blocks 2q, 2q + 1
                const __m512i w = ld512(u[c].q + 64 * q);
                const int s0 = u[c].sc[2 * q], s1 = u[c].sc[2 * q + 1];
                for (int d = 0; d < 2; ++d) {
                    const int sh = 3 * d;
                    const __m512i sv = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>((s0 >> sh) & 7)),
                                                              _mm512_set1_epi8(static_cast<char>((s1 >> sh) & 7)));
                    // Byte products (<= 217) by 16-bit multiplies: the low byte of x * s is
                    // x_lo * s_lo; the high bytes' product comes from the shifted words.
                    const __m512i ev = _mm512_and_si512(_mm512_mullo_epi16(w, sv), low_bytes);
                    const __m512i od = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(w, 8), _mm512_srli_epi16(sv, 8)), 8);
                    _mm512_store_si512(sw[c][d] + 64 * q, _mm512_or_si512(ev, od));
                }
            }
        }
        for (int h = 0; h < 2; ++h) {
            for (int d = 0; d < 2; ++d) {
                auto* w32 = reinterpret_cast<uint32_t*>(P + (d ? L::hi_off(h) : L::lo_off(h)));
                for (int t = 0; t < K::G / 4; ++t) {
                    for (int c = 0; c < 16; ++c) w32[t * 16 + c] = ld32(sw[16 * h + c][d] + 4 * t);
                }
            }
        }
        auto* dw = reinterpret_cast<float*>(P + L::dw_off);
        auto* dm = reinterpret_cast<float*>(P + L::dmin_off);
        auto* mp = reinterpret_cast<int16_t*>(P + L::mp_off);
        for (int c = 0; c < 32; ++c) {
            dw[c] = u[c].d;
            dm[c] = u[c].dmin;
        }
        for (int p = 0; p < K::NSUB / 2; ++p) {
            for (int c = 0; c < 32; ++c) {
                mp[(p * 32 + c) * 2] = u[c].mn[2 * p];
                mp[(p * 32 + c) * 2 + 1] = u[c].mn[2 * p + 1];
            }
        }
    }
}

// Rows [ia, ia + mi) (mi <= 32) x one scaled panel; configuration for mi rows, 64-byte A loaded.
template <class Ops, dtype T>
void amx_scaled_block(const uint8_t* pk, int64_t ng, const acts& a, int64_t ia, int mi, float* out,
                      int64_t ldo, int nw) {
    using K = kt<T>;
    using L = scaled_layout<T>;
    const int64_t nsum = a.k / 32;
    const bool two = mi > k_amx_rows;
    const uint8_t* aq0 = a.q + ia * a.ldq;
    const uint8_t* aq1 = aq0 + k_amx_rows * a.ldq;
    const size_t lda = static_cast<size_t>(a.ldq);
    alignas(64) int32_t clo[k_amx_block_m][16], chi[k_amx_block_m][16];
    Ops::fence();  // the packed panel and the activations are in memory before the tile loads
    for (int h = 0; h < 2; ++h) {
        const int nh = nw - 16 * h;  // valid columns of this half
        if (nh <= 0) break;
        __m512 acc[k_amx_block_m];
        for (int i = 0; i < mi; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; ++g) {
            const uint8_t* P = pk + g * L::bytes;
            Ops::template zero<t_c00>();
            Ops::template zero<t_c01>();
            if (two) {
                Ops::template zero<t_c10>();
                Ops::template zero<t_c11>();
            }
            for (int s = 0; s < K::G / 64; ++s) {
                const int64_t e = g * K::G + 64 * s;
                Ops::template load<t_a0>(aq0 + e, lda);
                Ops::template load<t_b0>(P + L::lo_off(h) + s * 16 * 64, 64);
                Ops::template load<t_b1>(P + L::hi_off(h) + s * 16 * 64, 64);
                Ops::template dpbsud<t_c00, t_a0, t_b0>();
                Ops::template dpbsud<t_c01, t_a0, t_b1>();
                if (two) {
                    Ops::template load<t_a1>(aq1 + e, lda);
                    Ops::template dpbsud<t_c10, t_a1, t_b0>();
                    Ops::template dpbsud<t_c11, t_a1, t_b1>();
                }
            }
            Ops::template store<t_c00>(&clo[0][0], 64);
            Ops::template store<t_c01>(&chi[0][0], 64);
            if (two) {
                Ops::template store<t_c10>(&clo[k_amx_rows][0], 64);
                Ops::template store<t_c11>(&chi[k_amx_rows][0], 64);
            }
            Ops::fence();  // the C tiles are in clo / chi before the vector loads below
            // The float steps of the VNNI tile, in its order, on this half's 16 columns.
            const __m512 dw = _mm512_load_ps(P + L::dw_off + 64 * h);
            const __m512 dm = _mm512_load_ps(P + L::dmin_off + 64 * h);
            for (int i = 0; i < mi; ++i) {
                const __m512i tot = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(chi[i]), 3),
                                                     _mm512_load_si512(clo[i]));
                const __m512 da = _mm512_set1_ps(a.d[(ia + i) * a.ng + g]);
                acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(tot), acc[i]);
                const int16_t* as = a.asum + (ia + i) * nsum + g * 8;
                __m512i ms = _mm512_setzero_si512();
                for (int p = 0; p < K::NSUB / 2; ++p) {
                    const __m512i av = _mm512_set1_epi32(static_cast<int>(ld32(reinterpret_cast<const uint8_t*>(as + 2 * p))));
                    ms = _mm512_add_epi32(ms, _mm512_madd_epi16(ld512(P + L::mp_off + p * 128 + 64 * h), av));
                }
                acc[i] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(ms), acc[i]);
            }
        }
        const __mmask16 keep = static_cast<__mmask16>(nh >= 16 ? 0xFFFF : (1u << nh) - 1);
        for (int i = 0; i < mi; ++i) _mm512_mask_storeu_ps(out + i * ldo + 16 * h, keep, acc[i]);
    }
}

// Which panel and block a type uses: scaled (q4_K, q5_K) or per-sub-block fold (the others).
template <dtype T>
struct amx_scheme {
    static constexpr bool scaled = T == dtype::q4_k || T == dtype::q5_k;
    static constexpr int bytes = scaled ? scaled_layout<T>::bytes : panel_layout<T>::bytes;
    static constexpr int a_colsb = scaled ? 64 : kt<T>::SUB;  // bytes per A-tile row
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
        for (int64_t ib = 0; ib < m; ib += k_amx_block_m) {
            const int mi = static_cast<int>(m - ib < k_amx_block_m ? m - ib : k_amx_block_m);
            if (mi != cfg_m) {
                const int ma0 = mi < k_amx_rows ? mi : k_amx_rows;
                make_tile_config(cfg, ma0, mi - ma0, S::a_colsb);
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
