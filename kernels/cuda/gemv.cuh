// Decode-sized matmul (a few activation rows): y[i][r] = dot(dequant(W row r), x[i]) + bias[r],
// reading each weight block once and dequantizing it in registers. Memory-bound like the CPU's
// decode path; no f16 staging buffer, no cuBLASLt call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

constexpr int k_gemv_max_rows = 4;  // activation rows per call; more go through dequant + GEMM

struct gemv_args {
    const uint8_t* w = nullptr;  // n rows of k elements, row_bytes apart (device)
    size_t row_bytes = 0;
    int64_t n = 0;               // output features
    int64_t k = 0;               // input features
    const float* x = nullptr;    // m rows, ldx floats apart
    int64_t ldx = 0;
    int m = 0;                   // 1 .. k_gemv_max_rows
    float* y = nullptr;          // m rows, ldy floats apart
    int64_t ldy = 0;
    const float* bias = nullptr; // n floats or nullptr
};

template <typename T> void cbl_cuda_gemv(cuda_ctx& ctx, const gemv_args& a);

}  // namespace cuda
}  // namespace cacheblend
