#include "kernels/memory.h"

#include <cstdlib>
#if CBL_USE_MIMALLOC
#include <mimalloc.h>
#endif

namespace cacheblend {

void* aligned_malloc(size_t bytes, size_t alignment) {
    if (bytes == 0) bytes = alignment;
#if CBL_USE_MIMALLOC
    void* p = mi_malloc_aligned(bytes, alignment);
#else
    void* p = nullptr;
    if (posix_memalign(&p, alignment, bytes) != 0) p = nullptr;
#endif
    if (!p) throw std::bad_alloc();
    return p;
}

void aligned_free(void* p) noexcept {
#if CBL_USE_MIMALLOC
    mi_free(p);
#else
    std::free(p);
#endif
}

}  // namespace cacheblend
