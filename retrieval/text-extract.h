// Document text extraction for ingestion: .txt and .md pass through (Markdown markup is readable
// text and worth indexing), .html loses tags, comments, scripts and styles and has its entities
// decoded. Every extracted byte remembers where it came from in the source, so a chunk's citation
// points at the original file (byte offsets into the source, half-open [start, end)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cacheblend {

enum class doc_kind { text, markdown, html };

// By extension (case-insensitive): .txt/.text, .md/.markdown, .html/.htm. False when unsupported.
bool doc_kind_from_path(const std::string& path, doc_kind* out);

struct extracted_text {
    std::string text;
    // src[i] = offset in the source of the first byte that produced text[i] (size text.size()).
    std::vector<uint32_t> src;
    std::vector<uint32_t> src_end;  // src_end[i] = one past the last source byte of text[i]

    // Source range [source_begin(a), source_end(b)) of text[a, b), a < b.
    uint32_t source_begin(size_t a) const { return src[a]; }
    uint32_t source_end(size_t b) const { return b ? src_end[b - 1] : src[0]; }
};

// Offset of the first invalid UTF-8 byte (overlongs, surrogates and > U+10FFFF are invalid),
// or std::string_view::npos when the whole string is valid.
size_t find_invalid_utf8(std::string_view s);

// Throws cacheblend::error(status::invalid_arg) on invalid UTF-8 or NUL bytes (naming the byte
// offset) and on a source of 4 GiB or more (offsets are 32-bit). A leading UTF-8 BOM is skipped.
extracted_text extract_text(std::string_view source, doc_kind kind);

}  // namespace cacheblend
