// cuBLASLt GEMM for prefill-sized matmuls: y[m x n] = x[m x k] * w[n x k]^T, all row-major, with
// w and x both f16 (dequantized weights, converted activations; f32 accumulation and output) or
// both f32; w_kn takes w as [k x n] instead (y = x * w: attention's P * V), and batch > 1 runs
// that many GEMMs at fixed element strides apart (attention's heads). Plans (descriptors + the
// heuristic's algorithm) are cached per shape, type, batch and pointer alignment in the context
// (docs/ARCHITECTURE.md, 'Backends'), so a repeated shape costs one lookup.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

struct gemm_args {
    cudaDataType_t ab_type = CUDA_R_16F;  // type of w and x: CUDA_R_16F or CUDA_R_32F
    const void* w = nullptr;              // n rows, ldw elements apart
    int64_t ldw = 0;
    const void* x = nullptr;              // m rows, ldx elements apart
    int64_t ldx = 0;
    float* y = nullptr;                   // m rows, ldy floats apart
    int64_t ldy = 0;
    int64_t m = 0, n = 0, k = 0;
    bool w_kn = false;  // w is k rows of n (y = x * w) rather than n rows of k (y = x * w^T)
    int batch = 1;      // GEMMs; the i-th reads w + i * stride_w, x + i * stride_x, writes y + ...
    int64_t stride_w = 0, stride_x = 0, stride_y = 0;  // in elements of each matrix's type
};

void cbl_cuda_gemm(cuda_ctx& ctx, const gemm_args& a);

struct gemm_plan_key {
    int64_t m, n, k, ldw, ldx, ldy;
    int64_t stride_w, stride_x, stride_y;
    int batch;
    bool w_kn;
    int ab_type;
    int align_w, align_x, align_y;  // pointer alignment in bytes (cuBLASLt picks algorithms by it)
    bool operator==(const gemm_plan_key& o) const;
};

struct gemm_plan_key_hash {
    size_t operator()(const gemm_plan_key& k) const noexcept;
};

// Owns the cuBLASLt descriptors of one shape and the algorithm chosen for it.
struct gemm_plan {
    gemm_plan() = default;
    ~gemm_plan();
    gemm_plan(const gemm_plan&) = delete;
    gemm_plan& operator=(const gemm_plan&) = delete;

    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    cublasLtMatmulAlgo_t algo{};
};

class gemm_plan_cache {
public:
    const gemm_plan& get(cuda_ctx& ctx, const gemm_plan_key& key);

private:
    // Prefill row counts vary per request; past this many shapes the cache starts over.
    static constexpr size_t k_max_plans = 256;
    std::unordered_map<gemm_plan_key, std::unique_ptr<gemm_plan>, gemm_plan_key_hash> plans_;
};

}  // namespace cuda
}  // namespace cacheblend
