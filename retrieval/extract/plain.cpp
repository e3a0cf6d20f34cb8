// Plain text, Markdown, CSV and JSON: the text as it is (Markdown and CSV markup is readable text
// and worth indexing). UTF-8 passes through; a UTF-16 BOM or libmagic's charset of non-UTF-8
// bytes (ISO-8859-x, Windows code pages) is converted with iconv; anything else is refused.
#include <cstring>

#include "core/util/error.h"
#include "retrieval/extract/charset.h"
#include "retrieval/extract/extractors.h"
#include "retrieval/extract/sniff.h"

namespace cacheblend {

namespace {

bool starts_with(std::string_view s, const char* p, size_t n) {
    return s.size() >= n && std::memcmp(s.data(), p, n) == 0;
}

void identity(std::string_view source, uint32_t base, extracted_text& out) {
    out.text.assign(source);
    out.src.resize(source.size());
    out.src_end.resize(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        out.src[i] = base + static_cast<uint32_t>(i);
        out.src_end[i] = base + static_cast<uint32_t>(i) + 1;
    }
}

// A charset libmagic names and iconv can convert (never "binary" or "unknown-8bit").
bool convertible(const std::string& cs) {
    return !cs.empty() && cs != "binary" && cs != "unknown-8bit" && cs != "utf-8" &&
           cs != "us-ascii";
}

}  // namespace

extracted_text extract_plain(std::string_view source, const extract_limits&) {
    extracted_text out;
    if (starts_with(source, "\xFF\xFE", 2) || starts_with(source, "\xFE\xFF", 2)) {
        const bool le = source[0] == '\xFF';
        convert_to_utf8(source.substr(2), 2, le ? "UTF-16LE" : "UTF-16BE", out);
    } else {
        uint32_t base = 0;
        if (starts_with(source, "\xEF\xBB\xBF", 3)) {
            base = 3;
            source.remove_prefix(3);
        }
        const size_t bad = find_invalid_utf8(source);
        if (bad == std::string_view::npos) {
            identity(source, base, out);
        } else {
            const std::string cs = sniff_content(source).charset;
            if (!convertible(cs)) {
                throw error(status::invalid_arg,
                            fmt("invalid UTF-8 at byte %zu (charset %s: not converted)", bad + base,
                                cs.empty() ? "unknown" : cs.c_str()));
            }
            convert_to_utf8(source, base, cs, out);
        }
    }
    const size_t nul = out.text.find('\0');
    if (nul != std::string::npos) {
        throw error(status::invalid_arg, fmt("NUL byte at offset %u (binary file?)",
                                             static_cast<unsigned>(out.src[nul])));
    }
    return out;
}

}  // namespace cacheblend
