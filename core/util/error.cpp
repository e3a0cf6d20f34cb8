#include "core/util/error.h"

#include <cstdarg>

#include "kernels/kernel-error.h"

namespace cacheblend {

std::string fmt(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    std::string out = kernel_vfmt(format, ap);
    va_end(ap);
    return out;
}

}  // namespace cacheblend
