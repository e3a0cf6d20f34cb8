// Row-wise elementwise ops on device rows: SwiGLU, residual add, bias add, and the f32 -> f16
// conversion that stages activations for the f16 GEMM.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

// out[r][c] = silu(gate[r][c]) * up[r][c] (out may alias gate), m rows of n, stride ld.
void cbl_cuda_swiglu(cuda_ctx& ctx, const float* gate, const float* up, int64_t m, int64_t n,
                     int64_t ld, float* out);
// y[r][c] += x[r][c], m rows of n, stride ld.
void cbl_cuda_add_rows(cuda_ctx& ctx, float* y, const float* x, int64_t m, int64_t n, int64_t ld);
// y[r][c] += bias[c], m rows of n, stride ldy.
void cbl_cuda_add_bias(cuda_ctx& ctx, float* y, int64_t m, int64_t n, int64_t ldy,
                       const float* bias);
// out[r][c] = (half) x[r][c], round to nearest even; out is __half rows, ld_out apart.
void cbl_cuda_f32_to_f16_rows(cuda_ctx& ctx, const float* x, int64_t m, int64_t n, int64_t ldx,
                              void* out, int64_t ld_out);

}  // namespace cuda
}  // namespace cacheblend
