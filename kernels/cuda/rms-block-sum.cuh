// The sum of squares of an RMSNorm row in the one order every CUDA norm follows, so that a kernel
// that normalizes its own input (the decode GEMV, gemv.cu) gets the bits of the norm kernel's
// output (norm.cu) without a launch of its own.
#pragma once

#include <cstdint>

#include "kernels/cuda/math/rms-norm.h"

namespace cacheblend {
namespace cuda {

// The reference block: thread t sums the squares of x[t], x[t + 256], ... in double, each warp
// sums its lanes by a shuffle tree, and the 8 warp sums are added in order.
constexpr int k_rms_threads = 256;

// That sum computed by a block of Threads threads (whole warps, dividing k_rms_threads), each
// standing in for k_rms_threads / Threads of the reference's threads; every thread gets the same
// double. partial: k_rms_threads / 32 doubles of shared memory, free again when this returns.
template <int Threads>
__device__ inline double rms_block_sum(const float* x, int64_t n, double* partial) {
    static_assert(Threads % 32 == 0 && k_rms_threads % Threads == 0, "whole reference warps");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int p = 0; p < k_rms_threads / Threads; ++p) {
        const int t = threadIdx.x + p * Threads;  // the reference thread; its warp is t >> 5
        double s = 0.0;
        for (int64_t i = t; i < n; i += k_rms_threads) s += hd::rms_sq_term(x[i]);
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) partial[warp + p * (Threads / 32)] = s;
    }
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < k_rms_threads / 32; ++w) total += partial[w];  // same order everywhere
    __syncthreads();
    return total;
}

}  // namespace cuda
}  // namespace cacheblend
