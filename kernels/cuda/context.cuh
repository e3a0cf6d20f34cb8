// Per-device state of the CUDA backend (docs/ARCHITECTURE.md, 'Backends'): the stream every op runs
// on, a scratch pool, the cuBLASLt handle with its workspace, and the GEMM plan cache. Everything
// is created on first use, so a backend that is constructed but never used costs no device memory.
// Kernels never create handles: launchers take a cuda_ctx&.
//
// Not thread-safe: a backend (and so its context) serves one session at a time
// (docs/ARCHITECTURE.md, 'Threading and ownership').
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/cuda/common.cuh"

namespace cacheblend {
namespace cuda {

class gemm_plan_cache;  // gemm.cuh

// Makes `device` current on the calling thread for the guard's life, then gives the thread back
// the device it had: an application that uses CUDA itself, or another GPU, must not find its
// current device changed by a call into the library. checked: a failed switch throws (the op
// would run on the wrong device); destructor paths pass false and go on.
class device_guard {
public:
    explicit device_guard(int device, bool checked = true);
    ~device_guard();
    device_guard(const device_guard&) = delete;
    device_guard& operator=(const device_guard&) = delete;

private:
    int device_;
    int prev_ = -1;  // the thread's device before, when it must be given back
};

class cuda_ctx {
public:
    explicit cuda_ctx(int device);
    ~cuda_ctx();
    cuda_ctx(const cuda_ctx&) = delete;
    cuda_ctx& operator=(const cuda_ctx&) = delete;

    int device() const noexcept { return device_; }

    cudaStream_t stream();
    // The stream if one was created, else nullptr (the legacy stream): for error probes that
    // must not create anything.
    cudaStream_t stream_if_created() const noexcept { return stream_.get(); }
    cublasLtHandle_t cublaslt();
    // cuBLASLt workspace (k_workspace_bytes), allocated on first use.
    void* workspace();
    size_t workspace_bytes() const noexcept { return k_workspace_bytes; }
    gemm_plan_cache& plans();

    // Scratch slot `slot` with at least `bytes`; its contents are undefined. Grow-only and
    // stream-ordered: a pointer stays valid until the same slot is asked for more bytes. Each op
    // uses its own slot numbers (scratch_slot) so two live scratch regions never alias. While ops
    // are recorded it throws kernel_status::unsupported (a graph would keep a pointer that a
    // later, larger request frees), and the recording fails.
    void* scratch(int slot, size_t bytes);

    // A buffer of a fixed size for the life of the context, allocated by the first call and
    // zeroed then: for state a kernel leaves as it found it (the row attention's arrival
    // counters), which a recorded graph may name because it never moves. Every call passes the
    // same bytes (a larger request is an internal error); the first may not be during recording.
    void* fixed_zeroed(size_t bytes);

    // The device's multiprocessors (read once): kernels that split work to fill the GPU.
    int sm_count();

    // Whether ops are being recorded into a graph on stream() (recording.cuh): nothing may
    // allocate, free or wait for the stream meanwhile.
    bool recording() const noexcept { return recording_; }
    void set_recording(bool on) noexcept { recording_ = on; }

    void synchronize();

    static constexpr size_t k_workspace_bytes = size_t(32) << 20;  // cuBLASLt's Hopper advice

private:
    int device_;
    cuda_stream stream_;
    cublaslt_handle lt_;
    device_buffer workspace_;
    device_buffer fixed_;
    int sm_count_ = 0;
    static constexpr int k_scratch_slots = 5;
    device_buffer scratch_[k_scratch_slots];
    std::unique_ptr<gemm_plan_cache> plans_;
    bool recording_ = false;
};

// Scratch slot numbers, one per concurrently live scratch region of an op.
enum scratch_slot : int {
    scratch_w_f16 = 0,            // dequantized weight panel (matmul)
    scratch_x_f16 = 1,            // activations converted to f16 (matmul)
    scratch_attention_probs = 2,  // one softmax row per (query row, head) (attention_mass)
    scratch_row_exponent = 3,     // per-row f16 staging exponents (matmul)
    scratch_attention_sums = 4,   // softmax denominators per (head, query row) (attention)
};

}  // namespace cuda
}  // namespace cacheblend
