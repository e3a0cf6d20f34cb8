#include "kernels/cuda/context.cuh"

#include "kernels/cuda/gemm.cuh"

namespace cacheblend {
namespace cuda {

device_guard::device_guard(int device, bool checked) : device_(device) {
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        (void)cudaGetLastError();
        prev = -1;
    }
    // Set even when it is current already: that makes the device's context, so a device that
    // cannot be used fails here.
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        if (checked) throw_cuda_error(e, "cudaSetDevice(device)", __FILE__, __LINE__);
        (void)cudaGetLastError();
        return;
    }
    if (prev != device) prev_ = prev;
}

device_guard::~device_guard() {
    if (prev_ < 0) return;
    cudaSetDevice(prev_);
    (void)cudaGetLastError();
}

cuda_ctx::cuda_ctx(int device) : device_(device) {}

// Members are destroyed in reverse order; the stream must outlive the stream-ordered frees of the
// buffers, so wait for it first and let the buffers go before the stream.
cuda_ctx::~cuda_ctx() {
    const device_guard on(device_, false);
    if (stream_.get()) cudaStreamSynchronize(stream_.get());
    plans_.reset();
    for (device_buffer& b : scratch_) b.reset();
    workspace_.reset();
    fixed_.reset();
    if (stream_.get()) cudaStreamSynchronize(stream_.get());
    // The handle and the stream go here, on their device, not after the guard gave it back.
    lt_ = cublaslt_handle();
    stream_ = cuda_stream();
    (void)cudaGetLastError();  // errors here are unreportable; a later op must not inherit them
}

cudaStream_t cuda_ctx::stream() {
    if (!stream_.get()) stream_ = cuda_stream(0);
    return stream_.get();
}

cublasLtHandle_t cuda_ctx::cublaslt() {
    if (!lt_.get()) lt_ = cublaslt_handle(0);
    return lt_.get();
}

namespace {

void refuse_while_recording(bool recording, const char* what) {
    if (recording) {
        throw kernel_error(kernel_status::unsupported,
                           kernel_fmt("cuda: %s cannot be used while ops are recorded", what));
    }
}

}  // namespace

void* cuda_ctx::workspace() {
    if (!workspace_.get()) {
        refuse_while_recording(recording_, "a new cuBLASLt workspace");
        workspace_ = device_buffer(k_workspace_bytes, stream());
    }
    return workspace_.get();
}

void* cuda_ctx::fixed_zeroed(size_t bytes) {
    if (!fixed_.get()) {
        refuse_while_recording(recording_, "a new fixed buffer");
        fixed_ = device_buffer(bytes, stream());
        CBL_CUDA_CHECK(cudaMemsetAsync(fixed_.get(), 0, bytes, stream()));
    } else if (fixed_.size() < bytes) {
        throw kernel_error(kernel_status::internal,
                           kernel_fmt("cuda: fixed buffer of %zu bytes asked for %zu",
                                      fixed_.size(), bytes));
    }
    return fixed_.get();
}

int cuda_ctx::sm_count() {
    if (sm_count_ <= 0) {
        int n = 0;
        CBL_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device_));
        sm_count_ = n > 0 ? n : 1;
    }
    return sm_count_;
}

gemm_plan_cache& cuda_ctx::plans() {
    if (!plans_) plans_ = std::make_unique<gemm_plan_cache>();
    return *plans_;
}

void* cuda_ctx::scratch(int slot, size_t bytes) {
    if (slot < 0 || slot >= k_scratch_slots) {
        throw kernel_error(kernel_status::internal,
                           kernel_fmt("cuda: scratch slot %d out of range", slot));
    }
    // A recording would keep the pointer after a later op grew the slot and freed it: ops that
    // use scratch are not recorded.
    refuse_while_recording(recording_, "a scratch buffer");
    device_buffer& b = scratch_[slot];
    if (b.size() < bytes) {
        // Grow by at least half again so a slowly growing batch does not reallocate every call.
        const size_t want = bytes > b.size() + b.size() / 2 ? bytes : b.size() + b.size() / 2;
        b = device_buffer(want, stream());  // the old block is freed in stream order
    }
    return b.get();
}

void cuda_ctx::synchronize() {
    if (stream_.get()) CBL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

}  // namespace cuda
}  // namespace cacheblend
