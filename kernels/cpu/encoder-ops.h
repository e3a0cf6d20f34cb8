// CPU ops for bidirectional encoders (the BERT sentence embedder, core/engine/bert.cpp): LayerNorm,
// erf GELU and non-causal attention over packed variable-length sequences. f32 row-major
// activations.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread-pool.h"

namespace cacheblend {

// y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta per row of n (biased variance, as
// torch.nn.LayerNorm); beta may be nullptr. y may alias x.
void layer_norm(thread_pool& pool, const float* x, int64_t m, int64_t n, int64_t ldx,
                const float* gamma, const float* beta, float eps, float* y, int64_t ldy);

// x = 0.5 * x * (1 + erf(x / sqrt(2))) in place over m rows of n: BERT's erf GELU, with erf from
// a vectorizable approximation (|error| < 2e-6 * max(1, |x|) against libm).
void gelu_erf(thread_pool& pool, float* x, int64_t m, int64_t n, int64_t ld);

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
    float scale = 1.f;         // usually 1/sqrt(head_dim)
    float* out = nullptr;      // [n_rows][n_head * head_dim], row stride out_stride
    int64_t out_stride = 0;
};
// softmax(q k^T * scale) v per sequence and head; f32 throughout.
void encoder_attention(thread_pool& pool, const encoder_attention_args& a);

}  // namespace cacheblend
