// Aligned scratch and heap buffers for kernels and the engine. mimalloc backs them when the build
// enables it (CBL_USE_MIMALLOC); sanitizer builds use the system allocator so ASan sees the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace cacheblend {

void* aligned_malloc(size_t bytes, size_t alignment = 64);  // throws std::bad_alloc
void aligned_free(void* p) noexcept;

struct aligned_deleter {
    void operator()(void* p) const noexcept { aligned_free(p); }
};

// A typed, 64-byte-aligned, uninitialised array that owns its memory.
template <typename T>
class aligned_array {
public:
    aligned_array() = default;
    explicit aligned_array(size_t n) { resize(n); }
    void resize(size_t n) {
        if (n <= cap_) { n_ = n; return; }
        ptr_.reset(static_cast<T*>(aligned_malloc(n * sizeof(T) + 64)));
        n_ = cap_ = n;
    }
    T* data() noexcept { return ptr_.get(); }
    const T* data() const noexcept { return ptr_.get(); }
    size_t size() const noexcept { return n_; }
    T& operator[](size_t i) noexcept { return ptr_.get()[i]; }
    const T& operator[](size_t i) const noexcept { return ptr_.get()[i]; }

private:
    std::unique_ptr<T, aligned_deleter> ptr_;
    size_t n_ = 0, cap_ = 0;
};

}  // namespace cacheblend
