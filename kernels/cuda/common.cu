#include "kernels/cuda/common.cuh"

namespace cacheblend {
namespace cuda {

// CBL_DEVICE_OOM (cacheblend.h): core/util/error.h has no name for this extended code yet, and the
// C guard passes status values through unchanged.
constexpr status k_device_oom = static_cast<status>(static_cast<int32_t>(status::device) | 1 << 8);

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
    cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
    const bool oom = e == cudaErrorMemoryAllocation;
    const char* what = oom ? "out of device memory" : cudaGetErrorString(e);
    throw error(oom ? k_device_oom : status::device, fmt("cuda: %s: %s (%s) at %s:%d", expr, what, cudaGetErrorName(e),
                                    file, line));
}

void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line) {
    throw error(status::device, fmt("cublasLt: %s: %s (%d) at %s:%d", expr,
                                    cublasLtGetStatusString(s), static_cast<int>(s), file, line));
}

}  // namespace cuda
}  // namespace cacheblend
