// The online-softmax (flash attention) accumulation for the CUDA attention kernel. Scores are in
// log2 units (q is pre-scaled by scale * log2(e), as on the CPU), so weights are exp2(s - max).
// Folding key j into a running state:
//     m' = max(m, s_j), alpha = exp2(m - m'), p = exp2(s_j - m'), l' = l * alpha + p,
//     o' = o * alpha + p * v_j   (per output element)
// and out = o / l at the end (0 when no key was visible). Partial states over disjoint key ranges
// merge with softmax_merge, so a block's warps can split its keys.
#pragma once

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// Warps of one (query row, head, split) block of the row kernel (kernels/cuda/attention.cu), each
// folding every k_attn_row_warps-th key of the block's range: 16 keep a block from leaving most
// of an SM's schedulers idle. The host mirror in test_cuda_device_math splits one range's keys
// over its warps the same way (not the split over blocks, which BackendOps tests on the device).
constexpr int k_attn_row_warps = 16;

// A (query row, head) whose keys are many may be split over several blocks (flash-decoding: a
// decode step has one row, and its few heads alone would leave most of a GPU idle). The split is
// a function of the row's visible keys and the launch's split count only, never of n_keys, so a
// step recorded over the cache's whole size and one run over exactly its keys give the same bits.
// `limit` keys go in ranges of `chunk` >= k_attn_min_split_keys keys (a few per warp; the last
// range may be shorter), n_split ranges at most, of which attn_active_splits are not empty (1
// when no key is visible: that block writes the zero row). The blocks' parts are merged by
// rescaling each to the largest max (attention.cu), not by softmax_merge.
constexpr int k_attn_min_split_keys = 64;

CBL_HD inline int64_t attn_split_chunk(int64_t limit, int n_split) {
    const int64_t even = (limit + n_split - 1) / n_split;
    return even > k_attn_min_split_keys ? even : k_attn_min_split_keys;
}

CBL_HD inline int attn_active_splits(int64_t limit, int64_t chunk) {
    return limit <= 0 ? 1 : static_cast<int>((limit + chunk - 1) / chunk);
}

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
