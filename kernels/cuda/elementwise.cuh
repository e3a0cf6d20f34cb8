// Row-wise elementwise ops on device rows: SwiGLU, residual add, bias add, and the f32 -> f16
// staging of activations for the f16 GEMM with its scale-back.
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
// Stages m rows of n activations as f16 for the GEMM (kernels/cuda/math/f16-staging.h):
// out[r][c] = (half)(x[r][c] * 2^exps[r]), round to nearest even, where exps[r] is 0 for a row
// within f16's range and scales a larger row into it. out is __half rows, ld_out apart; exps
// receives m exponents for cbl_cuda_f16_unstage_rows.
void cbl_cuda_f16_stage_rows(cuda_ctx& ctx, const float* x, int64_t m, int64_t n, int64_t ldx,
                             void* out, int64_t ld_out, int32_t* exps);
// y[r][c] = y[r][c] * 2^-exps[r] (+ bias[c] when bias is not null): the GEMM output of staged
// rows scaled back. Rows with exponent 0 and no bias are not touched.
void cbl_cuda_f16_unstage_rows(cuda_ctx& ctx, float* y, int64_t m, int64_t n, int64_t ldy,
                               const int32_t* exps, const float* bias);

}  // namespace cuda
}  // namespace cacheblend
