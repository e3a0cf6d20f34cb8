// The plain argument types of the backend ops (kernels/backend.h): weights as GGUF stores them,
// RoPE parameters, attention arguments (causal for the LLM, packed sequences for the encoder). No backend is included here, so the engine (core/) and
// every backend can share them (docs/ARCHITECTURE.md, 'Backends').
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

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

// One product of backend::matmuls: y = W x + bias for the call's shared input rows x, written
// to `m` rows of y, ldy floats apart (bias: w.rows floats or null).
struct matmul_out {
    weight_view w;
    float* y = nullptr;
    int64_t ldy = 0;
    const float* bias = nullptr;
};

// An RMSNorm of the input rows that a fused matmul applies first (backend::matmuls,
// matmul_swiglu): rms_norm(x, m, cols, ldx, gamma, eps, h, ldh), then the product of h. h is
// backend memory the op may use: the defaults leave the normalized rows there, a device that
// normalizes inside its kernel leaves it as it was.
struct pre_norm {
    const float* gamma = nullptr;
    float eps = 0.f;
    float* h = nullptr;
    int64_t ldh = 0;
};

enum class rope_style {
    norm,  // rotate adjacent pairs (x[2i], x[2i+1]): GGUF `llama` arch (converter permuted Q/K)
    neox,  // rotate halves (x[i], x[i + n_dims/2]): qwen2 and HF-layout models
};

struct rope_params {
    rope_style style = rope_style::norm;
    int n_dims = 0;  // rotated dims per head (== head_dim for llama)
    float freq_base = 10000.f;
    float freq_scale = 1.f;               // 1 / linear scaling factor
    const float* freq_factors = nullptr;  // optional per-pair divisors (rope_freqs.weight)
};

// A layer's attention inputs made ready in one op (backend::rope_qk_store_kv): RoPE on m query
// rows (n_head heads) and key rows (n_kv_head heads) in place at positions pos[m], then the key
// and value rows stored as f16 into the cache rows at those positions.
struct rope_store_args {
    float* q = nullptr;  // [m][n_head * head_dim], row stride ldq floats
    int64_t ldq = 0;
    int n_head = 0;
    float* k = nullptr;        // [m][n_kv_head * head_dim], row stride ldkv floats
    const float* v = nullptr;  // the same layout as k
    int64_t ldkv = 0;
    int n_kv_head = 0;
    int head_dim = 0;
    int64_t m = 0;
    const int32_t* pos = nullptr;
    rope_params rope;
    uint16_t* k_cache = nullptr;  // f16 rows by absolute position, row stride ld_cache elements
    uint16_t* v_cache = nullptr;
    int64_t ld_cache = 0;
};

// Selected query rows against all cached keys, causal by absolute position.
struct attention_args {
    const float* q = nullptr;  // [n_q][n_head * head_dim], row stride q_stride floats
    int64_t n_q = 0;
    int64_t q_stride = 0;
    const int32_t* q_pos = nullptr;  // absolute position of each query row
    const uint16_t* k = nullptr;  // f16 cache, row = absolute position: [n_ctx][n_kv_head*head_dim]
    const uint16_t* v = nullptr;  // f16 cache, same layout as k
    int64_t kv_stride = 0;        // row stride of k and v in elements
    int64_t n_keys = 0;           // keys at positions [0, n_keys) hold valid data ...
    // ... or, when set, only the keys up to the highest q_pos: those past it may never have been
    // written, so a backend reads none of them (a decode step recorded once and replayed at
    // every position passes the cache's size as n_keys: core/engine/forward.cpp).
    bool visible_keys_only = false;
    int n_head = 0;
    int n_kv_head = 0;  // GQA: query head h reads kv head h / (n_head / n_kv_head)
    int head_dim = 0;
    float scale = 1.f;     // usually 1/sqrt(head_dim)
    float* out = nullptr;  // [n_q][n_head * head_dim], row stride out_stride floats
    int64_t out_stride = 0;
};

// The KV heads `a` reads, at least 1: n_kv_head, or n_head when n_kv_head is 0 (multi-head
// attention). Throws kernel_error(invalid_arg) naming `op` when the query heads do not group over the KV
// heads (n_kv_head < 0, or n_head not a multiple of it): on a device a bad grouping is no trap
// but a read past the keys. Every attention kernel, CPU and CUDA, reads its arguments here.
int attention_kv_heads(const attention_args& a, const char* op);

// Packed sequences: rows [seq_start[s], seq_start[s + 1]) of q/k/v belong to sequence s, and a
// query attends to every key of its own sequence (no causal mask, no padding).
struct encoder_attention_args {
    const float* q = nullptr;  // [n_rows][n_head * head_dim], row stride q_stride floats
    const float* k = nullptr;  // same layout, row stride kv_stride
    const float* v = nullptr;  // same layout, row stride kv_stride
    int64_t q_stride = 0;
    int64_t kv_stride = 0;
    const int32_t* seq_start = nullptr;  // n_seq + 1 ascending row offsets
    int n_seq = 0;
    int n_head = 0;
    int head_dim = 0;
    float scale = 1.f;     // usually 1/sqrt(head_dim)
    float* out = nullptr;  // [n_rows][n_head * head_dim], row stride out_stride
    int64_t out_stride = 0;
};

}  // namespace cacheblend
