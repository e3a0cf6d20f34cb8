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
