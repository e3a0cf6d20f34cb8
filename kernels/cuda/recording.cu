#include "kernels/cuda/recording.cuh"

namespace cacheblend {
namespace cuda {
namespace {

// A captured graph: instantiated, then destroyed (the executable form keeps what it needs).
class graph_owner {
public:
    explicit graph_owner(cudaGraph_t g) : g_(g) {}
    ~graph_owner() {
        if (g_) {
            cudaGraphDestroy(g_);
            (void)cudaGetLastError();
        }
    }
    graph_owner(const graph_owner&) = delete;
    graph_owner& operator=(const graph_owner&) = delete;
    cudaGraph_t get() const noexcept { return g_; }

private:
    cudaGraph_t g_;
};

}  // namespace

graph_exec& graph_exec::operator=(graph_exec&& o) noexcept {
    if (this != &o) {
        reset();
        g_ = o.g_;
        device_ = o.device_;
        o.g_ = nullptr;
    }
    return *this;
}

void graph_exec::reset() noexcept {
    if (!g_) return;
    const device_guard on(device_, false);
    cudaGraphExecDestroy(g_);  // a launch already queued still runs
    (void)cudaGetLastError();  // unreportable here; must not blame a later op
    g_ = nullptr;
}

graph_exec cbl_cuda_record(cuda_ctx& ctx, const std::function<void()>& ops) {
    const cudaStream_t s = ctx.stream();
    CBL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    ctx.set_recording(true);
    try {
        ops();
    } catch (...) {
        ctx.set_recording(false);
        cudaGraph_t g = nullptr;
        cudaStreamEndCapture(s, &g);  // ends the capture; what it holds is dropped
        const graph_owner drop(g);
        (void)cudaGetLastError();  // a refused call's error belongs to the exception in flight
        throw;
    }
    ctx.set_recording(false);
    cudaGraph_t g = nullptr;
    CBL_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    const graph_owner captured(g);
    cudaGraphExec_t exec = nullptr;
    // The flags form: the same call in CUDA 11.4 and later (cudaGraphInstantiate's arguments
    // changed in CUDA 12).
    CBL_CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec, captured.get(), 0));
    return graph_exec(exec, ctx.device());
}

void cbl_cuda_replay(cuda_ctx& ctx, const graph_exec& g) {
    CBL_CUDA_CHECK(cudaGraphLaunch(g.get(), ctx.stream()));
}

}  // namespace cuda
}  // namespace cacheblend
