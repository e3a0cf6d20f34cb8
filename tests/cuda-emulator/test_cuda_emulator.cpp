// The CUDA emulator's own tests: that it runs kernels as CUDA does (barriers, shuffles, grids),
// that it fails the device where a GPU would fault or hang, that stream work waits for the host
// to wait for it, and that its cuBLASLt computes cuBLASLt's documented product. Without these,
// the GPU tests it runs could pass against an emulator that hides the bugs they look for.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#define LAUNCH(grid, block, stream, ...) CBL_CUDA_EMULATED_LAUNCH(grid, block, stream, __VA_ARGS__)

namespace {

// The device failure is sticky, so each test that provokes one runs in a child process.
#define EXPECT_DEVICE_FAILS(statement, message)                                             \
    EXPECT_EXIT(                                                                            \
        {                                                                                   \
            statement;                                                                      \
            const cudaError_t e_ = cudaDeviceSynchronize();                                 \
            std::fprintf(stderr, "%s: %s\n", cudaGetErrorName(e_), cudaGetErrorString(e_)); \
            std::exit(e_ == cudaSuccess ? 0 : 3);                                           \
        },                                                                                  \
        exited_with_failure, message)

// 3 from the statement above; AddressSanitizer's report (a poisoned guard) exits with its own.
bool exited_with_failure(int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; }

template <typename T>
struct device_array {
    T* p = nullptr;
    size_t n;
    explicit device_array(size_t count) : n(count) {
        EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)), cudaSuccess);
    }
    ~device_array() { cudaFree(p); }
    std::vector<T> get() const {
        std::vector<T> h(n);
        EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }
    void put(const std::vector<T>& h) {
        EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
};

// Block-wide sum through shared memory and __syncthreads, then a shuffle: every thread must see
// every other's write, which only holds if the barrier really waits.
__global__ void block_sum_kernel(const int* in, int* out) {
    __shared__ int partial[256];
    const int t = int(threadIdx.x);
    partial[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int half = int(blockDim.x) / 2; half > 0; half /= 2) {
        if (t < half) partial[t] += partial[t + half];
        __syncthreads();
    }
    int v = partial[0] + t % 32;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    out[blockIdx.x * blockDim.x + t] = v;  // 32 * block sum + 0 + 1 + ... + 31
}

TEST(CudaEmulator, BarriersAndShufflesSynchronizeEveryThread) {
    const int blocks = 3, threads = 256;
    std::vector<int> in(blocks * threads);
    std::iota(in.begin(), in.end(), 1);
    device_array<int> d_in(in.size()), d_out(in.size());
    d_in.put(in);
    LAUNCH(blocks, threads, nullptr, block_sum_kernel)(d_in.p, d_out.p);
    ASSERT_EQ(cudaPeekAtLastError(), cudaSuccess);
    const std::vector<int> out = d_out.get();
    for (int b = 0; b < blocks; ++b) {
        const int sum =
            std::accumulate(in.begin() + b * threads, in.begin() + (b + 1) * threads, 0);
        for (int t = 0; t < threads; ++t) ASSERT_EQ(out[b * threads + t], 32 * sum + 496) << b << t;
    }
}

// Lanes past n exit first; the rest shuffle under the full mask, then lanes 0-15 of each warp
// under 0x0000ffff: exited lanes a mask names do not take part, and a round under one mask may
// follow another under a different one.
__global__ void masked_shuffles_kernel(int* out, int n) {
    const int t = int(threadIdx.x);
    if (t >= n) return;
    int v = t;
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    if ((t & 31) < 16) {
        v += __shfl_xor_sync(0x0000ffffu, v, 2);
        v += __shfl_xor_sync(0x0000ffffu, v, 4);
    }
    out[t] = v;
}

TEST(CudaEmulator, ShufflesTakeTheLiveLanesTheirMasksName) {
    const int threads = 48, n = 40;  // the second warp: 16 lanes, 8 of them live
    device_array<int> out(threads);
    LAUNCH(1, threads, nullptr, masked_shuffles_kernel)(out.p, n);
    const std::vector<int> got = out.get();
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), 0);
    auto round = [&](int x, bool low_half_only) {
        std::vector<int> next = v;
        for (int t = 0; t < n; ++t) {
            if (!low_half_only || (t & 31) < 16) next[size_t(t)] = v[size_t(t)] + v[size_t(t ^ x)];
        }
        v = next;
    };
    round(1, false);
    round(2, true);
    round(4, true);
    for (int t = 0; t < n; ++t) EXPECT_EQ(got[size_t(t)], v[size_t(t)]) << t;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

