// The extractors behind extract_text() (retrieval/extract/extract.h), one per file, and what
// they share: text_builder appends text with its source ranges, sections and paragraph breaks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "retrieval/extract/extract.h"

namespace cacheblend {

extracted_text extract_plain(std::string_view source, const extract_limits& lim);  // plain.cpp
extracted_text extract_html(std::string_view source, const extract_limits& lim);   // html.cpp
extracted_text extract_pdf(std::string_view source, const extract_limits& lim);    // pdf.cpp
extracted_text extract_docx(std::string_view source, const extract_limits& lim);   // docx.cpp
extracted_text extract_odt(std::string_view source, const extract_limits& lim);    // odt.cpp

// Appends code point cp as UTF-8 (invalid ones as U+FFFD).
void append_utf8(uint32_t cp, std::string& out);

// Builds an extracted_text whose source offsets are offsets in the extracted text itself (PDF,
// DOCX, ODT: formats whose bytes are not text). Paragraphs are separated by one blank line.
class text_builder {
public:
    // Text of one paragraph (whitespace runs collapse to one space; empty ones are dropped).
    void paragraph(std::string_view text);
    // The paragraphs that follow are under this heading / on this page.
    void heading(std::string_view text);
    void page(int32_t n);
    bool empty() const { return out_.text.empty(); }
    extracted_text finish(bool paged);

private:
    void open_section();
    extracted_text out_;
    int32_t page_ = 0;
    std::string heading_;
    bool pending_section_ = false;
};

}  // namespace cacheblend
