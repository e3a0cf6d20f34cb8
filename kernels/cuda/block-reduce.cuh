// Block-wide max or sum of one float per thread, for kernels of one block per row.
#pragma once

#include <cfloat>

namespace cacheblend {
namespace cuda {

// Every thread of a block of Threads threads (a multiple of 32, at most 1024) gets the max (Max)
// or the sum of v over the block. shared holds Threads / 32 floats; it may be reused after the
// call returns (the last barrier is inside).
template <bool Max, int Threads>
__device__ inline float block_reduce(float v, float* shared) {
    static_assert(Threads % 32 == 0 && Threads <= 1024, "whole warps, one per lane at most");
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = Max ? fmaxf(v, o) : v + o;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < Threads / 32 ? shared[lane] : (Max ? -FLT_MAX : 0.f);
        for (int off = 16; off > 0; off >>= 1) {
            const float o = __shfl_xor_sync(0xffffffffu, v, off);
            v = Max ? fmaxf(v, o) : v + o;
        }
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    const float r = shared[0];
    __syncthreads();  // shared is reused by the next reduction
    return r;
}

}  // namespace cuda
}  // namespace cacheblend
