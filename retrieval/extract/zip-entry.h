// One member of a zip archive in memory (DOCX and ODT are zip files), read with libzip and
// bounded: a member that inflates past the limit is refused, whatever its header claims, so a
// zip bomb costs at most `max_bytes` of memory and the time to inflate them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cacheblend {

// The bytes of member `name` of the zip `zip` (a `format` file, named in messages). Throws
// error(status::invalid_arg): "damaged docx: not a zip archive (...)", "damaged docx:
// word/document.xml is missing", "docx: word/document.xml inflates past N bytes (limit N:
// --max-file-size; a zip bomb?)". Without libzip: "unsupported file type (built without libzip)".
std::string read_zip_entry(std::string_view zip, const char* name, const char* format,
                           int64_t max_bytes);

}  // namespace cacheblend
