// The extractor table, kinds by extension, UTF-8 checks and text_builder (extractors.h).
#include "retrieval/extract/extract.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/tokenizer/unicode.h"
#include "core/util/error.h"
#include "retrieval/extract/extractors.h"

namespace cacheblend {

namespace {

struct kind_entry {
    doc_kind kind;
    const char* name;
    const char* extensions[4];
    extracted_text (*extract)(std::string_view, const extract_limits&);
};

// The one interface: a kind, its name, its extensions and the function that extracts it.
const kind_entry k_kinds[] = {
    {doc_kind::text, "text", {".txt", ".text"}, extract_plain},
    {doc_kind::markdown, "markdown", {".md", ".markdown"}, extract_plain},
    {doc_kind::html, "html", {".html", ".htm", ".xhtml"}, extract_html},
    {doc_kind::pdf, "pdf", {".pdf"}, extract_pdf},
    {doc_kind::docx, "docx", {".docx"}, extract_docx},
    {doc_kind::odt, "odt", {".odt"}, extract_odt},
    {doc_kind::csv, "csv", {".csv", ".tsv"}, extract_plain},
    {doc_kind::json, "json", {".json", ".jsonl"}, extract_plain},
};

const kind_entry& entry(doc_kind k) {
    for (const kind_entry& e : k_kinds) {
        if (e.kind == k) return e;
    }
    return k_kinds[0];
}

bool ends_with_ci(const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    if (s.size() < n) return false;
    for (size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(s[s.size() - n + i]);
        if (std::tolower(c) != suffix[i]) return false;
    }
    return true;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

}  // namespace

const char* doc_kind_name(doc_kind k) { return entry(k).name; }

bool doc_kind_from_path(const std::string& path, doc_kind* out) {
    for (const kind_entry& e : k_kinds) {
        for (const char* ext : e.extensions) {
            if (ext && ends_with_ci(path, ext)) {
                *out = e.kind;
                return true;
            }
        }
    }
    return false;
}

const text_section* extracted_text::section_at(size_t at) const {
    const auto it = std::upper_bound(sections.begin(), sections.end(), at,
                                     [](size_t a, const text_section& s) { return a < s.begin; });
    return it == sections.begin() ? nullptr : &*(it - 1);
}

std::vector<size_t> extracted_text::page_starts() const {
    std::vector<size_t> out;
    if (!paged) return out;
    for (const text_section& s : sections) out.push_back(s.begin);
    return out;
}

size_t find_invalid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (i + len > n) return i;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
            return i;
        }
        i += len;
    }
    return std::string_view::npos;
}

void append_utf8(uint32_t cp, std::string& out) {
    // NUL, surrogates and values past U+10FFFF have no place in extracted text: U+FFFD instead.
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    unicode::utf8_append(out, cp);
}

void text_builder::open_section() {
    if (!pending_section_) return;
    pending_section_ = false;
    text_section s;
    s.begin = out_.text.size();
    s.page = page_;
    s.heading = heading_;
    // Two changes at one offset (a page that opens with a heading): the later one wins.
    if (!out_.sections.empty() && out_.sections.back().begin == s.begin) {
        out_.sections.back() = std::move(s);
    } else {
        out_.sections.push_back(std::move(s));
    }
}

void text_builder::paragraph(std::string_view raw) {
    // Libraries hand over what the file holds: bad UTF-8 becomes U+FFFD, never an error.
    std::string text;
    while (!raw.empty()) {
        const size_t bad = find_invalid_utf8(raw);
        text.append(raw.substr(0, bad));
        if (bad == std::string_view::npos) break;
        append_utf8(0xFFFD, text);
        raw.remove_prefix(bad + 1);
    }
    std::string clean;
    bool space = false;
    for (char c : text) {
        if (is_space(c) || c == '\0') {
            space = !clean.empty();
            continue;
        }
        if (space) clean += ' ';
        space = false;
        clean += c;
    }
    if (clean.empty()) return;
    if (!out_.text.empty()) out_.text += "\n\n";
    open_section();
    out_.text += clean;
}

void text_builder::heading(std::string_view text) {
    heading_.clear();
    for (char c : text) {
        if (is_space(c)) {
            if (!heading_.empty() && heading_.back() != ' ') heading_ += ' ';
        } else {
            heading_ += c;
        }
    }
    while (!heading_.empty() && heading_.back() == ' ') heading_.pop_back();
    pending_section_ = true;
    paragraph(text);  // a heading is text too (searchable, and the start of its section)
}

void text_builder::page(int32_t n) {
    page_ = n;
    pending_section_ = true;
}

extracted_text text_builder::finish(bool paged) {
    out_.paged = paged;
    const size_t n = out_.text.size();
    out_.src.resize(n);
    out_.src_end.resize(n);
    for (size_t i = 0; i < n; ++i) {
        out_.src[i] = static_cast<uint32_t>(i);
        out_.src_end[i] = static_cast<uint32_t>(i + 1);
    }
    return std::move(out_);
}

extracted_text extract_text(std::string_view source, doc_kind kind, const extract_limits& lim) {
    if (source.size() >= (uint64_t(1) << 32) - 1) {
        throw error(status::invalid_arg,
                    fmt("document of %zu bytes is too large (limit 4 GiB)", source.size()));
    }
    extracted_text out = entry(kind).extract(source, lim);
    const size_t bad = find_invalid_utf8(out.text);
    if (bad != std::string::npos) {  // an extractor's bug; still only this file is skipped
        throw error(status::invalid_arg,
                    fmt("%s extractor produced invalid UTF-8 at byte %zu", entry(kind).name, bad));
    }
    return out;
}

}  // namespace cacheblend
