// RoPE on device rows (queries and keys in place) and the relocation of cached chunk KV: keys
// are stored before RoPE (docs/ARCHITECTURE.md, 'KV store'), so placing a chunk at new positions is
// one rotation.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.cuh"
#include "kernels/ops-types.h"

namespace cacheblend {
namespace cuda {

// x[m][n_head][head_dim] (row stride ldx floats) rotated in place at positions pos[m] (device).
// p.freq_factors, when set, is device memory (n_dims / 2 floats), like every op pointer.
struct rope_args {
    float* x = nullptr;
    int64_t m = 0, ldx = 0;
    int n_head = 0, head_dim = 0;
    const int32_t* pos = nullptr;
    rope_params p;
};

void cbl_cuda_rope(cuda_ctx& ctx, const rope_args& a);

// backend::rope_qk_store_kv in one launch: a block per row rotates its query and key pairs,
// then (after a barrier) stores the row's keys and values.
void cbl_cuda_rope_qk_store_kv(cuda_ctx& ctx, const rope_store_args& a);

// Row i: K (pre-RoPE, f32 or f16 as k_type says) rotated to pos[i] -> k_cache[pos[i]] (f16), V
// (f16) copied -> v_cache[pos[i]].
struct relocate_args {
    const void* k_src = nullptr;
    dtype k_type = dtype::f32;
    const uint16_t* v_src = nullptr;
    int64_t n = 0, ld_src = 0;
    const int32_t* pos = nullptr;
    int n_kv_head = 0, head_dim = 0;
    rope_params p;
    uint16_t* k_cache = nullptr;
    uint16_t* v_cache = nullptr;
    int64_t ld_cache = 0;
};

void cbl_cuda_relocate_kv(cuda_ctx& ctx, const relocate_args& a);

}  // namespace cuda
}  // namespace cacheblend
