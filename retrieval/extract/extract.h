// Document text extraction for ingestion (docs/ARCHITECTURE.md, 'Ingest path'): one extractor
// per format behind extract_text(), each in its own file in retrieval/extract/ and each built on
// a maintained library rather than a hand parser:
//   text, markdown, csv, json  plain.cpp (UTF-8 as is; other charsets converted by charset.cpp)
//   html                       html.cpp (libxml2's HTML parser: charset from BOM/meta, entities)
//   pdf                        pdf.cpp (poppler-cpp, page by page)
//   docx, odt                  docx.cpp, odt.cpp (libzip + libxml2, paragraphs and headings)
// sniff.cpp picks the kind of a file (extension, else libmagic's content type) and refuses
// binaries. Every extracted byte remembers where it came from, so a chunk's citation points into
// the original: byte offsets of the source for text formats (HTML: of the text run or entity
// that produced it), offsets in the extracted text for PDF, DOCX and ODT (their bytes are
// compressed), plus the page (PDF) and the nearest preceding heading (HTML, DOCX, ODT).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cacheblend {

enum class doc_kind { text, markdown, html, pdf, docx, odt, csv, json };

// "text", "markdown", "html", "pdf", "docx", "odt", "csv", "json" (the catalog's metadata kind).
const char* doc_kind_name(doc_kind k);

// By extension (case-insensitive): .txt/.text, .md/.markdown, .html/.htm/.xhtml, .pdf, .docx,
// .odt, .csv/.tsv, .json/.jsonl. False when the extension says nothing (sniff the content).
bool doc_kind_from_path(const std::string& path, doc_kind* out);

// From text byte `begin` up to the next section's begin, the text is on `page` under `heading`.
struct text_section {
    size_t begin = 0;
    int32_t page = 0;     // 1-based; 0: the format has no pages
    std::string heading;  // nearest preceding heading; "": none
};

struct extracted_text {
    std::string text;  // valid UTF-8 without NUL bytes
    // src[i] = offset in the source of the first byte that produced text[i] (size text.size()).
    std::vector<uint32_t> src;
    std::vector<uint32_t> src_end;       // src_end[i] = one past the last source byte of text[i]
    std::vector<text_section> sections;  // sorted by begin; empty: no pages, no headings
    // Page boundaries (section begins) are hard cuts: no chunk may span two pages (PDF).
    bool paged = false;

    // Source range [source_begin(a), source_end(b)) of text[a, b), a < b.
    uint32_t source_begin(size_t a) const { return src[a]; }
    uint32_t source_end(size_t b) const { return b ? src_end[b - 1] : src[0]; }
    // The section holding text byte `at`, or nullptr before the first one.
    const text_section* section_at(size_t at) const;
    // Text offsets where a new page starts (paged documents; empty otherwise).
    std::vector<size_t> page_starts() const;
};

struct extract_limits {
    // Bytes any decompressed part may have (DOCX/ODT XML inside the zip): a zip bomb stops here.
    int64_t max_bytes = 16ll << 20;
    // Called between pages and parts; may throw to stop a slow document (time limits).
    std::function<void()> check;
};

// Offset of the first invalid UTF-8 byte (overlongs, surrogates and > U+10FFFF are invalid),
// or std::string_view::npos when the whole string is valid.
size_t find_invalid_utf8(std::string_view s);

// The text of a document of this kind. Throws cacheblend::error(status::invalid_arg) with the
// reason a file is skipped (bad or unconvertible encoding, NUL bytes, a corrupt or encrypted
// PDF, a damaged or oversized DOCX/ODT, 4 GiB or more, and "unsupported file type (built
// without poppler)" when the library was built without the format's library).
extracted_text extract_text(std::string_view source, doc_kind kind, const extract_limits& lim = {});

}  // namespace cacheblend
