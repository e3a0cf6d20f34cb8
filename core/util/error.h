// Internal error type. Status numbers are the C ABI's cbl_status values (docs/ARCHITECTURE.md, 'C
// ABI') so the capi guard can pass them through unchanged; core does not include the C header.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cacheblend {

enum class status : int32_t {
    ok = 0,
    error = 1,
    invalid_arg = 2,
    misuse = 3,
    nomem = 4,
    io = 5,
    corrupt = 6,
    format = 7,
    unsupported = 8,
    device = 9,
    aborted = 10,
    range = 11,
    catalog = 12,
    internal = 13,
    busy = 14,  // a runtime's request queue is full (runtime/request-gate.h)
    io_read = 5 | (1 << 8),
    io_write = 5 | (2 << 8),
};

class error : public std::runtime_error {
public:
    error(status s, const std::string& msg) : std::runtime_error(msg), status_(s) {}
    status code() const noexcept { return status_; }

private:
    status status_;
};

// printf-style message formatting for error sites: throw error(status::corrupt, fmt("...", ...)).
std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace cacheblend
