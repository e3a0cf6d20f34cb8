// Shared plumbing of the CUDA backend: error checks that throw kernel_error(kernel_status::device)
// with file and line (the library never aborts: docs/ARCHITECTURE.md, 'Backends'), and RAII owners
// for device memory, streams and the cuBLASLt handle (no naked resource handling).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/hd.h"
#include "kernels/kernel-error.h"

namespace cacheblend {
namespace cuda {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file,
                                     int line);

inline void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
    if (e != cudaSuccess) throw_cuda_error(e, expr, file, line);
}
inline void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) throw_cublas_error(s, expr, file, line);
}

}  // namespace cuda
}  // namespace cacheblend

// Throws kernel_error(kernel_status::device, "cuda: <expr>: <error> at <file>:<line>"); out of
// device memory is kernel_status::device_oom (the engine maps it to CBL_DEVICE_OOM).
#define CBL_CUDA_CHECK(expr) ::cacheblend::cuda::check_cuda((expr), #expr, __FILE__, __LINE__)
#define CBL_CUBLAS_CHECK(expr) ::cacheblend::cuda::check_cublas((expr), #expr, __FILE__, __LINE__)
// Launches a kernel: CBL_CUDA_LAUNCH(grid, block, stream, kernel)(args...). Under nvcc it is
// kernel<<<grid, block, 0, stream>>>(args...); in the CUDA emulator's build (tests/cuda-emulator,
// CBL_CUDA_EMULATOR=ON) the emulator queues it. The kernel comes last: a template's arguments may
// hold commas.
#if defined(CBL_CUDA_EMULATED_LAUNCH)
#define CBL_CUDA_LAUNCH(grid, block, stream, ...) \
    CBL_CUDA_EMULATED_LAUNCH(grid, block, stream, __VA_ARGS__)
#else
#define CBL_CUDA_LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<(grid), (block), 0, (stream)>>>
#endif
// After a launch: configuration errors surface here, execution errors at the next sync.
#define CBL_CUDA_LAUNCH_CHECK() CBL_CUDA_CHECK(cudaPeekAtLastError())

namespace cacheblend {
namespace cuda {

// Blocks of `threads` covering n items (n > 0), as the grid's x dimension allows.
inline unsigned grid_1d(long long n, int threads) {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

// Stream-ordered device memory (cudaMallocAsync / cudaFreeAsync): freeing waits for the work
// queued before it on the same stream, never for the whole device.
class device_buffer {
public:
    device_buffer() = default;
    device_buffer(size_t bytes, cudaStream_t s) : stream_(s), bytes_(bytes) {
        if (bytes) CBL_CUDA_CHECK(cudaMallocAsync(&p_, bytes, s));
    }
    ~device_buffer() { reset(); }
    device_buffer(device_buffer&& o) noexcept : p_(o.p_), stream_(o.stream_), bytes_(o.bytes_) {
        o.p_ = nullptr;
        o.bytes_ = 0;
    }
    device_buffer& operator=(device_buffer&& o) noexcept {
        if (this != &o) {
            reset();
            p_ = o.p_;
            stream_ = o.stream_;
            bytes_ = o.bytes_;
            o.p_ = nullptr;
            o.bytes_ = 0;
        }
        return *this;
    }
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;

    void reset() noexcept {
        if (p_) {
            cudaFreeAsync(p_, stream_);  // destructor path: an error here cannot be thrown ...
            (void)cudaGetLastError();    // ... nor be left to surface as a later op's failure
        }
        p_ = nullptr;
        bytes_ = 0;
    }
    void* get() const noexcept { return p_; }
    size_t size() const noexcept { return bytes_; }

private:
    void* p_ = nullptr;
    cudaStream_t stream_ = nullptr;
    size_t bytes_ = 0;
};

// A non-blocking stream (does not serialise with the legacy default stream).
class cuda_stream {
public:
    cuda_stream() = default;
    explicit cuda_stream(int) {
        CBL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    }
    ~cuda_stream() {
        if (s_) {
            cudaStreamDestroy(s_);
            (void)cudaGetLastError();  // unreportable here; must not blame a later op
        }
    }
    cuda_stream(cuda_stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
    cuda_stream& operator=(cuda_stream&& o) noexcept {
        if (this != &o) {
            if (s_) {
                cudaStreamDestroy(s_);
                (void)cudaGetLastError();
            }
            s_ = o.s_;
            o.s_ = nullptr;
        }
        return *this;
    }
    cuda_stream(const cuda_stream&) = delete;
    cuda_stream& operator=(const cuda_stream&) = delete;
    cudaStream_t get() const noexcept { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

class cublaslt_handle {
public:
    cublaslt_handle() = default;
    explicit cublaslt_handle(int) { CBL_CUBLAS_CHECK(cublasLtCreate(&h_)); }
    ~cublaslt_handle() {
        if (h_) cublasLtDestroy(h_);
    }
    cublaslt_handle(cublaslt_handle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
    cublaslt_handle& operator=(cublaslt_handle&& o) noexcept {
        if (this != &o) {
            if (h_) cublasLtDestroy(h_);
            h_ = o.h_;
            o.h_ = nullptr;
        }
        return *this;
    }
    cublaslt_handle(const cublaslt_handle&) = delete;
    cublaslt_handle& operator=(const cublaslt_handle&) = delete;
    cublasLtHandle_t get() const noexcept { return h_; }

private:
    cublasLtHandle_t h_ = nullptr;
};

}  // namespace cuda
}  // namespace cacheblend
