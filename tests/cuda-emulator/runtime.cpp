// The CUDA emulator's runtime API: one device, streams as queues that run when the host waits,
// events as positions in a stream, device memory as host memory with guard bytes around it and
// filled with 0xff (NaN in f32 and f16) when allocated, as a GPU's memory is not zeroed.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "emulator-internal.h"

// Under AddressSanitizer the guard bytes are poisoned, so a kernel's read past an allocation is
// reported too, not only a write (which the guard check finds in every build).
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CBL_EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define CBL_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
constexpr bool k_guards_poisoned = true;
#else
#define CBL_EMU_POISON(p, n) ((void)(p), (void)(n))
#define CBL_EMU_UNPOISON(p, n) ((void)(p), (void)(n))
constexpr bool k_guards_poisoned = false;
#endif

// A stream capture in progress: the ops queued on the stream go here instead of the queue.
struct stream_capture {
    bool active = false;
    bool invalidated = false;  // a refused call ended its use; EndCapture reports it
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    std::thread::id thread;  // the thread that began it
    std::vector<std::function<void()>> ops;
};

struct CUstream_st {
    std::deque<std::function<void()>> queue;
    uint64_t enqueued = 0;  // ops ever queued
    uint64_t executed = 0;  // ops taken off the queue (run or dropped)
    stream_capture capture;
};

// A captured graph and its executable form: the ops in capture order, each run again (copied)
// by every launch with the arguments it was queued with.
struct CUgraph_st {
    std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> ops;
};

struct CUevent_st {
    CUstream_st* stream = nullptr;  // null until recorded
    uint64_t position = 0;          // complete once stream->executed reaches it
};

