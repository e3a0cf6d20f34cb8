// Block (de)quantization and dot products for every weight type we read from GGUF.
// Layouts: ggml's, bit for bit; the block structs are in kernels/cpu/quants-impl.h and
// docs/ARCHITECTURE.md, 'Adding a quant type', says where a new one goes.
// All row lengths n must be multiples of the type's block size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace cacheblend {

// The activation format a weight type is multiplied with (ggml's vec_dot_type):
// q4_0/q5_0/q8_0 -> q8_0; q4_1/q5_1 -> q8_1; k-quants -> q8_k; f16 -> f16; bf16 -> bf16; f32 -> f32.
dtype vec_dot_type(dtype weight);

// Weights -> f32.
void dequantize_row(dtype t, const void* src, float* dst, int64_t n);

// f32 -> t. Supported for every type in dtype.h (activation types q8_0/q8_1/q8_k included);
// weight types use a simple round-to-nearest quantizer (tests build tiny models with it).
void quantize_row(dtype t, const float* src, void* dst, int64_t n);

// One dot product: weight row w (type t) with activation row a (type vec_dot_type(t)).
float vec_dot(dtype t, int64_t n, const void* w, const void* a);

// out[r] = vec_dot(t, n, w + r * w_stride, a) for r in [0, nrows): the decode GEMV inner loop.
// Each out[r] has the same bits however the rows are split over calls (threads may split freely).
// w and a need only 2-byte alignment (4 for f32); a must come from quantize_row (q8 values in
// [-127, 127]).
void vec_dot_rows(dtype t, int64_t n, const void* w, size_t w_stride, int64_t nrows, const void* a,
                  float* out);

// out[i * ldo + r] = vec_dot(t, n, w + r * w_stride, a + i * a_stride) for r < nrows, i < m, each
// with the bits vec_dot_rows gives it (batch invariance). Fast (an int8 GEMM) where
// vec_dot_tile_native(t); otherwise vec_dot_rows per activation row.
void vec_dot_tile(dtype t, int64_t n, const void* w, size_t w_stride, int64_t nrows, const void* a,
                  size_t a_stride, int64_t m, float* out, int64_t ldo);
bool vec_dot_tile_native(dtype t);

}  // namespace cacheblend
