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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const float d = h2f(load_u16(b));
        const uint8_t* q = b + 2 + (j0 & 15);
        const int shift = j0 < 16 ? 0 : 4;
        for (int i = 0; i < 8; ++i)
            y[i] = mul_rn(static_cast<float>(((q[i] >> shift) & 0xF) - 8), d);
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const float d = h2f(load_u16(b)), m = h2f(load_u16(b + 2));
        const uint8_t* q = b + 4 + (j0 & 15);
        const int shift = j0 < 16 ? 0 : 4;
        for (int i = 0; i < 8; ++i) {
            y[i] = add_rn(mul_rn(static_cast<float>((q[i] >> shift) & 0xF), d), m);
        }
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const float d = h2f(load_u16(b));
        const uint32_t qh = load_u32(b + 2) >> j0;
        const uint8_t* q = b + 6 + (j0 & 15);
        const int shift = j0 < 16 ? 0 : 4;
        for (int i = 0; i < 8; ++i) {
            const int v = ((q[i] >> shift) & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4);
            y[i] = mul_rn(static_cast<float>(v - 16), d);
        }
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const float d = h2f(load_u16(b)), m = h2f(load_u16(b + 2));
        const uint32_t qh = load_u32(b + 4) >> j0;
        const uint8_t* q = b + 8 + (j0 & 15);
        const int shift = j0 < 16 ? 0 : 4;
        for (int i = 0; i < 8; ++i) {
            const int v = ((q[i] >> shift) & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4);
            y[i] = add_rn(mul_rn(static_cast<float>(v), d), m);
        }
    }
};

// q8_0: {f16 d; i8 qs[32]}; q * d.
struct deq_q8_0 {
    static constexpr int block_elems = 32;
    static constexpr int block_bytes = 34;
    CBL_HD static float elem(const uint8_t* b, int j) {
        return mul_rn(static_cast<float>(static_cast<int8_t>(b[2 + j])), h2f(load_u16(b)));
    }
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const float d = h2f(load_u16(b));
        for (int i = 0; i < 8; ++i)
            y[i] = mul_rn(static_cast<float>(static_cast<int8_t>(b[2 + j0 + i])), d);
    }
};

// ---- K-quants: 256-element super-blocks of 16 or 8 sub-blocks with their own small scales ----
// elem(b, j) computes element j on its own; run8(b, j0, y) the 8 elements j0 .. j0 + 7 (j0 a
// multiple of 8, so one sub-block scale) with the scale decoded once. Both in the CPU's
// dequant_q*_k order: the sub-block's scale and min first (d * sc, dmin * m), then scale * q - min.

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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const int h = j0 >> 7, g = (j0 >> 5) & 3, k = (j0 >> 4) & 1, l0 = j0 & 15;
        const uint8_t sc = b[8 * h + 2 * g + k];
        const float dl = mul_rn(h2f(load_u16(b + 80)), static_cast<float>(sc & 0xF));
        const float ml = mul_rn(h2f(load_u16(b + 82)), static_cast<float>(sc >> 4));
        const uint8_t* qs = b + 16 + 32 * h + 16 * k + l0;
        for (int i = 0; i < 8; ++i) {
            y[i] = sub_rn(mul_rn(dl, static_cast<float>((qs[i] >> (2 * g)) & 3)), ml);
        }
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const int h = j0 >> 7, g = (j0 >> 5) & 3, k = (j0 >> 4) & 1, l0 = j0 & 15;
        const uint8_t* s = b + 96;
        const int is = 8 * h + 2 * g + k;
        const int lo = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
        const int hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
        const float dl = mul_rn(h2f(load_u16(b + 108)), static_cast<float>((lo | (hi << 4)) - 32));
        const uint8_t* qs = b + 32 + 32 * h + 16 * k + l0;
        const uint8_t* hm = b + 16 * k + l0;
        for (int i = 0; i < 8; ++i) {
            const int q2 = (qs[i] >> (2 * g)) & 3;
            const int hb = (hm[i] >> (4 * h + g)) & 1;
            y[i] = mul_rn(dl, static_cast<float>(q2 - (hb ? 0 : 4)));
        }
    }
};

