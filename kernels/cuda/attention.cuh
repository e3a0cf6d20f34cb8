// Attention of selected query rows against the f16 KV cache, causal by absolute position, with
// GQA (semantics of kernels/cpu/ops.h attention_args; every pointer is device memory). Query i
// sees key j iff j <= q_pos[i] and j < n_keys; f32 accumulation with the online softmax of
// kernels/cuda/math/online-softmax.h.
#pragma once

#include "kernels/cuda/context.cuh"
#include "kernels/ops-types.h"

namespace cacheblend {
namespace cuda {

constexpr int k_attn_max_head_dim = 256;

void cbl_cuda_attention(cuda_ctx& ctx, const attention_args& a);

// Calls of the row kernel that split keys over blocks in this process (backend-cuda.h exports
// it for tests).
int64_t cbl_cuda_attention_split_calls() noexcept;

}  // namespace cuda
}  // namespace cacheblend
