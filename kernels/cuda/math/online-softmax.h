// The online-softmax (flash attention) accumulation for the CUDA attention kernel. Scores are in
// log2 units (q is pre-scaled by scale * log2(e), as on the CPU), so weights are exp2(s - max).
// Folding key j into a running state:
//     m' = max(m, s_j), alpha = exp2(m - m'), p = exp2(s_j - m'), l' = l * alpha + p,
//     o' = o * alpha + p * v_j   (per output element)
// and out = o / l at the end (0 when no key was visible). Partial states over disjoint key ranges
// merge with softmax_merge, so warps (or blocks) can split the keys.
#pragma once

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// Warps of one (query row, head) block of the row kernel (kernels/cuda/attention.cu), each folding
// every k_attn_row_warps-th key: 16 keep a decode step (one block per head) from leaving most of
// an SM's schedulers idle. The host mirror in test_cuda_device_math splits keys the same way.
constexpr int k_attn_row_warps = 16;

struct softmax_state {
    float m;  // running max score (log2 units); -inf while empty
    float l;  // running sum of exp2(s - m)
};

CBL_HD inline softmax_state softmax_empty() { return {neg_inf(), 0.f}; }

// Folds score s in; *alpha rescales the old accumulator, *p weighs the new value. A masked
// score (-inf) into an empty state leaves it empty (alpha 1, p 0).
CBL_HD inline void softmax_step(softmax_state* st, float s, float* alpha, float* p) {
    const float m_new = max_f(st->m, s);
    if (m_new == neg_inf()) {
        *alpha = 1.f;
        *p = 0.f;
        return;
    }
    *alpha = exp2_f(st->m - m_new);
    *p = exp2_f(s - m_new);
    st->l = fma_rn(st->l, *alpha, *p);
    st->m = m_new;
}

CBL_HD inline float softmax_acc(float o, float alpha, float p, float v) {
    return fma_rn(p, v, mul_rn(o, alpha));
}

// Merges b into a; *wa and *wb rescale a's and b's accumulators (o = o_a * wa + o_b * wb).
CBL_HD inline void softmax_merge(softmax_state* a, softmax_state b, float* wa, float* wb) {
    const float m_new = max_f(a->m, b.m);
    if (m_new == neg_inf()) {
        *wa = 1.f;
        *wb = 0.f;
        return;
    }
    *wa = exp2_f(a->m - m_new);
    *wb = exp2_f(b.m - m_new);
    a->l = fma_rn(a->l, *wa, mul_rn(b.l, *wb));
    a->m = m_new;
}

CBL_HD inline float softmax_finish(float o, const softmax_state& st) {
    return st.l > 0.f ? o / st.l : 0.f;
}

}  // namespace hd
}  // namespace cacheblend
