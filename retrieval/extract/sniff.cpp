// Content sniffing with libmagic (sniff.h).
#include "retrieval/extract/sniff.h"

#include <magic.h>

#include <memory>

#include "core/util/error.h"

namespace cacheblend {

namespace {

struct magic_closer {
    void operator()(magic_set* m) const { magic_close(m); }
};

// A magic_t is not thread-safe: one per thread, loaded on first use (loading maps the database
// once, a few milliseconds).
magic_set* thread_magic() {
    thread_local std::unique_ptr<magic_set, magic_closer> m;
    if (m) return m.get();
    std::unique_ptr<magic_set, magic_closer> fresh(magic_open(MAGIC_MIME | MAGIC_ERROR));
    if (!fresh) throw error(status::nomem, "libmagic: magic_open failed");
    if (magic_load(fresh.get(), nullptr) != 0) {
        const char* e = magic_error(fresh.get());
        throw error(status::internal,
                    std::string("libmagic: cannot load its database: ") + (e ? e : "unknown"));
    }
    m = std::move(fresh);
    return m.get();
}

// Enough for libmagic's type tests; the charset of the whole file is asked for separately
// (plain.cpp) when its bytes are not UTF-8.
constexpr size_t k_sniff_bytes = 1 << 20;

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

content_type sniff_content(std::string_view data) {
    magic_set* m = thread_magic();
    const char* r = magic_buffer(m, data.data(), data.size());
    content_type out;
    if (!r) {
        out.mime = "application/octet-stream";
        return out;
    }
    const std::string s = r;  // "text/plain; charset=us-ascii"
    // The type ends at ';' (then the charset) or ',' (libmagic's notes, e.g. on short ELFs).
    out.mime = s.substr(0, s.find_first_of(";,"));
    const size_t cs = s.find("charset=");
    if (cs != std::string::npos) out.charset = s.substr(cs + 8);
    return out;
}

bool detect_kind(const std::string& path, std::string_view data, doc_kind* out, std::string* why) {
    if (doc_kind_from_path(path, out)) return true;
    const content_type t = sniff_content(data.substr(0, k_sniff_bytes));
    const std::string& m = t.mime;
    if (m == "text/html") {
        *out = doc_kind::html;
    } else if (m == "application/pdf") {
        *out = doc_kind::pdf;
    } else if (m == "application/vnd.openxmlformats-officedocument.wordprocessingml.document") {
        *out = doc_kind::docx;
    } else if (m == "application/vnd.oasis.opendocument.text") {
        *out = doc_kind::odt;
    } else if (m == "application/json") {
        *out = doc_kind::json;
    } else if (m == "text/csv") {
        *out = doc_kind::csv;
    } else if (starts_with(m, "text/") || m == "application/x-empty" || m == "inode/x-empty") {
        *out = doc_kind::text;  // empty files go on to say "empty document"
    } else {
        *why = "binary file (" + m + ")";
        return false;
    }
    return true;
}

}  // namespace cacheblend
