// Dequantization of one element / one block of a GGUF weight row, for the CUDA kernels.
// Layouts are ggml's (kernels/cpu/quants-impl.h holds the same blocks as structs, and the
// device-math test checks the offsets against them).
// Values are bit-identical to the CPU's dequantize_row: the same integer -> float conversion and
// the same multiply-then-add order, without FMA contraction (mul_rn / add_rn).
//
// Each traits type gives block_elems, block_bytes and elem(block, j) for j in [0, block_elems).
// Blocks are read byte-wise: inside a GGUF tensor they are only 2-byte aligned.
#pragma once

#include <cstdint>

#include "kernels/fp16.h"
#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

struct deq_f32 {
    static constexpr int block_elems = 1;
    static constexpr int block_bytes = 4;
    CBL_HD static float elem(const uint8_t* b, int) { return bits_to_f32(load_u32(b)); }
};

struct deq_f16 {
    static constexpr int block_elems = 1;
    static constexpr int block_bytes = 2;
    CBL_HD static float elem(const uint8_t* b, int) { return h2f(load_u16(b)); }
};

struct deq_bf16 {
    static constexpr int block_elems = 1;
    static constexpr int block_bytes = 2;
    CBL_HD static float elem(const uint8_t* b, int) { return bf16_to_f32(load_u16(b)); }
};

// q4_0: {f16 d; u8 qs[16]}; element j < 16 is the low nibble of qs[j], j >= 16 the high nibble of
// qs[j - 16]; value (q - 8) * d.
struct deq_q4_0 {
    static constexpr int block_elems = 32;
    static constexpr int block_bytes = 18;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const uint8_t q = b[2 + (j & 15)];
        const int v = (j < 16 ? (q & 0xF) : (q >> 4)) - 8;
        return mul_rn(static_cast<float>(v), h2f(load_u16(b)));
    }
};

// q4_1: {f16 d, m; u8 qs[16]}; value q * d + m.
struct deq_q4_1 {
    static constexpr int block_elems = 32;
    static constexpr int block_bytes = 20;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const uint8_t q = b[4 + (j & 15)];
        const int v = j < 16 ? (q & 0xF) : (q >> 4);
        return add_rn(mul_rn(static_cast<float>(v), h2f(load_u16(b))), h2f(load_u16(b + 2)));
    }
};

// q5_0: {f16 d; u8 qh[4]; u8 qs[16]}; bit j of qh is the fifth bit of element j; (q - 16) * d.
struct deq_q5_0 {
    static constexpr int block_elems = 32;
    static constexpr int block_bytes = 22;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const uint8_t q = b[6 + (j & 15)];
        const uint32_t qh = load_u32(b + 2);
        const int v = ((j < 16 ? (q & 0xF) : (q >> 4)) | static_cast<int>(((qh >> j) & 1u) << 4));
        return mul_rn(static_cast<float>(v - 16), h2f(load_u16(b)));
    }
};

// q5_1: {f16 d, m; u8 qh[4]; u8 qs[16]}; q * d + m.
struct deq_q5_1 {
    static constexpr int block_elems = 32;
    static constexpr int block_bytes = 24;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const uint8_t q = b[8 + (j & 15)];
        const uint32_t qh = load_u32(b + 4);
        const int v = ((j < 16 ? (q & 0xF) : (q >> 4)) | static_cast<int>(((qh >> j) & 1u) << 4));
        return add_rn(mul_rn(static_cast<float>(v), h2f(load_u16(b))), h2f(load_u16(b + 2)));
    }
};

// q8_0: {f16 d; i8 qs[32]}; q * d.
struct deq_q8_0 {
    static constexpr int block_elems = 32;
    static constexpr int block_bytes = 34;
    CBL_HD static float elem(const uint8_t* b, int j) {
        return mul_rn(static_cast<float>(static_cast<int8_t>(b[2 + j])), h2f(load_u16(b)));
    }
};

// ---- K-quants: 256-element super-blocks of 16 or 8 sub-blocks with their own small scales ----
// Element j is computed on its own (a thread per element, or a warp lane per column), in the
// CPU's dequant_q*_k order: the sub-block's scale and min first (d * sc, dmin * m), then
// scale * q - min.

CBL_HD static inline float sub_rn(float a, float b) { return add_rn(a, -b); }

// q4_K / q5_K packed 6-bit scale and min of sub-block s in [0, 8) (ggml's get_scale_min_k4).
CBL_HD static inline void scale_min_k4(const uint8_t* q, int s, int* sc, int* m) {
    if (s < 4) {
        *sc = q[s] & 63;
        *m = q[s + 4] & 63;
    } else {
        *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
        *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
}

// q2_K: {u8 scales[16]; u8 qs[64]; f16 d, dmin}. Half h = j / 128 reads qs[32h ..]; within it,
// 32-element group g uses bit pair 2g of qs[32h + 16k + l] (k = which 16, l < 16); scale byte
// 8h + 2g + k holds the sub-block's scale (low nibble) and min (high nibble).
struct deq_q2_k {
    static constexpr int block_elems = 256;
    static constexpr int block_bytes = 84;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const int h = j >> 7, g = (j >> 5) & 3, k = (j >> 4) & 1, l = j & 15;
        const uint8_t sc = b[8 * h + 2 * g + k];
        const int q = (b[16 + 32 * h + 16 * k + l] >> (2 * g)) & 3;
        const float dl = mul_rn(h2f(load_u16(b + 80)), static_cast<float>(sc & 0xF));
        const float ml = mul_rn(h2f(load_u16(b + 82)), static_cast<float>(sc >> 4));
        return sub_rn(mul_rn(dl, static_cast<float>(q)), ml);
    }
};

