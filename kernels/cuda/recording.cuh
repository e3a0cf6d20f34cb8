// Ops recorded into a CUDA graph by stream capture and replayed with one launch (backend::record):
// a decode step is a few hundred small kernels whose launches cost the host more than the GPU
// spends running them; a graph is launched once per step.
#pragma once

#include <functional>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

// An instantiated graph, destroyed on its device.
class graph_exec {
public:
    graph_exec() = default;
    graph_exec(cudaGraphExec_t g, int device) : g_(g), device_(device) {}
    ~graph_exec() { reset(); }
    graph_exec(graph_exec&& o) noexcept : g_(o.g_), device_(o.device_) { o.g_ = nullptr; }
    graph_exec& operator=(graph_exec&& o) noexcept;
    graph_exec(const graph_exec&) = delete;
    graph_exec& operator=(const graph_exec&) = delete;
    cudaGraphExec_t get() const noexcept { return g_; }
    void reset() noexcept;

private:
    cudaGraphExec_t g_ = nullptr;
    int device_ = 0;
};

// Calls ops() with ctx's stream capturing (thread-local mode: this thread may not allocate, free
// or wait meanwhile) and ctx.recording() set, and instantiates what it queued. When ops() throws
// or the capture fails, the capture is ended and discarded (nothing it queued runs) and the
// exception, or kernel_error(device) for the capture, propagates.
graph_exec cbl_cuda_record(cuda_ctx& ctx, const std::function<void()>& ops);

// Queues g on ctx's stream, after the work queued before it.
void cbl_cuda_replay(cuda_ctx& ctx, const graph_exec& g);

}  // namespace cuda
}  // namespace cacheblend
