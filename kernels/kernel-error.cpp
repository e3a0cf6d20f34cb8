#include "kernels/kernel-error.h"

#include <cstdio>

namespace cacheblend {

std::string kernel_vfmt(const char* format, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    const int n = std::vsnprintf(nullptr, 0, format, ap);
    std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
    if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, ap2);
    va_end(ap2);
    return out;
}

std::string kernel_fmt(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    std::string out = kernel_vfmt(format, ap);
    va_end(ap);
    return out;
}

}  // namespace cacheblend