namespace cbl_emu {
namespace {

constexpr size_t k_guard = 256;  // bytes before and after every device allocation
constexpr unsigned char k_guard_byte = 0xcb;

struct allocation {
    size_t bytes;
    bool device;
    unsigned char* base;  // device: the guarded block; pinned host: the allocation itself
};

struct device_state {
    CUstream_st legacy;
    std::vector<CUstream_st*> streams;  // in creation order
    std::set<CUevent_st*> events;
    std::set<CUgraph_st*> graphs;
    std::set<CUgraphExec_st*> execs;
    std::map<uintptr_t, allocation> allocations;  // by the address handed out
    int current_device = 0;
    std::atomic<cudaError_t> sticky{cudaSuccess};
    std::string sticky_what;
};

device_state& state() {
    static device_state* s = new device_state;  // never destroyed: static destructors may free late
    return *s;
}

thread_local cudaError_t t_last_error = cudaSuccess;

CUstream_st* resolve(cudaStream_t s) { return s ? s : &state().legacy; }

bool live(const CUstream_st* s) {
    const auto& v = state().streams;
    return std::find(v.begin(), v.end(), s) != v.end();
}

bool valid_stream(cudaStream_t s) { return !s || live(s); }

// Runs s's queued ops until `position` of them have left the queue. After a device failure the
// rest is dropped, as a faulted context runs nothing more.
void run_until(CUstream_st* s, uint64_t position) {
    while (s->executed < position && !s->queue.empty()) {
        std::function<void()> op = std::move(s->queue.front());
        s->queue.pop_front();
        ++s->executed;
        if (sticky_error() == cudaSuccess) op();
    }
}

void run_all(CUstream_st* s) { run_until(s, s->enqueued); }

void run_device() {
    device_state& d = state();
    bool again = true;
    while (again) {  // a stream's wait on another runs that one too; loop until all are empty
        again = false;
        run_all(&d.legacy);
        for (size_t i = 0; i < d.streams.size(); ++i) {
            if (!d.streams[i]->queue.empty()) {
                run_all(d.streams[i]);
                again = true;
            }
        }
    }
}

}  // namespace

// CBL_CUDA_EMULATOR_ORDER=reverse, the adversarial schedule. When the host waits for a stream (or
// an event on it), every other stream runs first, in creation order, then the one waited for; a
// grid's blocks and a block's threads run last to first. The default (lazy, in order) runs only
// what the host waits for, so a host that reuses memory before its copy ran sees it; reverse runs
// a consumer before the producer it forgot to wait for (compute that reads an upload without the
// copy's event), which lazy misses when the host waits for the producer first, and swaps which
// side of an unsynchronized pair of blocks or threads goes first. All are schedules a GPU may run.
bool reverse_order() {
    static const bool e = [] {
        const char* v = std::getenv("CBL_CUDA_EMULATOR_ORDER");
        return v && std::strcmp(v, "reverse") == 0;
    }();
    return e;
}

namespace {

void host_waits_for(CUstream_st* target) {
    if (!reverse_order()) return;
    device_state& d = state();
    if (target != &d.legacy) run_all(&d.legacy);
    for (size_t i = 0; i < d.streams.size(); ++i) {
        if (d.streams[i] != target) run_all(d.streams[i]);
    }
}

// Stream capture (cudaStreamBeginCapture) refuses, as CUDA does, work that cannot become a
// graph node: waiting on the capturing stream (a sync or a query of it) and, from the capturing
// thread (or any thread while some capture is in global mode), calls that are not stream-ordered
// (cudaMalloc, cudaFree, cudaHostAlloc, cudaFreeHost, cudaMemcpy, cudaDeviceSynchronize). The
// emulator also refuses, where CUDA would make other nodes, copies between pageable host memory
// and the device, stream-ordered allocation, and events on a capturing stream (a capture spans
// one stream here). A refused call fails with cudaErrorStreamCaptureUnsupported and invalidates
// the capture; cudaStreamEndCapture then reports cudaErrorStreamCaptureInvalidated.
cudaError_t refuse_capture(CUstream_st* s) {
    s->capture.invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
}

// cudaErrorStreamCaptureUnsupported when s (a live stream, not the legacy one) is capturing.
cudaError_t capturing_stream_refuses(CUstream_st* s) {
    return s && live(s) && s->capture.active ? refuse_capture(s) : cudaSuccess;
}

// A call that is not stream-ordered: refused while this thread captures (global or thread-local
// mode) or any thread captures in global mode; every such capture is invalidated.
cudaError_t unsafe_call_refused() {
    cudaError_t e = cudaSuccess;
    for (CUstream_st* s : state().streams) {
        const stream_capture& c = s->capture;
        if (!c.active) continue;
        const bool mine = c.thread == std::this_thread::get_id();
        if (c.mode == cudaStreamCaptureModeGlobal ||
            (mine && c.mode == cudaStreamCaptureModeThreadLocal)) {
            e = refuse_capture(s);
        }
    }
    return e;
}

// The allocation holding p (its address handed out, and it), or null.
const std::pair<const uintptr_t, allocation>* find_allocation(const void* p) {
    auto& m = state().allocations;
    auto it = m.upper_bound(reinterpret_cast<uintptr_t>(p));
    if (it == m.begin()) return nullptr;
    --it;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return a < it->first + it->second.bytes || (a == it->first) ? &*it : nullptr;
}

bool is_pinned(const void* p) {
    const auto* a = find_allocation(p);
    return a && !a->second.device;
}

bool touches_device(const void* p, size_t bytes) {
    const auto* a = find_allocation(p);
    if (a && a->second.device) return true;
    // A host range that runs into a device allocation is as wrong as one inside it.
    auto& m = state().allocations;
    auto it = m.lower_bound(reinterpret_cast<uintptr_t>(p));
    return it != m.end() && it->second.device && it->first < reinterpret_cast<uintptr_t>(p) + bytes;
}

cudaError_t entry() {
    const cudaError_t s = sticky_error();
    return s == cudaSuccess ? cudaSuccess : note(s);
}

void* device_alloc(size_t bytes) {
    const size_t body = (bytes + 255) / 256 * 256;
    auto* base = static_cast<unsigned char*>(std::aligned_alloc(256, body + 2 * k_guard));
    if (!base) return nullptr;
    std::memset(base, k_guard_byte, k_guard);
    std::memset(base + k_guard, 0xff, bytes);
    std::memset(base + k_guard + bytes, k_guard_byte, body - bytes + k_guard);
    CBL_EMU_POISON(base, k_guard);
    CBL_EMU_POISON(base + k_guard + bytes, body - bytes + k_guard);
    unsigned char* p = base + k_guard;
    state().allocations[reinterpret_cast<uintptr_t>(p)] = allocation{bytes, true, base};
    return p;
}

bool guards_intact(uintptr_t p, const allocation& a) {
    if (k_guards_poisoned) return true;  // AddressSanitizer reported any access to them
    const size_t body = (a.bytes + 255) / 256 * 256;
    const unsigned char* after = reinterpret_cast<const unsigned char*>(p) + a.bytes;
    for (size_t i = 0; i < k_guard; ++i) {
        if (a.base[i] != k_guard_byte) return false;
    }
    for (size_t i = 0; i < body - a.bytes + k_guard; ++i) {
        if (after[i] != k_guard_byte) return false;
    }
    return true;
}

cudaError_t device_free(void* p, const char* how) {
    auto& m = state().allocations;
    auto it = m.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.end() || !it->second.device) {
        return note(cudaErrorInvalidValue);  // not sticky: the call fails, the device goes on
    }
    if (!guards_intact(it->first, it->second)) {
        fail(cudaErrorIllegalAddress, "emulator: a write outside a device allocation of " +
                                          std::to_string(it->second.bytes) + " bytes, found at " +
                                          how);
    }
    CBL_EMU_UNPOISON(it->second.base, (it->second.bytes + 255) / 256 * 256 + 2 * k_guard);
    std::free(it->second.base);
    m.erase(it);
    return cudaSuccess;
}

// What a copy of `kind` may touch: device memory on its device side(s), never on a host side.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
        kind != cudaMemcpyDeviceToDevice) {
        return cudaErrorInvalidMemcpyDirection;  // the backend names every direction
    }
    if (dst_dev ? !is_device_range(dst, bytes) : touches_device(dst, bytes)) {
        return cudaErrorInvalidValue;
    }
    if (src_dev ? !is_device_range(src, bytes) : touches_device(src, bytes)) {
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

const char* error_name(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorIllegalState: return "cudaErrorIllegalState";
        case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
        case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
        case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    }
    return "cudaErrorUnknown";
}

}  // namespace

