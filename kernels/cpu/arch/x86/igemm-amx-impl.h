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

// Configuration for ma0 (1..16) + ma1 (0..16) activation rows and sub-blocks of `sub` elements.
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

template <class Ops, dtype T>
void amx_gemm_t(int64_t k, const uint8_t* w, size_t w_stride, int64_t nrows, const acts& a, int64_t i0,
                int64_t m, float* out, int64_t ldo) {
    using K = kt<T>;
    using L = panel_layout<T>;
    const int64_t ng = k / K::G;
    static thread_local aligned_array<uint8_t> pk_buf;
    if (pk_buf.size() < static_cast<size_t>(ng * L::bytes)) pk_buf.resize(static_cast<size_t>(ng * L::bytes));
    uint8_t* pk = pk_buf.data();
    tile_config cfg;
    int cfg_m = 0;  // rows the loaded configuration is for (0: none loaded)
    for (int64_t r0 = 0; r0 < nrows; r0 += 32) {
        const int nw = static_cast<int>(nrows - r0 < 32 ? nrows - r0 : 32);
        const uint8_t* rows[32];
        for (int c = 0; c < 32; ++c) rows[c] = w + (r0 + (c < nw ? c : nw - 1)) * w_stride;
        pack_panel<T>(rows, ng, pk);
        for (int64_t ib = 0; ib < m; ib += k_amx_block_m) {
            const int mi = static_cast<int>(m - ib < k_amx_block_m ? m - ib : k_amx_block_m);
            if (mi != cfg_m) {
                const int ma0 = mi < k_amx_rows ? mi : k_amx_rows;
                make_tile_config(cfg, ma0, mi - ma0, K::SUB);
                Ops::config(cfg);
                cfg_m = mi;
            }
            amx_block<Ops, T>(pk, ng, a, i0 + ib, mi, out + ib * ldo + r0, ldo, nw);
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
