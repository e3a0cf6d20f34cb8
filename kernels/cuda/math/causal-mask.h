// The causal mask of every CUDA attention kernel (the row kernel, the GEMM path, attention_mass):
// a query at absolute position pos sees the keys at positions [0, limit), as on the CPU.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// limit = clamp(pos + 1, 0, n_keys).
CBL_HD inline int64_t attn_visible_keys(int64_t pos, int64_t n_keys) {
    const int64_t v = pos + 1;
    return v < 0 ? 0 : (v < n_keys ? v : n_keys);
}

}  // namespace hd
}  // namespace cacheblend
