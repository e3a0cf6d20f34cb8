// Dequantization of GGUF weight rows on the device: the matmul's f16 staging for cuBLASLt and the
// token-embedding lookup (get_rows, f32 out). T is a traits type of kernels/cuda/math/dequant.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

struct dequant_args {
    const uint8_t* src = nullptr;  // weight rows (device), row_bytes apart
    size_t row_bytes = 0;
    int64_t n_src_rows = 0;        // rows in src: ids outside [0, n_src_rows) give zero rows
    int64_t cols = 0;              // multiple of T::block_elems
    const int32_t* ids = nullptr;  // device; output row i = src row ids[i]; nullptr: row0 + i
    int64_t row0 = 0;
    int64_t n_rows = 0;            // output rows
    void* dst = nullptr;           // float (f32 variant) or __half (f16 variant) rows
    int64_t ld_dst = 0;            // in elements
};

template <typename T> void cbl_cuda_dequant_rows_f32(cuda_ctx& ctx, const dequant_args& a);
template <typename T> void cbl_cuda_dequant_rows_f16(cuda_ctx& ctx, const dequant_args& a);

}  // namespace cuda
}  // namespace cacheblend
