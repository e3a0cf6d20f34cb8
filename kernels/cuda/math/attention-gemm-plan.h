// The arithmetic of the CUDA attention's GEMM path (kernels/cuda/attention-gemm.cu) as plain
// code: the chunking, every batched GEMM's offsets, leading dimensions and strides and the score
// the softmax reads (the causal limit is causal-mask.h's). The CUDA code runs these steps with
// cuBLASLt; test_cuda_device_math runs them with a reference GEMM of gemm_args' semantics
// (kernels/cuda/gemm.cuh) and compares the result with the CPU attention, so the path's indexing
// is tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/math/causal-mask.h"
#include "kernels/cuda/math/f16-staging.h"
#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// One attention call on the GEMM path. Per chunk of query rows: Q staged to f16 rows of
// `width` halves, S [n_head][chunk][ld] f32 scores, P [n_head][chunk][ld] f16 softmax weights,
// and one softmax denominator per (head, row).
struct attn_gemm_layout {
    int64_t d = 0;       // head_dim
    int64_t n_head = 0;  // query heads
    int64_t n_kv = 0;    // KV heads
    int64_t group = 0;   // query heads per KV head: head h reads KV head h / group
    int64_t width = 0;   // a staged Q row: n_head * d
    int64_t ld = 0;      // row stride of S and P: n_keys rounded up to 8 (16-byte aligned rows)
    int64_t chunk = 0;   // query rows per chunk, so that S and P fit chunk_bytes (at least 1)
};

inline attn_gemm_layout attn_gemm_layout_of(int64_t n_q, int64_t n_keys, int n_head, int n_kv,
                                            int head_dim, size_t chunk_bytes) {
    attn_gemm_layout l;
    l.d = head_dim;
    l.n_head = n_head;
    l.n_kv = n_kv;
    l.group = n_head / n_kv;
    l.width = l.n_head * l.d;
    l.ld = (n_keys + 7) / 8 * 8;
    const size_t row_bytes =
        size_t(l.n_head) * (size_t(l.ld) * (sizeof(float) + sizeof(uint16_t)) + sizeof(float));
    const int64_t fit = static_cast<int64_t>(chunk_bytes / row_bytes);
    l.chunk = fit < 1 ? 1 : (fit < n_q ? fit : n_q);
    return l;
}

// One batched GEMM in gemm_args' terms: for b < batch,
//   y[b] (m x n, row stride ldy) = x[b] (m x k, ldx) * (w_kn ? w[b] (k x n, ldw) : w[b]^T (n x k))
// with operand b at offset + b * stride elements from its buffer's base.
struct attn_gemm_step {
    int64_t w_off = 0, x_off = 0, y_off = 0;
    int64_t ldw = 0, ldx = 0, ldy = 0;
    int64_t m = 0, n = 0, k = 0;
    bool w_kn = false;
    int batch = 1;
    int64_t stride_w = 0, stride_x = 0, stride_y = 0;
};

// Head h = b * group + hh reads KV head b: for each hh, one GEMM batched over b, its operands at
// fixed strides (Q: group * d, K and V: d, S and P: group heads of chunk rows).
//
// S_h = Q_h K_b^T for `rows` rows of a chunk. Bases: w = the K cache, x = the staged Q chunk,
// y = S.
inline attn_gemm_step attn_scores_step(const attn_gemm_layout& l, int64_t kv_stride, int64_t n_keys,
                                       int64_t rows, int64_t hh) {
    attn_gemm_step s;
    s.w_off = 0;
    s.x_off = hh * l.d;
    s.y_off = hh * l.chunk * l.ld;
    s.ldw = kv_stride;
    s.ldx = l.width;
    s.ldy = l.ld;
    s.m = rows;
    s.n = n_keys;
    s.k = l.d;
    s.batch = static_cast<int>(l.n_kv);
    s.stride_w = l.d;
    s.stride_x = l.group * l.d;
    s.stride_y = l.group * l.chunk * l.ld;
    return s;
}

// O_h = P_h V_b into the output rows of the chunk that starts at query row i0, head h's columns.
// Bases: w = the V cache (n_keys rows of the KV width: w_kn), x = P, y = the attention output.
inline attn_gemm_step attn_values_step(const attn_gemm_layout& l, int64_t kv_stride, int64_t n_keys,
                                       int64_t out_stride, int64_t i0, int64_t rows, int64_t hh) {
    attn_gemm_step s;
    s.w_off = 0;
    s.x_off = hh * l.chunk * l.ld;
    s.y_off = i0 * out_stride + hh * l.d;
    s.ldw = kv_stride;
    s.ldx = l.ld;
    s.ldy = out_stride;
    s.m = rows;
    s.n = l.d;
    s.k = n_keys;
    s.w_kn = true;
    s.batch = static_cast<int>(l.n_kv);
    s.stride_w = l.d;
    s.stride_x = l.group * l.chunk * l.ld;
    s.stride_y = l.group * l.d;
    return s;
}

// Where row r of the chunk, head h, starts in S and P; its softmax denominator is at h * chunk + r
// of the sums.
CBL_HD inline int64_t attn_prob_row(int64_t h, int64_t r, int64_t chunk, int64_t ld) {
    return (h * chunk + r) * ld;
}

// A score as the softmax reads it: S of a Q row staged with exponent e, scaled back, times the
// attention scale (the CPU's dot * scale).
CBL_HD inline float attn_gemm_score(float s, int e, float scale) {
    return mul_rn(f16_unstage(s, e), scale);
}

// P holds exp(score - max) rounded to f16, not yet divided by the sum: the largest is 1 and the
// weights of a flat attention over many keys stay near it, where dividing first would push each
// below f16's normal range (1/n < 2^-14 past 16k keys) and round them all the same way. The
// output row is divided after O = P V by the sum of the rounded weights, so it is an exact convex
// combination of the values; a row with no visible key (sum 0) gets 0, as the row kernel gives.
CBL_HD inline float attn_gemm_out_scale(float sum) { return sum > 0.f ? 1.f / sum : 0.f; }

}  // namespace hd
}  // namespace cacheblend
