// Internal to the quantization kernels: ggml's block structs (bit for bit) and the entry points
// of the per-ISA translation units. Everything with a body here is `static` so that a copy
// compiled with -mavx512f can never be picked by the linker for baseline code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/fp16.h"

#if defined(__x86_64__)
#define CBL_QUANTS_X86 1
#else
#define CBL_QUANTS_X86 0
#endif

namespace cacheblend {
namespace qimpl {

constexpr int qk = 32;     // elements per block of the 32-element types
constexpr int qk_k = 256;  // elements per k-quant super-block

// Halves are stored as raw u16; blocks are only 2-byte aligned inside GGUF tensors.
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[16];
};
struct block_q4_1 {
    uint16_t d, m;
    uint8_t qs[16];
};
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct block_q8_0 {
    uint16_t d;
    int8_t qs[32];
};
struct block_q8_1 {
    uint16_t d, s;
    int8_t qs[32];
};
struct block_q2_k {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};
struct block_q3_k {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
struct block_q4_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
struct block_q5_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
struct block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// d is read with memcpy: callers may hand us q8_K rows at any even address.
struct block_q8_k {
    uint8_t d[4];  // f32 as bytes: keeps the block 2-byte aligned like the others
    int8_t qs[256];
    int16_t bsums[16];
};

static_assert(sizeof(block_q4_0) == 18, "q4_0 layout");
static_assert(sizeof(block_q4_1) == 20, "q4_1 layout");
static_assert(sizeof(block_q5_0) == 22, "q5_0 layout");
static_assert(sizeof(block_q5_1) == 24, "q5_1 layout");
static_assert(sizeof(block_q8_0) == 34, "q8_0 layout");
static_assert(sizeof(block_q8_1) == 36, "q8_1 layout");
static_assert(sizeof(block_q2_k) == 84, "q2_k layout");
static_assert(sizeof(block_q3_k) == 110, "q3_k layout");
static_assert(sizeof(block_q4_k) == 144, "q4_k layout");
static_assert(sizeof(block_q5_k) == 176, "q5_k layout");
static_assert(sizeof(block_q6_k) == 210, "q6_k layout");
static_assert(sizeof(block_q8_k) == 292, "q8_k layout");

// Exact binary16 -> binary32: the shared definition (kernels/fp16.h), inlined into every ISA's copy.
static inline float h2f(uint16_t h) { return hd::h2f(h); }

static inline float q8k_d(const block_q8_k* b) {
    float d;
    std::memcpy(&d, b->d, 4);
    return d;
}

// q4_K / q5_K 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
static inline void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

using vec_dot_rows_fn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t nrows,
                                 const void* a, float* out);
using dequantize_fn = void (*)(const void* src, float* dst, int64_t n);
// out[i * ldo + r] = dot(weight row r, activation row i) for r < nrows, i < m.
using vec_dot_tile_fn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t nrows,
                                 const void* a, size_t a_stride, int64_t m, float* out,
                                 int64_t ldo);
using quantize_fn = void (*)(const float* src, void* dst, int64_t n);

}  // namespace qimpl

#if CBL_QUANTS_X86
// Each returns nullptr where that ISA has no specialised kernel (the generic one is used).
namespace avx2 {
qimpl::vec_dot_rows_fn find_vec_dot_rows(dtype t);
qimpl::dequantize_fn find_dequantize(dtype t);
qimpl::quantize_fn find_quantize(dtype t);
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
}  // namespace avx2
namespace avx512 {
qimpl::vec_dot_rows_fn find_vec_dot_rows(dtype t);
qimpl::vec_dot_tile_fn find_vec_dot_tile(dtype t);  // qgemm-avx512.cpp
qimpl::dequantize_fn find_dequantize(dtype t);
qimpl::quantize_fn find_quantize(dtype t);
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
}  // namespace avx512
#endif

}  // namespace cacheblend
