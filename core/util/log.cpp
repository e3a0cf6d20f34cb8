#include "core/util/log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace cacheblend {
namespace {

std::mutex g_mu;
log_sink g_fn = nullptr;
void* g_user = nullptr;

}  // namespace

void log_set_sink(log_sink fn, void* user) {
    std::lock_guard<std::mutex> lk(g_mu);
    g_fn = fn;
    g_user = user;
}

void log_write(log_level level, const char* format, ...) {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_fn) return;
    char buf[1024];
    va_list ap;
    va_start(ap, format);
    std::vsnprintf(buf, sizeof buf, format, ap);
    va_end(ap);
    g_fn(static_cast<int>(level), buf, g_user);
}

}  // namespace cacheblend
