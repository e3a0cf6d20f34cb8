// The kernels' own error: kernels/ includes nothing from core/, so a backend throws this and the
// engine's backend adapter (core/engine/checked-backend.cpp) turns it into cacheblend::error with
// the status of the same name (docs/ARCHITECTURE.md, 'Backends').
#pragma once

#include <cstdarg>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace cacheblend {

// The failures a backend can report; core maps each to its status (core/util/error.h).
enum class kernel_status : int32_t {
    error,        // anything else
    invalid_arg,  // an op's arguments do not fit (shapes, strides)
    nomem,        // host memory
    unsupported,  // a weight type, shape or device this build or backend does not handle
    device,       // the device failed, is missing or is unusable
    device_oom,   // out of device memory
    range,        // a size past what the device can launch
    internal,     // a bug
};

class kernel_error : public std::runtime_error {
public:
    kernel_error(kernel_status s, const std::string& msg) : std::runtime_error(msg), status_(s) {}
    kernel_status code() const noexcept { return status_; }

private:
    kernel_status status_;
};

// printf-style messages for kernel error sites (core's fmt() is the same function).
std::string kernel_fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string kernel_vfmt(const char* format, va_list ap);

}  // namespace cacheblend