// q4_K / q5_K element from its 4- or 5-bit quant v in sub-block s (scales at b + 4; d, dmin
// at b, b + 2): d * sc * v - dmin * m.
// k4_scale_min gives the sub-block's two factors once, for a run of its elements.
CBL_HD inline void k4_scale_min(const uint8_t* b, int s, float* d1, float* m1) {
    int sc, m;
    scale_min_k4(b + 4, s, &sc, &m);
    *d1 = mul_rn(h2f(load_u16(b)), static_cast<float>(sc));
    *m1 = mul_rn(h2f(load_u16(b + 2)), static_cast<float>(m));
}

CBL_HD inline float k4_value(const uint8_t* b, int s, int v) {
    float d1, m1;
    k4_scale_min(b, s, &d1, &m1);
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const int c = j0 >> 6, hi = (j0 >> 5) & 1, l0 = j0 & 31;
        float d1, m1;
        k4_scale_min(b, 2 * c + hi, &d1, &m1);
        const uint8_t* q = b + 16 + 32 * c + l0;
        const int shift = hi ? 4 : 0;
        for (int i = 0; i < 8; ++i) {
            y[i] = sub_rn(mul_rn(d1, static_cast<float>((q[i] >> shift) & 0xF)), m1);
        }
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const int c = j0 >> 6, hi = (j0 >> 5) & 1, l0 = j0 & 31;
        float d1, m1;
        k4_scale_min(b, 2 * c + hi, &d1, &m1);
        const uint8_t* q = b + 48 + 32 * c + l0;
        const uint8_t* qh = b + 16 + l0;
        const int shift = hi ? 4 : 0, bit = 2 * c + hi;
        for (int i = 0; i < 8; ++i) {
            const int v = ((q[i] >> shift) & 0xF) + (((qh[i] >> bit) & 1) << 4);
            y[i] = sub_rn(mul_rn(d1, static_cast<float>(v)), m1);
        }
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
    CBL_HD static void run8(const uint8_t* b, int j0, float* y) {
        const int h = j0 >> 7, u = (j0 >> 5) & 3, l0 = j0 & 31;
        const uint8_t* ql = b + 64 * h + l0 + ((u & 1) ? 32 : 0);
        const uint8_t* qh = b + 128 + 32 * h + l0;
        const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + l0 / 16 + 2 * u]);
        const float ds = mul_rn(h2f(load_u16(b + 208)), static_cast<float>(sc));
        const int shift = (u & 2) ? 4 : 0;
        for (int i = 0; i < 8; ++i) {
            const int q = (((ql[i] >> shift) & 0xF) | (((qh[i] >> (2 * u)) & 3) << 4)) - 32;
            y[i] = mul_rn(ds, static_cast<float>(q));
        }
    }
};

// Element `col` of a row of type T (col need not be block-aligned).
template <typename T>
CBL_HD inline float dequant_at(const uint8_t* row, int64_t col) {
    const int64_t blk = col / T::block_elems;
    return T::elem(row + blk * T::block_bytes, static_cast<int>(col - blk * T::block_elems));
}

// Elements col0 .. col0 + 7 of a row into y (col0 a multiple of 8). Every block of more than one
// element is a multiple of 8 long and its sub-blocks share one scale over 8 aligned elements
// (16 or 32 elements per scale), so the block's scales are decoded once per 8 elements instead of
// once per element; values are bit-identical to dequant_at's.
template <typename T>
CBL_HD inline void dequant_run8(const uint8_t* row, int64_t col0, float* y) {
    if constexpr (T::block_elems == 1) {
        for (int i = 0; i < 8; ++i) y[i] = T::elem(row + (col0 + i) * T::block_bytes, 0);
    } else {
        const int64_t blk = col0 / T::block_elems;
        T::run8(row + blk * T::block_bytes, static_cast<int>(col0 - blk * T::block_elems), y);
    }
}

// A whole block into y[0 .. T::block_elems).
template <typename T>
CBL_HD inline void dequant_block(const uint8_t* b, float* y) {
    for (int j = 0; j < T::block_elems; ++j) y[j] = T::elem(b, j);
}

}  // namespace hd
}  // namespace cacheblend
