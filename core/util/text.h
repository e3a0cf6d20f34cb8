// Small text predicates shared by the request path and its front ends.
#pragma once

#include <string_view>

namespace cacheblend {

// Only spaces, tabs and line breaks (or nothing): such text tokenizes to nothing useful, so it
// cannot be a question or a prompt piece.
inline bool is_blank(std::string_view s) {
    return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace cacheblend
