// HTML through libxml2's HTML parser (SAX): the charset comes from a BOM or <meta> (libxml2's
// detection; undeclared non-UTF-8 bytes fall back to ISO-8859-1), every named and numeric entity
// is decoded, scripts, styles, templates and comments are dropped, block elements become line or
// paragraph breaks, and h1-h6 become the headings of the text that follows. Each text run and
// entity maps to its byte range in the source (xmlByteConsumed): byte for byte where the run is
// the source's own UTF-8, the whole run's range otherwise (entities, converted charsets).
#include <libxml/HTMLparser.h>

#include <climits>
#include <cstring>

#include "core/util/error.h"
#include "retrieval/extract/extractors.h"
#include "retrieval/extract/xml-util.h"

namespace cacheblend {

namespace {

bool is_html_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// 0: inline, 1: line break, 2: paragraph break.
int tag_break(const char* name) {
    static const char* const para[] = {"p",      "div",    "h1",         "h2",      "h3",
                                       "h4",     "h5",     "h6",         "section", "article",
                                       "header", "footer", "blockquote", "pre",     "table",
                                       "ul",     "ol",     "dl",         "hr",      "title",
                                       "main",   "nav",    "aside",      "figure",  "form",
                                       "body",   "html",   "head"};
    static const char* const line[] = {"br", "li", "tr", "dt", "dd", "option"};
    for (const char* t : para) {
        if (std::strcmp(name, t) == 0) return 2;
    }
    for (const char* t : line) {
        if (std::strcmp(name, t) == 0) return 1;
    }
    return 0;
}

bool is_skipped(const char* name) {
    return std::strcmp(name, "script") == 0 || std::strcmp(name, "style") == 0 ||
           std::strcmp(name, "noscript") == 0 || std::strcmp(name, "template") == 0;
}

bool is_heading(const char* name) {
    return name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && name[2] == '\0';
}

// Collects output bytes with their source ranges; whitespace collapses as HTML renders it (runs
// of spaces become one, block tags line or paragraph breaks).
class html_emitter {
public:
    explicit html_emitter(extracted_text& out) : out_(out) {}