// q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}. Same grouping as q2_K; the third bit is
// bit 4h + g of hmask[16k + l] (clear: subtract 4); sixteen signed 6-bit scales packed in 12
// bytes (low nibbles in bytes 0-7, high bit pairs in bytes 8-11), minus 32.
struct deq_q3_k {
    static constexpr int block_elems = 256;
    static constexpr int block_bytes = 110;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const int h = j >> 7, g = (j >> 5) & 3, k = (j >> 4) & 1, l = j & 15;
        const uint8_t* s = b + 96;
        const int is = 8 * h + 2 * g + k;
        const int lo = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
        const int hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
        const int sc = (lo | (hi << 4)) - 32;
        const int q2 = (b[32 + 32 * h + 16 * k + l] >> (2 * g)) & 3;
        const int hb = (b[16 * k + l] >> (4 * h + g)) & 1;
        const float dl = mul_rn(h2f(load_u16(b + 108)), static_cast<float>(sc));
        return mul_rn(dl, static_cast<float>(q2 - (hb ? 0 : 4)));
    }
};

// q4_K / q5_K element from its 4- or 5-bit quant v in sub-block s (scales at b + 4; d, dmin
// at b, b + 2): d * sc * v - dmin * m.
CBL_HD inline float k4_value(const uint8_t* b, int s, int v) {
    int sc, m;
    scale_min_k4(b + 4, s, &sc, &m);
    const float d1 = mul_rn(h2f(load_u16(b)), static_cast<float>(sc));
    const float m1 = mul_rn(h2f(load_u16(b + 2)), static_cast<float>(m));
    return sub_rn(mul_rn(d1, static_cast<float>(v)), m1);
}

// q4_K: {f16 d, dmin; u8 scales[12]; u8 qs[128]}. 64-element chunk c = j / 64 reads qs[32c ..]:
// its first 32 elements are low nibbles (sub-block 2c), the next 32 high nibbles (2c + 1).
struct deq_q4_k {
    static constexpr int block_elems = 256;
    static constexpr int block_bytes = 144;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const int c = j >> 6, hi = (j >> 5) & 1, l = j & 31;
        const uint8_t q = b[16 + 32 * c + l];
        return k4_value(b, 2 * c + hi, hi ? (q >> 4) : (q & 0xF));
    }
};

// q5_K: {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: q4_K plus a fifth bit, bit
// 2c + hi of qh[l].
struct deq_q5_k {
    static constexpr int block_elems = 256;
    static constexpr int block_bytes = 176;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const int c = j >> 6, hi = (j >> 5) & 1, l = j & 31;
        const uint8_t q = b[48 + 32 * c + l];
        const int fifth = ((b[16 + l] >> (2 * c + hi)) & 1) << 4;
        return k4_value(b, 2 * c + hi, (hi ? (q >> 4) : (q & 0xF)) + fifth);
    }
};

// q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}. Half h = j / 128; quarter u of it takes
// the low (u = 0, 1) or high (u = 2, 3) nibble of ql[64h + l (+ 32 for u = 1, 3)] and bit pair
// 2u of qh[32h + l]; scale scales[8h + l / 16 + 2u]; value d * scale * (q - 32).
struct deq_q6_k {
    static constexpr int block_elems = 256;
    static constexpr int block_bytes = 210;
    CBL_HD static float elem(const uint8_t* b, int j) {
        const int h = j >> 7, u = (j >> 5) & 3, l = j & 31;
        const uint8_t ql = b[64 * h + l + ((u & 1) ? 32 : 0)];
        const int lo = (u & 2) ? (ql >> 4) : (ql & 0xF);
        const int q = (lo | (((b[128 + 32 * h + l] >> (2 * u)) & 3) << 4)) - 32;
        const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * u]);
        const float ds = mul_rn(h2f(load_u16(b + 208)), static_cast<float>(sc));
        return mul_rn(ds, static_cast<float>(q));
    }
};

// Element `col` of a row of type T (col need not be block-aligned).
template <typename T>
CBL_HD inline float dequant_at(const uint8_t* row, int64_t col) {
    const int64_t blk = col / T::block_elems;
    return T::elem(row + blk * T::block_bytes, static_cast<int>(col - blk * T::block_elems));
}

// A whole block into y[0 .. T::block_elems).
template <typename T>
CBL_HD inline void dequant_block(const uint8_t* b, float* y) {
    for (int j = 0; j < T::block_elems; ++j) y[j] = T::elem(b, j);
}

}  // namespace hd
}  // namespace cacheblend
