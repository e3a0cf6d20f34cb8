#include "kernels/cuda/copy-lane.cuh"

namespace cacheblend {
namespace cuda {

copy_lane::~copy_lane() {
    const device_guard on(ctx_.device(), false);
    if (stream_.get())
        cudaStreamSynchronize(stream_.get());  // no copy may outlive its buffers' owners
    for (const pending& p : pending_) cudaEventDestroy(p.done);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
    if (compute_mark_) cudaEventDestroy(compute_mark_);
    stream_ = cuda_stream();   // destroyed here, on its device, not after the guard gave it back
    (void)cudaGetLastError();  // errors here are unreportable; a later op must not inherit them
}

cudaEvent_t copy_lane::take_event() {
    if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
    }
    cudaEvent_t e = nullptr;
    CBL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}

copy_lane::pending* copy_lane::find(uint64_t ticket) {
    for (pending& p : pending_) {
        if (p.ticket == ticket) return &p;
    }
    throw kernel_error(kernel_status::internal,
                       kernel_fmt("cuda upload: unknown ticket %llu", (unsigned long long)ticket));
}

uint64_t copy_lane::start(void* dst, const void* src, size_t bytes) {
    if (!stream_.get()) stream_ = cuda_stream(0);
    if (!compute_mark_)
        CBL_CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
    cudaEvent_t done = take_event();
    // The ticket is spent before anything can fail: a failed start must not leave an entry whose
    // number the next start returns again (its event never recorded, so waits on it pass at once).
    const uint64_t ticket = next_++;
    pending_.push_back({ticket, done});  // owned by pending_ from here, even if a call below fails
    CBL_CUDA_CHECK(cudaEventRecord(compute_mark_, ctx_.stream()));
    CBL_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), compute_mark_, 0));
    if (bytes) {
        CBL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_.get()));
    }
    CBL_CUDA_CHECK(cudaEventRecord(done, stream_.get()));
    return ticket;
}

void copy_lane::wait(uint64_t ticket) {
    if (ticket == 0) return;
    CBL_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), find(ticket)->done, 0));
}

void copy_lane::finish(uint64_t ticket) {
    if (ticket == 0) return;
    pending* p = find(ticket);
    const cudaEvent_t done = p->done;
    pending_.erase(pending_.begin() + (p - pending_.data()));
    free_.push_back(done);
    CBL_CUDA_CHECK(cudaEventSynchronize(done));
}

}  // namespace cuda
}  // namespace cacheblend
