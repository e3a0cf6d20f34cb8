// CPU ops specific to blended prefill: relocating cached chunk KV into the working cache and
// scoring how far fresh KV deviates from cached KV.
#pragma once

#include <cstdint>

#include "kernels/cpu/ops.h"

namespace cacheblend {

// For each row i: K row (before RoPE) is rotated to absolute position pos[i] and written to
// k_cache[pos[i]] as f16; V row (f16) is copied to v_cache[pos[i]]. Rows are n_kv_head * head_dim
// wide, ld_src elements apart. K is f32 or f16 (k_type; else kernel_error invalid_arg), rotated
// in f32 either way: keys stored in f32 get exactly the rounding full prefill gives, and keys
// stored in f16 the same bits as when they are widened to f32 first.
void relocate_kv(thread_pool& pool, const void* k_src, dtype k_type, const uint16_t* v_src,
                 int64_t n, int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                 const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache, int64_t ld_cache);

// d[i] = sum_j (fresh[i][j] - cached[i][j])^2 over `width` elements (fresh f32, cached f16).
void kv_deviation(thread_pool& pool, const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                  int64_t ld_cached, int64_t n, int64_t width, float* d);

// scores[j], j in [0, a.n_keys): the attention key j receives from the query rows, summed over
// query rows and heads: each (row, head) is the softmax attention() computes (keys at positions
// <= the row's, scale a.scale, GQA as there), so a row's heads add up to n_head. Reads a.q, a.n_q,
// a.q_stride, a.q_pos, a.k, a.kv_stride, a.n_keys and the head shape; a.v and a.out are unused.
// The query selection policy's signal (core/blend/selection.h). Deterministic: fixed sum order.
void attention_mass(thread_pool& pool, const attention_args& a, float* scores);

}  // namespace cacheblend
