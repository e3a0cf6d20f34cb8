#include "core/util/error.h"

#include <cstdarg>
#include <cstdio>

namespace cacheblend {

std::string fmt(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    va_list ap2;
    va_copy(ap2, ap);
    const int n = std::vsnprintf(nullptr, 0, format, ap);
    va_end(ap);
    std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
    if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, ap2);
    va_end(ap2);
    return out;
}

}  // namespace cacheblend
