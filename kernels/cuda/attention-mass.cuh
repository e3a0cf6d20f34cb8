// attention_mass on the device (semantics of kernels/cpu/blend-ops.h; device pointers): one
// block per (query row, head) writes that row's softmax over its visible keys into scratch, then
// one thread per key sums the rows in row order.
#pragma once

#include "kernels/cuda/context.cuh"
#include "kernels/ops-types.h"

namespace cacheblend {
namespace cuda {

void cbl_cuda_attention_mass(cuda_ctx& ctx, const attention_args& a, float* scores);

}  // namespace cuda
}  // namespace cacheblend
