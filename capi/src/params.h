// Sized structs across the ABI (docs/ARCHITECTURE.md, 'C ABI'): the library reads min(struct_size,
// sizeof(ours)) of a caller's params, so an older, smaller struct gets defaults for the fields it
// lacks, and a newer, larger one is refused (CBL_UNSUPPORTED) only when it sets a field this
// library does not know. Output structs are written the same way: only the bytes the caller's
// struct has.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "capi/src/guard.h"

namespace cacheblend::capi {

// A struct_size past CBL_MAX_STRUCT_SIZE is garbage (or a struct from far in the future): refused
// before the trailing-bytes scan or the copy reads past the caller's struct.
inline cbl_status too_big(const char* fn, const char* what, size_t size) {
    return set_error(CBL_INVALID_ARG, std::string(fn) + ": " + what + " struct_size " +
                                          std::to_string(size) + " is above CBL_MAX_STRUCT_SIZE (" +
                                          std::to_string(CBL_MAX_STRUCT_SIZE) + ")");
}

// *out = defaults (init), then the caller's known prefix. NULL in = all defaults.
template <typename T>
cbl_status read_params(const char* fn, const T* in, T* out, void (*init)(T*)) {
    init(out);
    if (!in) return CBL_OK;
    if (in->struct_size < sizeof(size_t)) {
        return set_error(CBL_INVALID_ARG, std::string(fn) + ": params.struct_size is not set " +
                                              "(call the params' _init() helper first)");
    }
    if (in->struct_size > CBL_MAX_STRUCT_SIZE) return too_big(fn, "params", in->struct_size);
    const size_t n = in->struct_size < sizeof(T) ? in->struct_size : sizeof(T);
    std::memcpy(static_cast<void*>(out), in, n);
    const auto* bytes = reinterpret_cast<const unsigned char*>(in);
    for (size_t i = sizeof(T); i < in->struct_size; ++i) {
        if (bytes[i] != 0) {
            return set_error(CBL_UNSUPPORTED,
                             std::string(fn) + ": params set fields this library does not know " +
                                 "(it is older than the header the caller was built with)");
        }
    }
    out->struct_size = sizeof(T);
    return CBL_OK;
}

// Copies the part of `ours` that the caller's output struct has room for.
template <typename T>
cbl_status write_out(const char* fn, const T& ours, T* out) {
    if (out->struct_size < sizeof(size_t)) {
        return set_error(CBL_INVALID_ARG, std::string(fn) + ": output struct_size is not set " +
                                              "(call its _init() helper first)");
    }
    if (out->struct_size > CBL_MAX_STRUCT_SIZE) return too_big(fn, "output", out->struct_size);
    const size_t caller = out->struct_size;
    const size_t n = caller < sizeof(T) ? caller : sizeof(T);
    std::memcpy(static_cast<void*>(out), &ours, n);
    out->struct_size = caller;
    return CBL_OK;
}

// A NUL-terminated copy the caller releases with cbl_free (which is free()).
inline char* malloc_copy(const std::string& s) {
    auto* p = static_cast<char*>(std::malloc(s.size() + 1));
    if (!p) throw std::bad_alloc();
    std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

inline cbl_status invalid(const char* fn, const std::string& what) {
    return set_error(CBL_INVALID_ARG, std::string(fn) + ": " + what);
}

}  // namespace cacheblend::capi
