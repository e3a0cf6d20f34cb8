// Host memory from a backend (backend::alloc_host: pinned on a GPU, so copies from it to the
// device run beside compute; ordinary aligned memory on the CPU), freed on destruction. The blend
// path's loader slots live in it.
#pragma once

#include <cstddef>

#include "core/engine/backend.h"

namespace cacheblend {

class host_block {
public:
    host_block() = default;
    host_block(backend& be, size_t bytes) : be_(&be), p_(be.alloc_host(bytes)), bytes_(bytes) {}
    ~host_block() { reset(); }
    host_block(host_block&& o) noexcept : be_(o.be_), p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
    host_block& operator=(host_block&& o) noexcept {
        if (this != &o) {
            reset();
            be_ = o.be_;
            p_ = o.p_;
            bytes_ = o.bytes_;
            o.p_ = nullptr;
        }
        return *this;
    }
    host_block(const host_block&) = delete;
    host_block& operator=(const host_block&) = delete;

    void reset() noexcept {
        if (p_) be_->free_host(p_);
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
};

// *b with room for n elements of T on `be` (its contents are lost when it grows).
template <typename T>
T* grow_host(backend& be, host_block* b, size_t n) {
    if (b->size() < n * sizeof(T)) *b = host_block(be, n * sizeof(T));
    return b->as<T>();
}

}  // namespace cacheblend
