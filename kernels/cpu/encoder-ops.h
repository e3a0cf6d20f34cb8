// CPU ops for bidirectional encoders (the BERT sentence embedder, core/engine/bert.cpp): LayerNorm,
// erf GELU and non-causal attention over packed variable-length sequences. f32 row-major
// activations.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread-pool.h"
#include "kernels/ops-types.h"

namespace cacheblend {

// y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta per row of n (biased variance, as
// torch.nn.LayerNorm); beta may be nullptr. y may alias x.
void layer_norm(thread_pool& pool, const float* x, int64_t m, int64_t n, int64_t ldx,
                const float* gamma, const float* beta, float eps, float* y, int64_t ldy);

// x = 0.5 * x * (1 + erf(x / sqrt(2))) in place over m rows of n: BERT's erf GELU, with erf from
// a vectorizable approximation (|error| < 2e-6 * max(1, |x|) against libm).
void gelu_erf(thread_pool& pool, float* x, int64_t m, int64_t n, int64_t ld);

// softmax(q k^T * scale) v per sequence and head (encoder_attention_args, kernels/ops-types.h);
// f32 throughout.
void encoder_attention(thread_pool& pool, const encoder_attention_args& a);

}  // namespace cacheblend
