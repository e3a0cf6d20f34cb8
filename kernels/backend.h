// The compute backend interface the engine runs on (docs/ARCHITECTURE.md, 'Backends'). Plain types
// and pure virtual functions only: no backend is included here, so core/ depends on this header
// and every backend (kernels/cpu, kernels/cuda) implements it without knowing the engine.
// Backends are found by device name in kernels/backend-registry.h. Pointers passed to ops are
// backend memory (from alloc()); for the CPU backend that is ordinary host memory. Failures are
// kernel_error (kernels/kernel-error.h); the engine's adapter turns them into cacheblend::error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>

#include "kernels/ops-types.h"

namespace cacheblend {

// Ops recorded once and replayed as one submission (backend::record; a CUDA graph): a replay
// runs the same ops with the same arguments, pointers and sizes as they were when recorded,
// reading the memory they name when it runs. Destroyed before the backend that made it.
class recorded_ops {
public:
    virtual ~recorded_ops() = default;
    virtual void replay() = 0;
};

class backend {
public:
    virtual ~backend() = default;
    virtual const char* name() const = 0;  // the device: "cpu", "cuda:0"
    virtual int n_threads() const = 0;
    // A backend on the same compute resources, with nothing else shared, or null when this
    // backend cannot share. Sessions of one runtime run on siblings of the runtime's backend:
    // on the CPU, concurrent requests take turns on its thread pool instead of each starting as
    // many threads as there are cores; on a GPU each has its own stream and scratch on the same
    // device, and reads the weights the runtime uploaded once (memory one sibling allocated and
    // synchronized, another may read).
    virtual std::unique_ptr<backend> sibling() { return nullptr; }
    // True when alloc() returns host memory the caller may read and write directly (the CPU).
    virtual bool host_memory() const = 0;

    // ---- memory ----
    virtual void* alloc(size_t bytes) = 0;  // 64-byte aligned
    virtual void free(void* p) noexcept = 0;
    virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
    virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
    // Backend memory to backend memory; the ranges do not overlap.
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;
    virtual void synchronize() = 0;

    // ---- transfers beside compute (a device's copy engine; the engine uses them only when
    // host_memory() is false, and the defaults are the plain, ordered forms) ----
    // Host memory that upload_async can copy from without staging (CUDA: pinned). 64-byte aligned.
    virtual void* alloc_host(size_t bytes);
    virtual void free_host(void* p) noexcept;
    // Queues a copy from alloc_host memory into backend memory that runs beside the ops queued
    // after it: it starts once every op queued before the call is done (so earlier readers of
    // dst have read it). Ops queued after wait_upload(ticket) see the copy; host_src must not
    // change until finish_upload(ticket) has returned, which waits for the copy on the host and
    // retires the ticket (every ticket is finished exactly once).
    virtual uint64_t upload_async(void* dst, const void* host_src, size_t bytes) {
        upload(dst, host_src, bytes);
        return 0;
    }
    virtual void wait_upload(uint64_t /*ticket*/) {}
    virtual void finish_upload(uint64_t /*ticket*/) {}

    // ---- recording ----
    // Calls ops() with the ops it calls on this backend recorded instead of run, and returns them
    // for replay; or returns nullptr without calling ops() where the backend does not record (the
    // CPU: a call costs what a replay would). ops() may call only ops (no transfer, alloc or
    // synchronize). When an op cannot be recorded (one that uses scratch memory, a host copy)
    // it throws, nothing has run, and the caller runs ops() itself.
    virtual std::unique_ptr<recorded_ops> record(const std::function<void()>& /*ops*/) {
        return nullptr;
    }

