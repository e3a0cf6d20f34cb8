#include "kernels/cuda/common.cuh"

namespace cacheblend {
namespace cuda {

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
    cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
    const bool oom = e == cudaErrorMemoryAllocation;
    const char* what = oom ? "out of device memory" : cudaGetErrorString(e);
    throw kernel_error(oom ? kernel_status::device_oom : kernel_status::device,
                       kernel_fmt("cuda: %s: %s (%s) at %s:%d", expr, what, cudaGetErrorName(e),
                                  file, line));
}

void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line) {
    // cuBLASLt allocating its own memory and finding none is the same condition as cudaMalloc's.
    const bool oom = s == CUBLAS_STATUS_ALLOC_FAILED;
    throw kernel_error(oom ? kernel_status::device_oom : kernel_status::device,
                       kernel_fmt("cublasLt: %s: %s (%d) at %s:%d", expr,
                                  cublasLtGetStatusString(s), static_cast<int>(s), file, line));
}

}  // namespace cuda
}  // namespace cacheblend
