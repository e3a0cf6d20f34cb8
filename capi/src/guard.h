// Entry-point guard: maps C++ exceptions to cbl_status plus a thread-local message
// (docs/ARCHITECTURE.md, 'C ABI'). Every exported function body runs inside CBL_API_GUARD.
#pragma once

#include <new>
#include <string>

#include "cacheblend.h"
#include "core/util/error.h"

namespace cacheblend::capi {

cbl_status set_error(cbl_status s, const std::string& msg) noexcept;

template <typename F>
cbl_status guard(const char* fn, F&& body) noexcept {
    try {
        return body();
    } catch (const cacheblend::error& e) {
        return set_error(static_cast<cbl_status>(e.code()), std::string(fn) + ": " + e.what());
    } catch (const std::bad_alloc&) {
        return set_error(CBL_NOMEM, std::string(fn) + ": out of memory");
    } catch (const std::exception& e) {
        return set_error(CBL_INTERNAL, std::string(fn) + ": internal error: " + e.what());
    } catch (...) {
        return set_error(CBL_INTERNAL, std::string(fn) + ": unknown internal error");
    }
}

}  // namespace cacheblend::capi

// Inside the body, cbl_fn is the exported function's name: __func__ there would name the
// lambda ("operator()"), so the init-capture takes it from the enclosing function instead.
#define CBL_API_GUARD(body)                                                                     \
    ::cacheblend::capi::guard(__func__, [&, cbl_fn = static_cast<const char*>(__func__)]() \
                                            -> cbl_status body)
