// Row gather on the device: dst row i = src row idx[i] (backend::gather_rows), for the blend path's
// cached and fresh KV rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

void cbl_cuda_gather_rows(cuda_ctx& ctx, const void* src, size_t src_stride, const int32_t* idx,
                          int64_t n, size_t row_bytes, void* dst, size_t dst_stride);

}  // namespace cuda
}  // namespace cacheblend