    void text(std::string_view bytes, uint32_t begin, uint32_t end) {
        flush_pending();
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
    void flush_pending() {
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

struct html_state {
    std::string_view source;
    extracted_text& out;
    html_emitter em;
    htmlParserCtxtPtr ctxt = nullptr;
    uint32_t last = 0;  // source offset where the next text run may start
    int skip_depth = 0;
    int heading_depth = 0;
    size_t heading_begin = 0;
    std::string heading;

    html_state(std::string_view s, extracted_text& o) : source(s), out(o), em(o) {}

    // The parser's position in the source bytes (monotonic, clamped to the source).
    uint32_t pos() const {
        const long c = xmlByteConsumed(ctxt);
        if (c < 0) return last;
        const auto p =
            static_cast<uint32_t>(std::min<size_t>(static_cast<size_t>(c), source.size()));
        return std::max(p, last);
    }
};

html_state& state_of(void* ctx) {
    return *static_cast<html_state*>(static_cast<htmlParserCtxtPtr>(ctx)->_private);
}

size_t utf8_len(unsigned char u) { return u >= 0xF0 ? 4 : u >= 0xE0 ? 3 : u >= 0xC0 ? 2 : 1; }

void on_start(void* ctx, const xmlChar* name_x, const xmlChar**) {
    html_state& st = state_of(ctx);
    const char* name = reinterpret_cast<const char*>(name_x);
    const uint32_t at = st.pos();
    if (is_skipped(name)) ++st.skip_depth;
    if (const int b = tag_break(name)) {
        st.em.brk(b, at);
    } else if (std::strcmp(name, "td") == 0 || std::strcmp(name, "th") == 0) {
        st.em.space(at);
    }
    if (is_heading(name) && st.heading_depth++ == 0) {
        st.heading.clear();
        st.heading_begin = st.out.text.size();
    }
    // The parser reports a start tag while sitting on its '>': text begins after it.
    st.last = at < st.source.size() && st.source[at] == '>' ? at + 1 : at;
}

void on_end(void* ctx, const xmlChar* name_x) {
    html_state& st = state_of(ctx);
    const char* name = reinterpret_cast<const char*>(name_x);
    const uint32_t at = st.pos();
    if (is_skipped(name) && st.skip_depth > 0) --st.skip_depth;
    if (const int b = tag_break(name)) st.em.brk(b, at);
    if (is_heading(name) && st.heading_depth > 0 && --st.heading_depth == 0) {
        // The section starts at the heading's first character (after the pending breaks).
        size_t begin = st.heading_begin;
        while (begin < st.out.text.size() && is_html_space(st.out.text[begin])) ++begin;
        std::string h;
        for (char c : st.heading) {
            if (is_html_space(c)) {
                if (!h.empty() && h.back() != ' ') h += ' ';
            } else {
                h += c;
            }
        }
        while (!h.empty() && h.back() == ' ') h.pop_back();
        if (!h.empty() && begin < st.out.text.size()) {
            text_section s;
            s.begin = begin;
            s.heading = h;
            st.out.sections.push_back(std::move(s));
        }
    }
    st.last = at;
}

void on_text(void* ctx, const xmlChar* ch_x, int len) {
    html_state& st = state_of(ctx);
    const uint32_t end = st.pos();
    uint32_t begin = st.last;
    st.last = end;
    if (st.skip_depth > 0 || len <= 0) return;
    const std::string_view run(reinterpret_cast<const char*>(ch_x), static_cast<size_t>(len));
    if (st.heading_depth > 0) st.heading.append(run);
    // The run is the source's own bytes right before the parser's position: map byte for byte.
    const bool own =
        end - begin >= run.size() && st.source.compare(end - run.size(), run.size(), run) == 0;
    if (own) begin = end - static_cast<uint32_t>(run.size());
    for (size_t i = 0; i < run.size();) {
        const size_t n = std::min(utf8_len(static_cast<unsigned char>(run[i])), run.size() - i);
        const uint32_t b = own ? begin + static_cast<uint32_t>(i) : begin;
        const uint32_t e = own ? b + static_cast<uint32_t>(n) : end;
        if (is_html_space(run[i])) {
            st.em.space(b);
        } else if (run.compare(i, n, "\xC2\xA0") == 0) {
            st.em.space(b);  // &nbsp; is a space to a reader
        } else {
            st.em.text(run.substr(i, n), b, e);
        }
        i += n;
    }
}

void on_skip(void* ctx, const xmlChar*, int) { state_of(ctx).last = state_of(ctx).pos(); }
void on_comment(void* ctx, const xmlChar*) { state_of(ctx).last = state_of(ctx).pos(); }

}  // namespace

extracted_text extract_html(std::string_view source, const extract_limits&) {
    if (source.size() > static_cast<size_t>(INT_MAX)) {
        throw error(status::invalid_arg, "HTML too large for libxml2 (2 GiB)");
    }
    // A NUL byte in an HTML file without a UTF-16 BOM: not text (libxml2 would stop there).
    const bool utf16 = source.size() >= 2 && (source.compare(0, 2, "\xFF\xFE") == 0 ||
                                              source.compare(0, 2, "\xFE\xFF") == 0);
    const size_t nul = source.find('\0');
    if (!utf16 && nul != std::string_view::npos) {
        throw error(status::invalid_arg, fmt("NUL byte at offset %zu (binary file?)", nul));
    }
    const libxml_quiet quiet;
    extracted_text out;
    html_state st(source, out);
    st.ctxt = htmlCreateMemoryParserCtxt(source.data(), static_cast<int>(source.size()));
    if (!st.ctxt) throw error(status::nomem, "libxml2: cannot create an HTML parser");
    struct ctxt_free {
        htmlParserCtxtPtr c;
        ~ctxt_free() { htmlFreeParserCtxt(c); }
    } f{st.ctxt};
    htmlSAXHandler sax;
    std::memset(&sax, 0, sizeof sax);
    sax.startElement = on_start;
    sax.endElement = on_end;
    sax.characters = on_text;
    sax.ignorableWhitespace = on_text;
    sax.cdataBlock = on_skip;  // script and style bodies
    sax.comment = on_comment;
    std::memcpy(st.ctxt->sax, &sax, sizeof sax);
    st.ctxt->_private = &st;
    htmlCtxtUseOptions(st.ctxt, HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
                                    HTML_PARSE_NOIMPLIED);
    htmlParseDocument(st.ctxt);  // HTML is never "invalid": what it parsed is the text
    return out;
}

}  // namespace cacheblend