__global__ void coords_kernel(int* out) {
    const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[block * blockDim.x * blockDim.y * blockDim.z + thread] = int(block * 1000 + thread);
}

TEST(CudaEmulator, EveryThreadOfEveryBlockRunsOnceWithItsCoordinates) {
    const dim3 grid(3, 2, 2), block(8, 4, 2);
    const size_t n = 12 * 64;
    device_array<int> out(n);
    LAUNCH(grid, block, nullptr, coords_kernel)(out.p);
    const std::vector<int> h = out.get();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], int(i / 64 * 1000 + i % 64)) << i;
}

TEST(CudaEmulator, BadLaunchConfigurationsAreLaunchErrors) {
    device_array<int> out(1);
    LAUNCH(1, 2048, nullptr, coords_kernel)(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    LAUNCH(0, 32, nullptr, coords_kernel)(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky
}

// Half the warp waits at the block's barrier, the other half for them in a shuffle: a GPU hangs.
__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
    }
}

__global__ void shuffle_with_exited_lane_kernel(int* out) {
    if (threadIdx.x == 5) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void write_past_end_kernel(int* out, int n) { out[n + threadIdx.x] = 7; }

TEST(CudaEmulatorDeathTest, AKernelThatWouldHangOrFaultFailsTheDevice) {
    EXPECT_DEVICE_FAILS(
        {
            device_array<int> out(32);
            LAUNCH(1, 32, nullptr, divergent_barrier_kernel)(out.p);
        },
        "divergent_barrier_kernel.*wait at a barrier");
    EXPECT_DEVICE_FAILS(
        {
            device_array<int> out(32);
            LAUNCH(1, 32, nullptr, shuffle_with_exited_lane_kernel)(out.p);
        },
        "shuffle_with_exited_lane_kernel");
    EXPECT_DEVICE_FAILS(
        {
            device_array<int> out(64);
            LAUNCH(1, 4, nullptr, write_past_end_kernel)(out.p, 64);
        },
        "write_past_end_kernel wrote outside a device allocation of 256 bytes|use-after-poison");
}

#if defined(__SANITIZE_ADDRESS__)
__global__ void read_past_end_kernel(const int* in, int n, int* out) { out[0] = in[n]; }
#endif

// Reads outside an allocation are AddressSanitizer's to find (the guards are poisoned there).
TEST(CudaEmulatorDeathTest, AKernelReadingPastAnAllocationIsReportedUnderAddressSanitizer) {
#if !defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "reads are checked in the AddressSanitizer build (build-emu-asan/)";
#else
    EXPECT_DEVICE_FAILS(
        {
            device_array<int> in(16);
            device_array<int> out(1);
            LAUNCH(1, 1, nullptr, read_past_end_kernel)(in.p, 16, out.p);
        },
        "use-after-poison");
#endif
}

#if defined(__SANITIZE_THREAD__)
// Each thread reads its neighbour's shared value with no __syncthreads between the write and the
// read: a race on a GPU, whatever order the emulator ran the threads in.
__global__ void missing_barrier_kernel(int* out) {
    __shared__ int v[64];
    const int t = int(threadIdx.x);
    v[t] = t;
    out[t] = v[(t + 1) % int(blockDim.x)];
}

// After a first barrier, each thread overwrites its value while its neighbour may still be
// reading it: the barrier before the write is missing (the race is between two barriers).
__global__ void race_between_barriers_kernel(int* out) {
    __shared__ int v[64];
    const int t = int(threadIdx.x);
    v[t] = t;
    __syncthreads();
    const int a = v[(t + 1) % int(blockDim.x)];
    v[t] = a;
    __syncthreads();
    out[t] = v[t];
}

// A shuffle exchanges values, not memory: the neighbour's shared write is not ordered by it.
__global__ void shuffle_orders_no_memory_kernel(int* out) {
    __shared__ int v[32];
    const int t = int(threadIdx.x);
    v[t] = t;
    const int x = __shfl_xor_sync(0xffffffffu, t, 1);
    out[t] = v[t ^ 1] + x;
}

// Every block writes the same element: blocks of a grid are unordered on a GPU.
__global__ void blocks_collide_kernel(int* out) { out[0] = int(blockIdx.x); }
#endif

// Two threads of a block on the same memory, one writing, with no barrier between them, are
// ThreadSanitizer's to find (fibers.cpp: switching threads orders nothing, barriers do), before
// a first barrier, between two, and across a shuffle; the report (naming the kernel) makes the
// process exit with TSan's failure code.
#define EXPECT_RACE_IN(kernel, blocks, threads)                        \
    EXPECT_EXIT(                                                       \
        {                                                              \
            device_array<int> out(64);                                 \
            LAUNCH(blocks, threads, nullptr, kernel)(out.p);           \
            std::exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3); \
        },                                                             \
        exited_with_failure,                                           \
        "ThreadSanitizer: data race(.|\n)*" #kernel "(.|\n)*Previous (write|read)(.|\n)*" #kernel)

TEST(CudaEmulatorDeathTest, AMissingBarrierIsADataRaceUnderThreadSanitizer) {
#if !defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "races are checked in the ThreadSanitizer build (build-emu-tsan/)";
#else
    EXPECT_RACE_IN(missing_barrier_kernel, 1, 64);
    EXPECT_RACE_IN(race_between_barriers_kernel, 1, 64);
    EXPECT_RACE_IN(shuffle_orders_no_memory_kernel, 1, 32);
#endif
}

// So are two blocks of a grid on the same memory (block_workers in fibers.cpp: neighbouring
// blocks run on different host threads there).
TEST(CudaEmulatorDeathTest, BlocksWritingOneElementAreADataRaceUnderThreadSanitizer) {
#if !defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "races are checked in the ThreadSanitizer build (build-emu-tsan/)";
#else
    EXPECT_RACE_IN(blocks_collide_kernel, 2, 1);
#endif
}

__global__ void add_one_kernel(int* p, int n) {
    const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) p[i] += 1;
}

