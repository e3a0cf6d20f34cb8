// Host arrays handed to backend ops (docs/ARCHITECTURE.md, 'Backends'): on a host-memory backend
// (the CPU) the host pointer itself, nothing copied; on a device backend a buffer of this object's
// that the data is uploaded to, or that an op writes to and out() downloads from.
#pragma once

#include <cstddef>

#include "core/engine/backend.h"

namespace cacheblend {

class host_staging {
public:
    // n elements at `host`, as `be` reads them (valid until the next call on this object).
    template <typename T>
    const T* in(backend& be, const T* host, size_t n) {
        if (be.host_memory()) return host;
        T* dev = static_cast<T*>(reserve(be, n * sizeof(T)));
        be.upload(dev, host, n * sizeof(T));
        return dev;
    }

    // Where `be` writes n elements meant for `host`; out() brings them there.
    template <typename T>
    T* out_space(backend& be, T* host, size_t n) {
        return be.host_memory() ? host : static_cast<T*>(reserve(be, n * sizeof(T)));
    }
    template <typename T>
    void out(backend& be, T* host, const T* written, size_t n) {
        if (written != host) be.download(host, written, n * sizeof(T));
    }

private:
    void* reserve(backend& be, size_t bytes) {
        if (buf_.size() < bytes) buf_ = backend_buffer(be, bytes);
        return buf_.as<void>();
    }

    backend_buffer buf_;
};

// *b with room for n elements of T on `be`: scratch that grows and is kept (its contents are
// lost when it grows), in backend memory or, with memory::host, the backend's host memory.
template <typename T>
T* grow_buffer(backend& be, backend_buffer* b, size_t n,
               backend_buffer::memory m = backend_buffer::memory::backend) {
    const size_t bytes = (n ? n : 1) * sizeof(T);
    if (b->size() < bytes) *b = backend_buffer(be, bytes, m);
    return b->as<T>();
}

}  // namespace cacheblend
