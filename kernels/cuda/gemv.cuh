// Decode-sized matmul (a few activation rows): y[i][r] = dot(dequant(W row r), x[i]) + bias[r],
// reading each weight block once and dequantizing it in registers. Memory-bound like the CPU's
// decode path; no f16 staging buffer, no cuBLASLt call. One launch serves up to three weights of
// one input (a layer's q/k/v, of one weight type or of several), it may RMS-normalize that input
// first, and its epilogue may add into y (the residual) or pair gate and up rows into SwiGLU: the
// arithmetic of the separate ops, in one launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.cuh"
#include "kernels/dtype.h"

namespace cacheblend {
namespace cuda {

constexpr int k_gemv_max_rows = 4;  // activation rows per call; more go through dequant + GEMM
constexpr int k_gemv_max_outs = 3;  // weights per launch

// One weight's product: its rows and where they go.
struct gemv_out {
    const uint8_t* w = nullptr;  // n rows of the call's k elements, row_bytes apart (device)
    size_t row_bytes = 0;
    int64_t n = 0;       // output features
    float* y = nullptr;  // m rows, ldy floats apart
    int64_t ldy = 0;
    const float* bias = nullptr;  // n floats or nullptr
    dtype type = dtype::f32;      // w's type: read by a gemv_mixed_types launch only
};

enum class gemv_epilogue {
    store,       // y = s (+ bias), for every out
    accumulate,  // y = y + (s (+ bias)): hd::add, as add_rows after matmul does
    swiglu,      // two outs, gate and up, of the same n: out[0].y = hd::swiglu(gate, up)
};

struct gemv_args {
    gemv_out out[k_gemv_max_outs];
    int n_out = 1;
    int64_t k = 0;             // input features
    const float* x = nullptr;  // m rows, ldx floats apart
    int64_t ldx = 0;
    int m = 0;  // 1 .. k_gemv_max_rows
    gemv_epilogue epilogue = gemv_epilogue::store;
    // When set, x's rows are RMS-normalized with these k weights first, in the bits of the norm
    // kernel (norm.cuh): every block reduces the rows itself, so no launch writes them out.
    const float* norm_gamma = nullptr;
    float norm_eps = 0.f;
};

// T: the weight traits (kernels/cuda/weight-types.cuh) of every out, or gemv_mixed_types, where
// each out's warps read their gemv_out::type and branch on it (one type per warp: no divergence).
// A launch of one type takes that type's kernel, which holds only its own dequantization.
struct gemv_mixed_types {};
template <typename T> void cbl_cuda_gemv(cuda_ctx& ctx, const gemv_args& a);

}  // namespace cuda
}  // namespace cacheblend