// A GPU runs queued work later; the emulator runs it only when the host waits, so a missing wait
// shows up as stale data instead of passing by luck.
TEST(CudaEmulator, StreamWorkRunsWhenTheHostWaitsForIt) {
    cudaStream_t s = nullptr, t = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), cudaSuccess);
    int* pinned = nullptr;
    ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 128 * sizeof(int), 0), cudaSuccess);
    device_array<int> d(64);
    for (int i = 0; i < 64; ++i) pinned[i] = i;
    ASSERT_EQ(cudaMemcpyAsync(d.p, pinned, 64 * sizeof(int), cudaMemcpyHostToDevice, s),
              cudaSuccess);
    for (int i = 0; i < 64; ++i) pinned[i] = -1;  // refilled before the copy ran: the copy sees it
    LAUNCH(1, 64, s, add_one_kernel)(d.p, 64);
    int* back = pinned + 64;  // pinned: the copy into it runs when s does
    std::memset(back, 0x55, 64 * sizeof(int));
    ASSERT_EQ(cudaMemcpyAsync(back, d.p, 64 * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(back[3], 0x55555555);  // not yet: nothing waited
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);

    // Another stream orders after s only through an event.
    cudaEvent_t done = nullptr;
    ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(done, s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(t, done, 0), cudaSuccess);
    LAUNCH(1, 64, t, add_one_kernel)(d.p, 64);
    ASSERT_EQ(cudaStreamSynchronize(t), cudaSuccess);
    EXPECT_EQ(back[3], 0);  // s ran up to the event: the copy of -1s, +1, and the copy back
    EXPECT_EQ(d.get()[3], 1);

    EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(t), cudaSuccess);
}

