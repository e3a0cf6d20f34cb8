// The CUDA emulator's core (tests only): runs the CUDA backend's kernels and runtime calls on the
// host, so the backend's indexing, launch shapes, barriers, warp shuffles, stream ordering and
// cuBLASLt descriptions are tested on machines without a GPU (docs/ARCHITECTURE.md, 'Testing the
// CUDA backend without a GPU').
//
// What it models faithfully enough to catch real bugs:
// - a kernel's threads run as fibers, a block at a time; __syncthreads() waits for every live
//   thread of the block, __shfl_xor_sync() for every live lane its mask names, and the last to
//   arrive hands each lane its source's value (a barrier some threads never reach, or a shuffle
//   reading a lane that has exited, is a launch failure, not a hang);
// - work queued on a stream runs only when the host waits for it (a stream or event sync, a
//   synchronous copy, a copy into pageable memory, a free), in stream order, across streams only
//   through events: a host that reads a result, or refills a pinned buffer, before it waited sees
//   stale data, as on a GPU that has not finished (copies from pageable memory take their bytes
//   at the call, as CUDA's do);
// - copies check their direction against the allocations they touch; cuBLASLt checks its layouts
//   and the alignments its algorithm was chosen for.
// It does not model timing, memory coherence beyond that, device-side numerics (kernels use the
// host paths of kernels/hd.h), preemption (a thread spinning on another's flag hangs), lanes of
// one warp shuffling under different masks at once (refused), or fresh shared memory per block
// (a block sees the previous block's values, where a GPU's would be arbitrary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_emulator_types.h"

// Source-compatibility of the device-side keywords: plain host C++ here.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs at a time on a host thread, so a function-local static per host thread is the
// block's shared memory.
#define __shared__ static thread_local

namespace cbl_emu {

struct thread_coords {
    dim3 thread_idx, block_idx, block_dim, grid_dim;
};

// The coordinates of the fiber running now on this host thread.
const thread_coords& coords();

void sync_threads();
// __shfl_xor_sync's exchange: this thread's `in`, the `out` of lane (own lane ^ lane_mask).
void warp_exchange(unsigned mask, const void* in, void* out, size_t bytes, int lane_mask);

// Kernels run so far in this process (each launch and each kernel of a replayed graph, counted
// when it runs): what tests count to hold a step to its number of launches.
uint64_t kernels_run();

// Queues a kernel launch (the body runs once per thread when the stream reaches it) or records a
// launch error (bad configuration) as cudaPeekAtLastError reports it.
void launch(const char* name, dim3 grid, dim3 block, cudaStream_t stream,
            std::function<void()> body);

template <typename... P>
struct bound_launch {
    const char* name;
    void (*kernel)(P...);
    dim3 grid, block;
    cudaStream_t stream;

    template <typename... A>
    void operator()(A&&... a) const {
        // Parameters are copied at launch time, as the driver copies them into the launch.
        auto args = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(a)...);
        void (*k)(P...) = kernel;
        launch(name, grid, block, stream, [k, args] { std::apply(k, *args); });
    }
};

template <typename... P>
bound_launch<P...> make_launch(const char* name, dim3 grid, dim3 block, cudaStream_t stream,
                               void (*kernel)(P...)) {
    return {name, kernel, grid, block, stream};
}

}  // namespace cbl_emu

#define threadIdx (::cbl_emu::coords().thread_idx)
#define blockIdx (::cbl_emu::coords().block_idx)
#define blockDim (::cbl_emu::coords().block_dim)
#define gridDim (::cbl_emu::coords().grid_dim)

inline void __syncthreads() { ::cbl_emu::sync_threads(); }

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    T out{};
    ::cbl_emu::warp_exchange(mask, &v, &out, sizeof(T), lane_mask);
    return out;
}

// Device atomics, as real atomics with acquire-release order (under ThreadSanitizer the blocks of
// a grid run on several host threads): a block that publishes results and then counts itself in
// with atomicAdd is seen by the block that counts last. A GPU's atomicAdd is relaxed and needs
// __threadfence() before it; the emulator cannot tell a missing fence.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
inline void __threadfence() {}

// The kernel launch of kernels/cuda/common.cuh's CBL_CUDA_LAUNCH.
#define CBL_CUDA_EMULATED_LAUNCH(grid, block, stream, ...) \
    ::cbl_emu::make_launch(#__VA_ARGS__, (grid), (block), (stream), __VA_ARGS__)
