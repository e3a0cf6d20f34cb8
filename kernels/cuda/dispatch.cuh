// The CUDA backend's one switch (docs/ARCHITECTURE.md, 'Backends'): weight dtype -> kernel
// instantiation, and the matmul path by batch size (quantized GEMV for decode, dequantize +
// cuBLASLt GEMM for prefill). Row-wise ops have a single kernel each and are called directly by
// backend-cuda.cu.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.cuh"
#include "kernels/ops-types.h"

namespace cacheblend {
namespace cuda {

// Whether matmul / get_rows run on weights of this type.
bool cbl_cuda_supports_weight(dtype t);

// y[m x w.rows] = x[m x w.cols] * w^T (+ bias): semantics of kernels/cpu/ops.h matmul, device
// pointers throughout (w.data, x, y, bias).
void cbl_cuda_matmul(cuda_ctx& ctx, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                     float* y, int64_t ldy, const float* bias);

// The fused forms of backend::matmuls / matmul_add / matmul_swiglu (kernels/backend.h): decode
// sizes in one GEMV launch per weight type with the norm in its prologue and the add or SwiGLU in
// its epilogue; prefill sizes stage x as f16 once for every weight of matmuls and take the
// unfused ops otherwise (the norm into pre_norm::h first).
void cbl_cuda_matmuls(cuda_ctx& ctx, const float* x, int64_t m, int64_t ldx, const matmul_out* outs,
                      int n, const pre_norm* norm);
void cbl_cuda_matmul_add(cuda_ctx& ctx, const weight_view& w, const float* x, int64_t m,
                         int64_t ldx, float* y, int64_t ldy, float* tmp);
void cbl_cuda_matmul_swiglu(cuda_ctx& ctx, const weight_view& gate, const weight_view& up,
                            const float* x, int64_t m, int64_t ldx, float* out, int64_t ld,
                            float* tmp, const pre_norm* norm);

// Row i of y = dequantized row ids[i] of w (zeros for an id outside w), ids in device memory.
void cbl_cuda_get_rows(cuda_ctx& ctx, const weight_view& w, const int32_t* ids, int64_t m,
                       float* y, int64_t ldy);

}  // namespace cuda
}  // namespace cacheblend
