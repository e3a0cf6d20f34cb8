// Text in other charsets to UTF-8 with iconv, keeping each output byte's source range.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "retrieval/extract/extract.h"

namespace cacheblend {

// Appends `source` (in `charset`, an iconv name) to out.text as UTF-8; out.src/src_end get the
// source bytes of each character, offset by `base`. Throws error(status::invalid_arg) naming the
// byte offset when iconv does not know the charset or a byte sequence is invalid in it.
void convert_to_utf8(std::string_view source, uint32_t base, const std::string& charset,
                     extracted_text& out);

}  // namespace cacheblend
