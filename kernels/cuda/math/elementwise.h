// Elementwise math of the forward pass for the CUDA kernels, in the CPU's generic float order
// (kernels/cpu/ops.cpp): SwiGLU silu(g) * u = g / (1 + exp(-g)) * u, and the residual add.
// The CPU's AVX-512 path uses ggml's vector expf, so against it SwiGLU matches within a few ulp.
#pragma once

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

CBL_HD inline float swiglu(float gate, float up) {
    return mul_rn(gate / add_rn(1.f, exp_f(-gate)), up);
}

CBL_HD inline float add(float y, float x) { return add_rn(y, x); }

}  // namespace hd
}  // namespace cacheblend
