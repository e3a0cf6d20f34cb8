// Prefill-sized attention through cuBLASLt (attention.cuh's semantics): the path for many query
// rows, where the row kernel's one-key-at-a-time fold is slow.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/context.cuh"
#include "kernels/ops-types.h"

namespace cacheblend {
namespace cuda {

// Query rows from which attention runs as GEMMs (decode and short batches keep the row kernel).
constexpr int64_t k_attn_gemm_min_rows = 64;

// Whether `a` suits the GEMM path: enough query rows, and head size, strides and pointers
// aligned as the f16 tensor-core GEMMs need (every model the engine loads has them).
bool cbl_cuda_attention_gemm_fits(const attention_args& a);

// The attention of `a` with n_kv KV heads (attention_kv_heads), a.n_q >= 1, a.n_head >= 1.
void cbl_cuda_attention_gemm(cuda_ctx& ctx, const attention_args& a, int n_kv);

// Attention calls that took the GEMM path in this process (backend-cuda.h exports it for tests).
int64_t cbl_cuda_attention_gemm_calls() noexcept;

}  // namespace cuda
}  // namespace cacheblend
