#include "retrieval/text-extract.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/util/error.h"

namespace cacheblend {

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

void append_utf8(uint32_t cp, std::string& out) {
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Collects output bytes with their source ranges; whitespace is collapsed (HTML rendering rules:
// runs of spaces become one, block tags become line or paragraph breaks).
class html_emitter {
public:
    explicit html_emitter(extracted_text& out) : out_(out) {}

    void text(std::string_view bytes, uint32_t begin, uint32_t end) {
        flush_pending(begin);
        for (char c : bytes) push(c, begin, end);
    }
    void space(uint32_t at) {
        if (!out_.text.empty() && breaks_ == 0) {
            if (!space_) space_at_ = at;
            space_ = true;
        }
    }
    void brk(int n, uint32_t at) {
        if (out_.text.empty()) return;
        if (n > breaks_) {
            breaks_ = n;
            break_at_ = at;
        }
        space_ = false;
    }

private:
    void flush_pending(uint32_t at) {
        if (breaks_ > 0) {
            for (int i = 0; i < breaks_; ++i) push('\n', break_at_, break_at_ + 1);
        } else if (space_) {
            push(' ', space_at_, space_at_ + 1);
        }
        breaks_ = 0;
        space_ = false;
    }
    void push(char c, uint32_t begin, uint32_t end) {
        out_.text += c;
        out_.src.push_back(begin);
        out_.src_end.push_back(end);
    }

    extracted_text& out_;
    bool space_ = false;
    uint32_t space_at_ = 0;
    int breaks_ = 0;
    uint32_t break_at_ = 0;
};

bool is_html_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// 0: inline, 1: line break, 2: paragraph break.
int tag_break(const std::string& name) {
    static const char* const para[] = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6",
                                       "section", "article", "header", "footer", "blockquote",
                                       "pre", "table", "ul", "ol", "dl", "hr", "title", "main",
                                       "nav", "aside", "figure", "form", "body", "html", "head"};
    static const char* const line[] = {"br", "li", "tr", "dt", "dd", "td", "th", "option"};
    for (const char* t : para) {
        if (name == t) return 2;
    }
    for (const char* t : line) {
        if (name == t) return 1;
    }
    return 0;
}

bool decode_entity(std::string_view s, size_t i, size_t* len, std::string& out) {
    // s[i] == '&'; entities end with ';' within a short window.
    const size_t semi = s.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12 || semi == i + 1) return false;
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    *len = semi - i + 1;
    if (name[0] == '#') {
        uint32_t cp = 0;
        const bool hex = name.size() > 1 && (name[1] == 'x' || name[1] == 'X');
        const size_t from = hex ? 2 : 1;
        if (from >= name.size()) return false;
        for (size_t k = from; k < name.size(); ++k) {
            const char c = name[k];
            int d;
            if (c >= '0' && c <= '9') {
                d = c - '0';
            } else if (hex && std::isxdigit(static_cast<unsigned char>(c))) {
                d = std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
            } else {
                return false;
            }
            cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
            if (cp > 0x10FFFF) cp = 0x110000;  // saturate; becomes U+FFFD
        }
        append_utf8(cp, out);
        return true;
    }
    static const struct {
        const char* name;
        uint32_t cp;
    } named[] = {{"amp", '&'},     {"lt", '<'},       {"gt", '>'},      {"quot", '"'},
                 {"apos", '\''},   {"nbsp", ' '},     {"mdash", 0x2014}, {"ndash", 0x2013},
                 {"hellip", 0x2026}, {"copy", 0xA9},  {"reg", 0xAE},    {"rsquo", 0x2019},
                 {"lsquo", 0x2018}, {"rdquo", 0x201D}, {"ldquo", 0x201C}, {"eacute", 0xE9}};
    for (const auto& e : named) {
        if (name == e.name) {
            append_utf8(e.cp, out);
            return true;
        }
    }
    return false;
}

// Skips to just past the '>' closing a tag that starts at i (quoted attribute values may hold
// '>'); returns s.size() for an unterminated tag.
size_t skip_tag(std::string_view s, size_t i) {
    char quote = 0;
    for (size_t k = i + 1; k < s.size(); ++k) {
        const char c = s[k];
        if (quote) {
            if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
            quote = c;
        } else if (c == '>') {
            return k + 1;
        }
    }
    return s.size();
}

size_t find_ci(std::string_view s, const std::string& needle, size_t from) {
    for (size_t k = from; k + needle.size() <= s.size(); ++k) {
        bool eq = true;
        for (size_t j = 0; j < needle.size() && eq; ++j) {
            eq = std::tolower(static_cast<unsigned char>(s[k + j])) == needle[j];
        }
        if (eq) return k;
    }
    return std::string_view::npos;
}

void extract_html(std::string_view s, uint32_t base, extracted_text& out) {
    html_emitter em(out);
    size_t i = 0;
    while (i < s.size()) {
        const char c = s[i];
        const uint32_t at = base + static_cast<uint32_t>(i);
        if (c == '<') {
            if (s.compare(i, 4, "<!--") == 0) {
                const size_t e = s.find("-->", i + 4);
                i = e == std::string_view::npos ? s.size() : e + 3;
                continue;
            }
            size_t k = i + 1;
            const bool closing = k < s.size() && s[k] == '/';
            if (closing) ++k;
            std::string name;
            while (k < s.size() && std::isalnum(static_cast<unsigned char>(s[k]))) {
                name += static_cast<char>(std::tolower(static_cast<unsigned char>(s[k])));
                ++k;
            }
            if (name.empty() && !(k < s.size() && (s[k] == '!' || s[k] == '?'))) {
                em.text("<", at, at + 1);  // a lone '<' in text
                ++i;
                continue;
            }
            i = skip_tag(s, i);
            if (!closing && (name == "script" || name == "style" || name == "noscript" ||
                             name == "template")) {
                const size_t e = find_ci(s, "</" + name, i);
                i = e == std::string_view::npos ? s.size() : skip_tag(s, e);
            }
            const int b = tag_break(name);
            if (b) {
                em.brk(b, at);
            } else if (name == "td" || name == "th") {
                em.space(at);
            }
            continue;
        }
        if (c == '&') {
            std::string dec;
            size_t len = 0;
            if (decode_entity(s, i, &len, dec)) {
                if (dec == " ") {
                    em.space(at);
                } else {
                    em.text(dec, at, at + static_cast<uint32_t>(len));
                }
                i += len;
                continue;
            }
        }
        if (is_html_space(c)) {
            em.space(at);
            ++i;
            continue;
        }
        // A whole UTF-8 sequence at once, so citations never split a character.
        size_t n = 1;
        const unsigned char u = static_cast<unsigned char>(c);
        if (u >= 0xF0) {
            n = 4;
        } else if (u >= 0xE0) {
            n = 3;
        } else if (u >= 0xC0) {
            n = 2;
        }
        n = std::min(n, s.size() - i);
        em.text(s.substr(i, n), at, at + static_cast<uint32_t>(n));
        i += n;
    }
}

}  // namespace