std::recursive_mutex& device_mutex() {
    static std::recursive_mutex* m = new std::recursive_mutex;
    return *m;
}

void fail(cudaError_t e, const std::string& what) {
    device_state& d = state();
    if (d.sticky.load() != cudaSuccess) return;  // the first failure is the one to report
    d.sticky_what = what;
    d.sticky.store(e);
}

cudaError_t sticky_error() { return state().sticky.load(); }

cudaError_t note(cudaError_t e) {
    if (e != cudaSuccess) t_last_error = e;
    return e;
}

cudaError_t enqueue(cudaStream_t s, std::function<void()> op) {
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    CUstream_st* st = resolve(s);
    if (st->capture.active) {
        if (st->capture.invalidated) return cudaErrorStreamCaptureInvalidated;
        st->capture.ops.push_back(std::move(op));
        return cudaSuccess;
    }
    st->queue.push_back(std::move(op));
    ++st->enqueued;
    return cudaSuccess;
}

bool is_device_range(const void* p, size_t bytes) {
    const auto* a = find_allocation(p);
    return a && a->second.device &&
           reinterpret_cast<uintptr_t>(p) + bytes <= a->first + a->second.bytes;
}

void check_guards(const char* after) {
    for (const auto& [p, a] : state().allocations) {
        if (a.device && !guards_intact(p, a)) {
            fail(cudaErrorIllegalAddress, std::string("emulator: ") + after +
                                              " wrote outside a device allocation of " +
                                              std::to_string(a.bytes) + " bytes");
            return;
        }
    }
}

}  // namespace cbl_emu

using namespace cbl_emu;

#define CBL_EMU_ENTER()                                          \
    std::lock_guard<std::recursive_mutex> lock_(device_mutex()); \
    if (const cudaError_t e_ = entry(); e_ != cudaSuccess) return e_

cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return note(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    constexpr int k_emulated_sms = 32;
    if (!value) return note(cudaErrorInvalidValue);
    if (device != 0) return note(cudaErrorInvalidDevice);
    if (attr != cudaDevAttrMultiProcessorCount) return note(cudaErrorInvalidValue);
    *value = k_emulated_sms;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (device != 0) return note(cudaErrorInvalidDevice);
    state().current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    if (!device) return note(cudaErrorInvalidValue);
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    *device = state().current_device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
    CBL_EMU_ENTER();
    if (const cudaError_t e = unsafe_call_refused(); e != cudaSuccess) return note(e);
    run_device();
    return note(sticky_error());
}

cudaError_t cudaGetLastError() {
    const cudaError_t e = t_last_error;
    t_last_error = sticky_error();  // a sticky error stays
    return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

const char* cudaGetErrorName(cudaError_t e) { return error_name(e); }

const char* cudaGetErrorString(cudaError_t e) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (e != cudaSuccess && e == sticky_error()) return state().sticky_what.c_str();
    return error_name(e);
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
    CBL_EMU_ENTER();
    if (const cudaError_t e = unsafe_call_refused(); e != cudaSuccess) return note(e);
    if (!p) return note(cudaErrorInvalidValue);
    *p = device_alloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : note(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
    CBL_EMU_ENTER();
    if (const cudaError_t e = unsafe_call_refused(); e != cudaSuccess) return note(e);
    if (!p) return cudaSuccess;
    run_device();  // cudaFree waits for the device
    const cudaError_t e = device_free(p, "cudaFree");
    return e != cudaSuccess ? e : note(sticky_error());  // damaged guards fail the call too
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
    CBL_EMU_ENTER();
    if (!p || !valid_stream(s))
        return note(p ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
    if (const cudaError_t e = capturing_stream_refuses(s); e != cudaSuccess) return note(e);
    *p = device_alloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : note(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
    CBL_EMU_ENTER();
    if (!p) return cudaSuccess;
    const auto it = state().allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == state().allocations.end() || !it->second.device) return note(cudaErrorInvalidValue);
    if (const cudaError_t e = capturing_stream_refuses(s); e != cudaSuccess) return note(e);
    return note(enqueue(s, [p] {
        if (device_free(p, "cudaFreeAsync") != cudaSuccess) {
            fail(cudaErrorIllegalAddress, "emulator: a queued free of memory freed before it ran");
        }
    }));
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags) {
    CBL_EMU_ENTER();
    if (const cudaError_t e = unsafe_call_refused(); e != cudaSuccess) return note(e);
    if (!p || flags != cudaHostAllocDefault) return note(cudaErrorInvalidValue);
    const size_t body = ((bytes ? bytes : 1) + 4095) / 4096 * 4096;
    auto* base = static_cast<unsigned char*>(std::aligned_alloc(4096, body));
    if (!base) return note(cudaErrorMemoryAllocation);
    state().allocations[reinterpret_cast<uintptr_t>(base)] = allocation{bytes, false, base};
    *p = base;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
    CBL_EMU_ENTER();
    if (const cudaError_t e = unsafe_call_refused(); e != cudaSuccess) return note(e);
    if (!p) return cudaSuccess;
    auto& m = state().allocations;
    auto it = m.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.end() || it->second.device) return note(cudaErrorInvalidValue);
    run_device();  // copies queued from it still read it
    std::free(it->second.base);
    m.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    CBL_EMU_ENTER();
    if (const cudaError_t e = unsafe_call_refused(); e != cudaSuccess) return note(e);
    if (const cudaError_t e = check_copy(dst, src, bytes, kind); e != cudaSuccess) return note(e);
    host_waits_for(&state().legacy);
    run_all(&state().legacy);  // ordered after the legacy stream's work, not the others'
    if (bytes) std::memmove(dst, src, bytes);
    return note(sticky_error());
}

// As the CUDA runtime documents it: from pageable host memory the bytes are taken at the call
// (the source may be reused on return), into pageable host memory the call returns when the copy
// is done (after the stream's earlier work); with pinned host memory the copy runs when the stream
// reaches it, so that memory must stay untouched until then.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s) {
    CBL_EMU_ENTER();
    if (const cudaError_t e = check_copy(dst, src, bytes, kind); e != cudaSuccess) return note(e);
    if (!valid_stream(s)) return note(cudaErrorInvalidResourceHandle);
    if (bytes == 0) return cudaSuccess;
    const bool pageable = (kind == cudaMemcpyHostToDevice && !is_pinned(src)) ||
                          (kind == cudaMemcpyDeviceToHost && !is_pinned(dst));
    if (pageable) {
        if (const cudaError_t e = capturing_stream_refuses(s); e != cudaSuccess) return note(e);
    }
    std::shared_ptr<std::vector<unsigned char>> staged;
    if (kind == cudaMemcpyHostToDevice && !is_pinned(src)) {
        const auto* p = static_cast<const unsigned char*>(src);
        staged = std::make_shared<std::vector<unsigned char>>(p, p + bytes);
    }
    const cudaError_t e = enqueue(s, [dst, src, bytes, kind, staged] {
        // The memory must still be there when the copy runs, not only when it was queued; a
        // pageable source's bytes were taken at the call, and its address may since have been
        // freed and handed out again (even as device memory: the emulator's is the host's heap).
        const void* from = staged ? staged->data() : src;
        if (check_copy(dst, from, bytes, kind) != cudaSuccess) {
            fail(cudaErrorIllegalAddress, "emulator: a queued copy of " + std::to_string(bytes) +
                                              " bytes touches memory freed before it ran");
            return;
        }
        std::memmove(dst, from, bytes);
    });
    if (e != cudaSuccess) return note(e);
    if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst)) {
        host_waits_for(resolve(s));
        run_all(resolve(s));
    }
    return note(sticky_error());
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
    CBL_EMU_ENTER();
    if (bytes && !is_device_range(p, bytes)) return note(cudaErrorInvalidValue);
    return note(enqueue(s, [p, value, bytes] {
        if (bytes && !is_device_range(p, bytes)) {
            fail(cudaErrorIllegalAddress, "emulator: a queued memset into freed memory");
            return;
        }
        std::memset(p, value, bytes);
    }));
}

cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t s) {
    CBL_EMU_ENTER();
    if (width > pitch) return note(cudaErrorInvalidValue);
    const size_t span = height ? (height - 1) * pitch + width : 0;
    if (span && !is_device_range(p, span)) return note(cudaErrorInvalidValue);
    return note(enqueue(s, [p, pitch, value, width, height, span] {
        if (span && !is_device_range(p, span)) {
            fail(cudaErrorIllegalAddress, "emulator: a queued 2D memset into freed memory");
            return;
        }
        for (size_t r = 0; r < height; ++r)
            std::memset(static_cast<char*>(p) + r * pitch, value, width);
    }));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    CBL_EMU_ENTER();
    if (!s || (flags & ~cudaStreamNonBlocking)) return note(cudaErrorInvalidValue);
    *s = new CUstream_st;
    state().streams.push_back(*s);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (!s || !live(s)) return note(cudaErrorInvalidResourceHandle);
    run_all(s);  // queued work still completes (the documented behaviour)
    auto& v = state().streams;
    v.erase(std::find(v.begin(), v.end(), s));
    for (CUevent_st* e : state().events) {
        if (e->stream == s) e->stream = nullptr;  // complete: its stream ran everything
    }
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    CBL_EMU_ENTER();
    if (!valid_stream(s)) return note(cudaErrorInvalidResourceHandle);
    if (const cudaError_t e = capturing_stream_refuses(s); e != cudaSuccess) return note(e);
    host_waits_for(resolve(s));
    run_all(resolve(s));
    return note(sticky_error());
}