// Pageable host memory: CUDA takes an upload's bytes at the call and finishes a download before
// the call returns, so the host may reuse or read that memory at once.
TEST(CudaEmulator, CopiesWithPageableMemoryCompleteTheirHostSideAtTheCall) {
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    device_array<int> d(8);
    std::vector<int> host(8, 4);
    ASSERT_EQ(cudaMemcpyAsync(d.p, host.data(), 8 * sizeof(int), cudaMemcpyHostToDevice, s),
              cudaSuccess);
    std::fill(host.begin(), host.end(), 9);  // reused at once: the copy took 4s
    LAUNCH(1, 8, s, add_one_kernel)(d.p, 8);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), d.p, 8 * sizeof(int), cudaMemcpyDeviceToHost, s),
              cudaSuccess);
    EXPECT_EQ(host[7], 5);  // done on return, after the stream's kernel
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(CudaEmulator, CopiesMustTouchTheMemoryTheirDirectionNames) {
    device_array<int> d(16);
    int host[16] = {};
    EXPECT_EQ(cudaMemcpy(host, d.p, sizeof host, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpy(d.p, host, 17 * sizeof(int), cudaMemcpyHostToDevice),
              cudaErrorInvalidValue);  // past the allocation
    EXPECT_EQ(cudaMemcpy(d.p, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    (void)cudaGetLastError();
    int* fresh = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&fresh), 4 * sizeof(float)), cudaSuccess);
    float f[4];
    ASSERT_EQ(cudaMemcpy(f, fresh, sizeof f, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(std::isnan(f[0]));  // device memory starts as NaN, never as zeros by luck
    EXPECT_EQ(cudaFree(fresh), cudaSuccess);
}

__global__ void scale_add_kernel(const int* x, int* y, int k, int n) {
    const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = k * x[i] + 1;
}

// Stream capture: the ops queued while a stream captures do not run; a launch of the graph runs
// them again, in order, with the arguments they were queued with and the memory as it is then.
TEST(CudaEmulator, ACapturedGraphRunsItsOpsAtEveryLaunchNotAtCapture) {
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    device_array<int> x(32), y(32);
    std::vector<int> in(32);
    std::iota(in.begin(), in.end(), 0);
    x.put(in);
    y.put(std::vector<int>(32, -5));
    int* pinned = nullptr;
    ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 32 * sizeof(int), 0), cudaSuccess);

    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    ASSERT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
    EXPECT_EQ(st, cudaStreamCaptureStatusActive);
    int k = 3;
    LAUNCH(1, 32, s, scale_add_kernel)(x.p, y.p, k, 32);
    k = 100;  // the launch took its arguments when queued
    LAUNCH(1, 32, s, add_one_kernel)(y.p, 32);
    ASSERT_EQ(cudaMemcpyAsync(pinned, y.p, 32 * sizeof(int), cudaMemcpyDeviceToHost, s),
              cudaSuccess);
    cudaGraph_t g = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    ASSERT_NE(g, nullptr);
    ASSERT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
    EXPECT_EQ(st, cudaStreamCaptureStatusNone);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(y.get()[4], -5);  // captured, not run

    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, g, 0), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);  // the executable graph keeps what it needs
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(pinned[4], 3 * 4 + 2);
    in[4] = 10;  // a second launch reads x as it is then
    x.put(in);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT_EQ(pinned[4], 14);  // not before the host waits
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(pinned[4], 3 * 10 + 2);
    EXPECT_EQ(pinned[31], 3 * 31 + 2);
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// What a capture refuses, as CUDA does: waiting for the capturing stream, and from the capturing
// thread calls that are not stream-ordered; (the emulator, where CUDA would add other nodes)
// pageable copies and stream-ordered allocation. Each refusal invalidates the capture, its later
// ops fail, and ending it gives no graph; the stream then works as before.
TEST(CudaEmulator, ACaptureRefusesWhatCannotBeAGraphNode) {
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    device_array<int> d(8);
    d.put(std::vector<int>(8, 0));
    std::vector<int> host(8, 1);
    EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal),
              cudaErrorStreamCaptureUnsupported);  // never the legacy stream
    const std::vector<std::pair<const char*, std::function<cudaError_t()>>> refused = {
        {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(s); }},
        {"cudaStreamQuery", [&] { return cudaStreamQuery(s); }},
        {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); }},
        {"cudaMalloc",
         [] {
             void* p = nullptr;
             return cudaMalloc(&p, 64);
         }},
        {"cudaMemcpy",
         [&] { return cudaMemcpy(d.p, host.data(), 8 * sizeof(int), cudaMemcpyHostToDevice); }},
        {"pageable cudaMemcpyAsync",
         [&] {
             return cudaMemcpyAsync(d.p, host.data(), 8 * sizeof(int), cudaMemcpyHostToDevice, s);
         }},
        {"cudaMallocAsync",
         [&] {
             void* p = nullptr;
             return cudaMallocAsync(&p, 64, s);
         }},
    };
    for (const auto& [name, call] : refused) {
        SCOPED_TRACE(name);
        ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                  cudaErrorIllegalState);  // one capture at a time
        (void)cudaGetLastError();
        LAUNCH(1, 8, s, add_one_kernel)(d.p, 8);
        EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
        EXPECT_EQ(call(), cudaErrorStreamCaptureUnsupported);
        cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
        ASSERT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
        EXPECT_EQ(st, cudaStreamCaptureStatusInvalidated);
        EXPECT_EQ(cudaMemsetAsync(d.p, 0, 8, s), cudaErrorStreamCaptureInvalidated);
        cudaGraph_t g = reinterpret_cast<cudaGraph_t>(1);
        EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
        EXPECT_EQ(g, nullptr);
        (void)cudaGetLastError();
    }
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(d.get()[0], 0);  // nothing captured ran
    LAUNCH(1, 8, s, add_one_kernel)(d.p, 8);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(d.get()[0], 1);
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);  // none in progress
    (void)cudaGetLastError();
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// cuBLASLt's product, column-major, with the transposes, lds and strided batches the backend
// uses, against a plain loop.
TEST(CudaEmulator, CublasLtComputesItsDocumentedProduct) {
    const int m = 5, n = 3, k = 7, lda = 9, ldb = 8, ldd = 6, batch = 2;
    const int64_t sa = lda * m + 3, sb = ldb * n, sd = ldd * n + 2;  // A is k x m: transposed
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<__half> a(size_t(sa * batch)), b(size_t(sb * batch));
    for (auto& x : a) x = __float2half_rn(u(rng));
    for (auto& x : b) x = __float2half_rn(u(rng));
    device_array<__half> da(a.size()), db(b.size());
    device_array<float> dd(size_t(sd * batch));
    da.put(a);
    db.put(b);

    cublasLtHandle_t h = nullptr;
    ASSERT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t op = nullptr;
    ASSERT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const cublasOperation_t t = CUBLAS_OP_T;
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t),
              CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t la, lb, ld;
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, k, m, lda), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, n, ldb), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd), CUBLAS_STATUS_SUCCESS);
    const int32_t count = batch;
    for (auto [l, s] : {std::pair{la, sa}, std::pair{lb, sb}, std::pair{ld, sd}}) {
        ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                   sizeof count),
                  CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &s, sizeof s),
                  CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatmulPreference_t pref = nullptr;
    ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const uint32_t two = 2;  // the strides are odd elements: only 2-byte aligned
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
        ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &two, sizeof two),
                  CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &r, &found),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(found, 1);
    const float alpha = 0.5f, beta = 0.f;
    ASSERT_EQ(cublasLtMatmul(h, op, &alpha, da.p, la, db.p, lb, &beta, dd.p, ld, dd.p, ld, &r.algo,
                             nullptr, 0, nullptr),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<float> d = dd.get();  // C was NaN; beta 0 must not read it
    for (int bt = 0; bt < batch; ++bt) {
        for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) {
                double s = 0;
                for (int p = 0; p < k; ++p) {
                    s += double(__half2float(a[size_t(bt * sa + p + i * lda)])) *
                         double(__half2float(b[size_t(bt * sb + p + j * ldb)]));
                }
                EXPECT_NEAR(d[size_t(bt * sd + i + j * ldd)], 0.5 * s, 1e-5) << bt << i << j;
            }
        }
    }

    // Shapes that do not fit together, and pointers less aligned than the algorithm assumes.
    cublasLtMatrixLayout_t wrong;
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&wrong, CUDA_R_32F, m + 1, n, ldd), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, wrong, wrong, pref, 1, &r, &found),
              CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulPreference_t strict = nullptr;
    ASSERT_EQ(cublasLtMatmulPreferenceCreate(&strict), CUBLAS_STATUS_SUCCESS);  // 256 bytes
    ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, strict, 1, &r, &found),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmul(h, op, &alpha, da.p, la, db.p, lb, &beta, dd.p, ld, dd.p, ld, &r.algo,
                             nullptr, 0, nullptr),
              CUBLAS_STATUS_INVALID_VALUE);
    for (auto l : {la, lb, ld, wrong}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulPreferenceDestroy(strict);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
}

}  // namespace