bool doc_kind_from_path(const std::string& path, doc_kind* out) {
    const std::string p = lower(path);
    if (ends_with(p, ".txt") || ends_with(p, ".text")) {
        *out = doc_kind::text;
    } else if (ends_with(p, ".md") || ends_with(p, ".markdown")) {
        *out = doc_kind::markdown;
    } else if (ends_with(p, ".html") || ends_with(p, ".htm")) {
        *out = doc_kind::html;
    } else {
        return false;
    }
    return true;
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

extracted_text extract_text(std::string_view source, doc_kind kind) {
    if (source.size() >= (uint64_t(1) << 32) - 1) {
        throw error(status::invalid_arg,
                    fmt("document of %zu bytes is too large (limit 4 GiB)", source.size()));
    }
    const size_t bad = find_invalid_utf8(source);
    if (bad != std::string_view::npos) {
        throw error(status::invalid_arg, fmt("invalid UTF-8 at byte %zu", bad));
    }
    const size_t nul = source.find('\0');
    if (nul != std::string_view::npos) {
        throw error(status::invalid_arg, fmt("NUL byte at offset %zu (binary file?)", nul));
    }
    uint32_t base = 0;
    if (source.size() >= 3 && source.compare(0, 3, "\xEF\xBB\xBF") == 0) {
        base = 3;
        source.remove_prefix(3);
    }
    extracted_text out;
    if (kind == doc_kind::html) {
        out.text.reserve(source.size() / 2);
        extract_html(source, base, out);
        return out;
    }
    out.text.assign(source);
    out.src.resize(source.size());
    out.src_end.resize(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        out.src[i] = base + static_cast<uint32_t>(i);
        out.src_end[i] = base + static_cast<uint32_t>(i) + 1;
    }
    return out;
}

}  // namespace cacheblend