// Reports "not ready" while work is queued, running one op per query so a polling loop makes
// progress.
cudaError_t cudaStreamQuery(cudaStream_t s) {
    CBL_EMU_ENTER();
    if (!valid_stream(s)) return note(cudaErrorInvalidResourceHandle);
    if (const cudaError_t e = capturing_stream_refuses(s); e != cudaSuccess) return note(e);
    CUstream_st* st = resolve(s);
    if (st->queue.empty()) return cudaSuccess;
    run_until(st, st->executed + 1);
    if (sticky_error() != cudaSuccess) return note(sticky_error());
    return st->queue.empty() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    CBL_EMU_ENTER();
    if (!e || !state().events.count(e) || flags != 0) return note(cudaErrorInvalidResourceHandle);
    if (const cudaError_t r = capturing_stream_refuses(s); r != cudaSuccess) return note(r);
    if (!e->stream) return note(enqueue(s, [] {}));  // never recorded: nothing to wait for
    // The wait is on the event's latest record at the time of this call.
    CUstream_st* on = e->stream;
    const uint64_t position = e->position;
    return note(enqueue(s, [on, position] {
        if (live(on) || on == &state().legacy) run_until(on, position);
    }));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
    CBL_EMU_ENTER();
    if (!e || (flags & ~cudaEventDisableTiming)) return note(cudaErrorInvalidValue);
    *e = new CUevent_st;
    state().events.insert(*e);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (!e || !state().events.erase(e)) return note(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    CBL_EMU_ENTER();
    if (!e || !state().events.count(e) || !valid_stream(s)) {
        return note(cudaErrorInvalidResourceHandle);
    }
    if (const cudaError_t r = capturing_stream_refuses(s); r != cudaSuccess) return note(r);
    e->stream = resolve(s);
    e->position = e->stream->enqueued;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    CBL_EMU_ENTER();
    if (!e || !state().events.count(e)) return note(cudaErrorInvalidResourceHandle);
    if (e->stream) {
        host_waits_for(e->stream);
        run_until(e->stream, e->position);
    }
    return note(sticky_error());
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    CBL_EMU_ENTER();
    if (!s) return note(cudaErrorStreamCaptureUnsupported);  // the legacy stream never captures
    if (!live(s)) return note(cudaErrorInvalidResourceHandle);
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed) {
        return note(cudaErrorInvalidValue);
    }
    if (s->capture.active) return note(cudaErrorIllegalState);
    s->capture = stream_capture{true, false, mode, std::this_thread::get_id(), {}};
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    CBL_EMU_ENTER();
    if (!graph) return note(cudaErrorInvalidValue);
    if (!s || !live(s)) return note(cudaErrorInvalidResourceHandle);
    stream_capture& c = s->capture;
    if (!c.active) return note(cudaErrorIllegalState);
    if (c.mode != cudaStreamCaptureModeRelaxed && c.thread != std::this_thread::get_id()) {
        return note(cudaErrorStreamCaptureWrongThread);
    }
    const bool invalidated = c.invalidated;
    std::vector<std::function<void()>> ops = std::move(c.ops);
    c = stream_capture{};
    *graph = nullptr;
    if (invalidated) return note(cudaErrorStreamCaptureInvalidated);
    *graph = new CUgraph_st{std::move(ops)};
    state().graphs.insert(*graph);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
    CBL_EMU_ENTER();
    if (!status) return note(cudaErrorInvalidValue);
    if (!valid_stream(s)) return note(cudaErrorInvalidResourceHandle);
    const stream_capture& c = resolve(s)->capture;
    *status = !c.active       ? cudaStreamCaptureStatusNone
              : c.invalidated ? cudaStreamCaptureStatusInvalidated
                              : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
    CBL_EMU_ENTER();
    if (!exec || flags != 0) return note(cudaErrorInvalidValue);
    if (!graph || !state().graphs.count(graph)) return note(cudaErrorInvalidResourceHandle);
    *exec = new CUgraphExec_st{graph->ops};
    state().execs.insert(*exec);
    return cudaSuccess;
}

// Queues the graph's ops on s in capture order, each a copy of the captured one: a launch reads
// the memory its nodes name when it runs, with the arguments they were captured with.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    CBL_EMU_ENTER();
    if (!exec || !state().execs.count(exec) || !valid_stream(s)) {
        return note(cudaErrorInvalidResourceHandle);
    }
    for (const std::function<void()>& op : exec->ops) {
        if (const cudaError_t e = enqueue(s, op); e != cudaSuccess) return note(e);
    }
    return cudaSuccess;
}

// A launched graph's queued ops are copies: destroying it does not touch them.
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (!exec || !state().execs.erase(exec)) return note(cudaErrorInvalidResourceHandle);
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (!graph || !state().graphs.erase(graph)) return note(cudaErrorInvalidResourceHandle);
    delete graph;
    return cudaSuccess;
}