    // ---- ops (semantics as in kernels/cpu/ops.h) ----
    virtual void matmul(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                        int64_t ldy, const float* bias) = 0;
    // Fused forms of matmul for the ops a transformer layer chains (a decode step on a device is
    // bound by its launches, not its work). Each is exactly the calls its default makes, bit for
    // bit; a device does them in fewer launches, the CPU takes the defaults. No output (y, out,
    // tmp, pre_norm::h) may overlap the input x: a device reads all of x while it writes them.
    //
    // matmul(outs[j].w, x, m, ldx, outs[j].y, outs[j].ldy, outs[j].bias) for j < n: the
    // products of one input (q, k and v of a layer), all of outs[0].w.cols columns; a device
    // stages x once. With `norm`, x's rows are RMS-normalized first (see pre_norm).
    virtual void matmuls(const float* x, int64_t m, int64_t ldx, const matmul_out* outs, int n,
                         const pre_norm* norm) {
        if (n <= 0) return;
        if (norm) {
            rms_norm(x, m, outs[0].w.cols, ldx, norm->gamma, norm->eps, norm->h, norm->ldh);
            x = norm->h;
            ldx = norm->ldh;
        }
        for (int j = 0; j < n; ++j) {
            matmul(outs[j].w, x, m, ldx, outs[j].y, outs[j].ldy, outs[j].bias);
        }
    }
    // y += W x (the residual add after a projection): matmul into tmp, then add_rows. tmp is
    // m rows of ldy floats of backend memory the op may overwrite.
    virtual void matmul_add(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y,
                            int64_t ldy, float* tmp) {
        matmul(w, x, m, ldx, tmp, ldy, nullptr);
        add_rows(y, tmp, m, w.rows, ldy);
    }
    // out = swiglu(W_gate x, W_up x): gate into out and up into tmp (both m rows, ld floats
    // apart; gate.rows == up.rows) by matmuls (with its `norm`), then swiglu into out.
    virtual void matmul_swiglu(const weight_view& gate, const weight_view& up, const float* x,
                               int64_t m, int64_t ldx, float* out, int64_t ld, float* tmp,
                               const pre_norm* norm) {
        const matmul_out outs[2] = {{gate, out, ld, nullptr}, {up, tmp, ld, nullptr}};
        matmuls(x, m, ldx, outs, 2, norm);
        swiglu(out, tmp, m, gate.rows, ld, out);
    }
    virtual void get_rows(const weight_view& w, const int32_t* ids, int64_t m, float* y,
                          int64_t ldy) = 0;
    virtual void rms_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma,
                          float eps, float* y, int64_t ldy) = 0;
    virtual void rope(float* x, int64_t m, int64_t ldx, int n_head, int head_dim,
                      const int32_t* pos, const rope_params& p) = 0;
    virtual void store_rows_f16(const float* src, int64_t m, int64_t n, int64_t ldsrc,
                                const int32_t* pos, uint16_t* cache, int64_t ld_cache) = 0;
    virtual void attention(const attention_args& a) = 0;
    virtual void swiglu(const float* gate, const float* up, int64_t m, int64_t n, int64_t ld,
                        float* out) = 0;
    virtual void add_rows(float* y, const float* x, int64_t m, int64_t n, int64_t ld) = 0;
    // rope(k), store_rows_f16(k), store_rows_f16(v), rope(q) as one op: the same bits; a device
    // does it in one launch (a decode step has hundreds; the CPU takes the four calls).
    virtual void rope_qk_store_kv(const rope_store_args& a) {
        const int64_t kd = int64_t(a.n_kv_head) * a.head_dim;
        rope(a.k, a.m, a.ldkv, a.n_kv_head, a.head_dim, a.pos, a.rope);
        store_rows_f16(a.k, a.m, kd, a.ldkv, a.pos, a.k_cache, a.ld_cache);
        store_rows_f16(a.v, a.m, kd, a.ldkv, a.pos, a.v_cache, a.ld_cache);
        rope(a.q, a.m, a.ldq, a.n_head, a.head_dim, a.pos, a.rope);
    }

    // ---- blending (semantics as in kernels/cpu/blend-ops.h) ----
    // k_type: dtype::f32 or dtype::f16 (the stored keys' own type, so f16 keys cross to a
    // device without being widened); any other is kernel_status::invalid_arg.
    virtual void relocate_kv(const void* k_src, dtype k_type, const uint16_t* v_src, int64_t n,
                             int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                             const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache,
                             int64_t ld_cache) = 0;
    virtual void kv_deviation(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                              int64_t ld_cached, int64_t n, int64_t width, float* d) = 0;
    virtual void attention_mass(const attention_args& a, float* scores) = 0;
    // Row i of dst (dst_stride bytes apart) = row idx[i] of src (src_stride bytes apart), each
    // row_bytes long, for i < n; idx is backend memory. The blend path's gathers of cached and
    // fresh KV rows on a device, so they never cross to the host row by row.
    virtual void gather_rows(const void* src, size_t src_stride, const int32_t* idx, int64_t n,
                             size_t row_bytes, void* dst, size_t dst_stride) = 0;

    // ---- encoder, the BERT embedder (semantics as in kernels/cpu/encoder-ops.h) ----
    virtual void layer_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma,
                            const float* beta, float eps, float* y, int64_t ldy) = 0;
    virtual void gelu_erf(float* x, int64_t m, int64_t n, int64_t ld) = 0;
    virtual void encoder_attention(const encoder_attention_args& a) = 0;
};

inline void* backend::alloc_host(size_t bytes) {
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(64));
}
inline void backend::free_host(void* p) noexcept {
    if (p) ::operator delete(p, std::align_val_t(64));
}

// A buffer owned by a backend, freed on destruction: backend memory (alloc), or with
// memory::host the backend's host memory for upload_async (alloc_host).
class backend_buffer {
public:
    enum class memory { backend, host };
    backend_buffer() = default;
    backend_buffer(backend& be, size_t bytes, memory m = memory::backend)
        : be_(&be),
          p_(m == memory::host ? be.alloc_host(bytes) : be.alloc(bytes)),
          bytes_(bytes),
          host_(m == memory::host) {}
    ~backend_buffer() { reset(); }
    backend_buffer(backend_buffer&& o) noexcept
        : be_(o.be_), p_(o.p_), bytes_(o.bytes_), host_(o.host_) {
        o.p_ = nullptr;
    }
    backend_buffer& operator=(backend_buffer&& o) noexcept {
        if (this != &o) {
            reset();
            be_ = o.be_;
            p_ = o.p_;
            bytes_ = o.bytes_;
            host_ = o.host_;
            o.p_ = nullptr;
        }
        return *this;
    }
    void reset() noexcept {
        if (p_ && host_) be_->free_host(p_);
        if (p_ && !host_) be_->free(p_);
        p_ = nullptr;
        bytes_ = 0;
    }
    template <typename T>
    T* as() const noexcept {
        return static_cast<T*>(p_);
    }
    size_t size() const noexcept { return bytes_; }

private:
    backend* be_ = nullptr;
    void* p_ = nullptr;
    size_t bytes_ = 0;
    bool host_ = false;
};

}  // namespace cacheblend
