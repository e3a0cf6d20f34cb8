// KV deviation of one row for the CUDA kernel (CacheBlend's HKVD score, docs/ARCHITECTURE.md,
// 'Blended prefill'): d = sum_j (fresh_j - cached_j)^2 with fresh f32 and cached f16, summed in
// float. The serial row is bit-identical to the CPU's kv_deviation (same order); the kernel sums a
// row in parallel, which only reorders the float additions.
#pragma once

#include <cstdint>

#include "kernels/fp16.h"
#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

CBL_HD inline float kv_dev_term(float fresh, uint16_t cached) {
    const float e = fresh - h2f(cached);
    return mul_rn(e, e);
}

CBL_HD inline float kv_deviation_row(const float* fresh, const uint16_t* cached, int64_t width) {
    float s = 0.f;
    for (int64_t j = 0; j < width; ++j) s = add_rn(s, kv_dev_term(fresh[j], cached[j]));
    return s;
}

}  // namespace hd
}  // namespace cacheblend
