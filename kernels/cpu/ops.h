// CPU compute ops used by the forward pass (through the CPU backend, core/engine/backend.h).
// Activations are f32 row-major; weights stay in their GGUF type; the KV cache is f16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/cpu/thread-pool.h"

namespace cacheblend {

// A weight matrix as GGUF stores it: `rows` output features, each a contiguous row of `cols`
// input features in `type` (row_bytes = dtype_row_bytes(type, cols)).
struct weight_view {
    dtype type = dtype::f32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    size_t row_bytes = 0;
};

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

enum class rope_style {
    norm,  // rotate adjacent pairs (x[2i], x[2i+1]): GGUF `llama` arch (converter permuted Q/K)
    neox,  // rotate halves (x[i], x[i + n_dims/2]): qwen2 and HF-layout models
};

struct rope_params {
    rope_style style = rope_style::norm;
    int n_dims = 0;            // rotated dims per head (== head_dim for llama)
    float freq_base = 10000.f;
    float freq_scale = 1.f;    // 1 / linear scaling factor
    const float* freq_factors = nullptr;  // optional per-pair divisors (rope_freqs.weight)
};

// Rotates x[m][n_head][head_dim] (row stride ldx floats) in place for absolute positions pos[m].
// Same float math as ggml (theta_i = pos * freq_scale * base^(-2i/n_dims), powf per pair).
void rope(thread_pool& pool, float* x, int64_t m, int64_t ldx, int n_head, int head_dim,
          const int32_t* pos, const rope_params& p);

// f32 rows -> f16 cache rows: cache[pos[i]][0..n) = src[i][0..n).
void store_rows_f16(thread_pool& pool, const float* src, int64_t m, int64_t n, int64_t ldsrc,
                    const int32_t* pos, uint16_t* cache, int64_t ld_cache);

// Selected query rows against all cached keys, causal by absolute position.
struct attention_args {
    const float* q = nullptr;       // [n_q][n_head * head_dim], row stride q_stride floats
    int64_t n_q = 0;
    int64_t q_stride = 0;
    const int32_t* q_pos = nullptr; // absolute position of each query row
    const uint16_t* k = nullptr;    // f16 cache, row = absolute position: [n_ctx][n_kv_head*head_dim]
    const uint16_t* v = nullptr;    // f16 cache, same layout as k
    int64_t kv_stride = 0;          // row stride of k and v in elements
    int64_t n_keys = 0;             // keys at positions [0, n_keys) hold valid data
    int n_head = 0;
    int n_kv_head = 0;              // GQA: query head h reads kv head h / (n_head / n_kv_head)
    int head_dim = 0;
    float scale = 1.f;              // usually 1/sqrt(head_dim)
    float* out = nullptr;           // [n_q][n_head * head_dim], row stride out_stride floats
    int64_t out_stride = 0;
};
// Query i attends to key j iff j <= q_pos[i] and j < n_keys. f32 accumulation, online softmax.
void attention(thread_pool& pool, const attention_args& a);

// out[i] = silu(gate[i]) * up[i] over m rows of n (out may alias gate).
void swiglu(thread_pool& pool, const float* gate, const float* up, int64_t m, int64_t n,
            int64_t ld, float* out);

// y += x over m rows of n.
void add_rows(thread_pool& pool, float* y, const float* x, int64_t m, int64_t n, int64_t ld);

}  // namespace cacheblend
