// CPU compute ops used by the forward pass (through the CPU backend, kernels/cpu/backend-cpu.cpp;
// the interface is kernels/backend.h, the argument types kernels/ops-types.h).
// Activations are f32 row-major; weights stay in their GGUF type; the KV cache is f16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/thread-pool.h"
#include "kernels/ops-types.h"

namespace cacheblend {

// y[m x w.rows] = x[m x w.cols] * w^T (+ bias[w.rows] when bias != nullptr).
// Small m runs the quantized GEMV path (activations quantized to vec_dot_type, int8 dot products);
// large m dequantizes weight panels to f32 and runs a blocked SIMD GEMM. ldx/ldy in floats.
void matmul(thread_pool& pool, const weight_view& w, const float* x, int64_t m, int64_t ldx,
            float* y, int64_t ldy, const float* bias = nullptr);

// Row i of y = dequantized row ids[i] of w (token embedding lookup).
void get_rows(thread_pool& pool, const weight_view& w, const int32_t* ids, int64_t m, float* y,
              int64_t ldy);

// y = x / sqrt(mean(x^2) + eps) * gamma, per row of n (y may alias x).
void rms_norm(thread_pool& pool, const float* x, int64_t m, int64_t n, int64_t ldx,
              const float* gamma, float eps, float* y, int64_t ldy);

// Rotates x[m][n_head][head_dim] (row stride ldx floats) in place for absolute positions pos[m].
// Same float math as ggml (theta_i = pos * freq_scale * base^(-2i/n_dims), powf per pair).
void rope(thread_pool& pool, float* x, int64_t m, int64_t ldx, int n_head, int head_dim,
          const int32_t* pos, const rope_params& p);

// f32 rows -> f16 cache rows: cache[pos[i]][0..n) = src[i][0..n).
void store_rows_f16(thread_pool& pool, const float* src, int64_t m, int64_t n, int64_t ldsrc,
                    const int32_t* pos, uint16_t* cache, int64_t ld_cache);

// Selected query rows against all cached keys (attention_args, kernels/ops-types.h).
// Query i attends to key j iff j <= q_pos[i] and j < n_keys. f32 accumulation, online softmax.
void attention(thread_pool& pool, const attention_args& a);

// out[i] = silu(gate[i]) * up[i] over m rows of n (out may alias gate).
void swiglu(thread_pool& pool, const float* gate, const float* up, int64_t m, int64_t n,
            int64_t ld, float* out);

// y += x over m rows of n.
void add_rows(thread_pool& pool, float* y, const float* x, int64_t m, int64_t n, int64_t ld);

}  // namespace cacheblend
