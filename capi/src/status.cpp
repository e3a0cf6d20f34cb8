#include <atomic>
#include <mutex>
#include <string>

#include "capi/src/guard.h"
#include "kernels/backend-registry.h"

namespace cacheblend::capi {
namespace {

thread_local std::string t_message;
thread_local cbl_status t_status = CBL_OK;

}  // namespace

cbl_status set_error(cbl_status s, const std::string& msg) noexcept {
    try {
        t_message = msg;
    } catch (...) {
        t_message.clear();  // out of memory while recording: keep the status at least
    }
    t_status = s;
    return s;
}

}  // namespace cacheblend::capi

extern "C" {

const char* cbl_last_error(void) { return cacheblend::capi::t_message.c_str(); }
cbl_status cbl_last_status(void) { return cacheblend::capi::t_status; }

const char* cbl_status_str(cbl_status s) {
    switch (s & 0xff) {
        case CBL_OK: return "ok";
        case CBL_ERROR: return "error";
        case CBL_INVALID_ARG: return "invalid argument";
        case CBL_MISUSE: return "misuse";
        case CBL_NOMEM: return "out of memory";
        case CBL_IO: return "i/o error";
        case CBL_CORRUPT: return "corrupt data";
        case CBL_FORMAT: return "unknown format";
        case CBL_UNSUPPORTED: return "unsupported";
        case CBL_DEVICE: return "device error";
        case CBL_ABORTED: return "aborted";
        case CBL_RANGE: return "out of range";
        case CBL_CATALOG: return "catalog error";
        case CBL_INTERNAL: return "internal error";
        case CBL_BUSY: return "busy";
        default: return "unknown status";
    }
}

int32_t cbl_version_number(void) { return CBL_VERSION_NUMBER; }
const char* cbl_version_string(void) { return CBL_VERSION_STRING; }

const char* cbl_build_info(void) {
    static const std::string info = [] {
        const cacheblend::backend_build_facts b = cacheblend::backend_build_info();
        return "cpu_isa=" + b.cpu_isa + " mimalloc=" + (CBL_USE_MIMALLOC ? "1" : "0") +
               " cuda=" + (b.cuda ? "1" : "0");
    }();
    return info.c_str();
}

}  // extern "C"
