// The query selection policies' signal on the device (kernels/cpu/blend-ops.h attention_mass):
// for each (query row, head) the softmax of its scaled scores over the keys it may see, summed
// over rows and heads per key. The score of one key is computed in the CPU's order (f16 key
// widened exactly, products added one by one, then scaled), so scores are bit-identical; the
// softmax's exp and the GPU's parallel sums differ from the CPU's by rounding only (the test on
// a GPU compares within a tolerance; the host test checks the serial reference below).
#pragma once

#include <cstdint>

#include "kernels/fp16.h"
#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// q . k * scale over head_dim elements, k an f16 row.
CBL_HD inline float attention_score(const float* q, const uint16_t* k, int64_t head_dim,
                                    float scale) {
    float dot = 0.f;
    for (int64_t d = 0; d < head_dim; ++d) dot = add_rn(dot, mul_rn(q[d], h2f(k[d])));
    return mul_rn(dot, scale);
}

// The serial form of one (row, head): p[0, limit) = softmax of the scores of keys [0, limit).
CBL_HD inline void attention_probs_row(const float* q, const uint16_t* k, int64_t kv_stride,
                                       int64_t head_dim, int64_t limit, float scale, float* p) {
    float mx = neg_inf();
    for (int64_t j = 0; j < limit; ++j) {
        p[j] = attention_score(q, k + j * kv_stride, head_dim, scale);
        mx = max_f(mx, p[j]);
    }
    float sum = 0.f;
    for (int64_t j = 0; j < limit; ++j) {
        p[j] = exp_f(add_rn(p[j], -mx));
        sum = add_rn(sum, p[j]);
    }
    for (int64_t j = 0; j < limit; ++j) p[j] = p[j] / sum;
}

}  // namespace hd
}  // namespace cacheblend
