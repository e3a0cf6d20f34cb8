// Host -> device copies beside compute (backend::upload_async): a second stream for the copy
// engine and events that order it against the compute stream both ways, so the blend path's next
// stored layer crosses PCIe while the current layer computes (docs/ARCHITECTURE.md, 'Backends').
// Sources must be pinned (cudaHostAlloc) for the copy to be asynchronous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/context.cuh"

namespace cacheblend {
namespace cuda {

class copy_lane {
public:
    explicit copy_lane(cuda_ctx& ctx) : ctx_(ctx) {}
    ~copy_lane();
    copy_lane(const copy_lane&) = delete;
    copy_lane& operator=(const copy_lane&) = delete;

    // Queues the copy after everything queued on the compute stream so far; returns its ticket
    // (never 0).
    uint64_t start(void* dst, const void* src, size_t bytes);
    // Work queued on the compute stream from now on waits for the copy.
    void wait(uint64_t ticket);
    // The host waits for the copy; the ticket is retired (its event reused).
    void finish(uint64_t ticket);

private:
    struct pending {
        uint64_t ticket;
        cudaEvent_t done;
    };
    cudaEvent_t take_event();
    pending* find(uint64_t ticket);

    cuda_ctx& ctx_;
    cuda_stream stream_;
    cudaEvent_t compute_mark_ = nullptr;  // recorded on the compute stream before each copy
    std::vector<pending> pending_;
    std::vector<cudaEvent_t> free_;
    uint64_t next_ = 1;
};

}  // namespace cuda
}  // namespace cacheblend
