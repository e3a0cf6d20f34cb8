// What a file holds, by its extension or else by its content (libmagic): extensionless text files
// (README, LICENSE, /usr/share/common-licenses/*) are read, binaries refused with their type.
#pragma once

#include <string>
#include <string_view>

#include "retrieval/extract/extract.h"

namespace cacheblend {

struct content_type {
    std::string mime;     // e.g. "text/plain", "application/pdf"
    std::string charset;  // libmagic's: "us-ascii", "utf-8", "iso-8859-1", "unknown-8bit", ...
};

// libmagic's verdict on these bytes. Throws error(status::internal) when libmagic cannot load
// its database.
content_type sniff_content(std::string_view data);

// The kind of the file at `path` holding `data`: by extension when it names a format, else by
// content. False with the reason to skip it, e.g. "binary file (application/octet-stream)".
bool detect_kind(const std::string& path, std::string_view data, doc_kind* out, std::string* why);

}  // namespace cacheblend
