// iconv conversion to UTF-8 (charset.h).
#include "retrieval/extract/charset.h"

#include <iconv.h>

#include <cerrno>

#include "core/util/error.h"

namespace cacheblend {

namespace {

struct iconv_handle {
    iconv_t cd;
    ~iconv_handle() { iconv_close(cd); }
};

}  // namespace

void convert_to_utf8(std::string_view source, uint32_t base, const std::string& charset,
                     extracted_text& out) {
    iconv_t cd = iconv_open("UTF-8", charset.c_str());
    if (cd == reinterpret_cast<iconv_t>(-1)) {
        throw error(status::invalid_arg, "charset " + charset + " is not known to iconv");
    }
    const iconv_handle h{cd};
    // One character at a time (grown a byte at a time until iconv has a whole one), so every
    // output byte knows the source bytes it came from: citations stay byte ranges of the file.
    size_t at = 0;
    size_t len = 1;
    char buf[64];
    while (at < source.size()) {
        char* in = const_cast<char*>(source.data() + at);
        size_t in_left = len;
        char* o = buf;
        size_t o_left = sizeof buf;
        const size_t rc = iconv(cd, &in, &in_left, &o, &o_left);
        const size_t used = len - in_left;
        if (rc == static_cast<size_t>(-1) && errno == EINVAL && in_left == len &&
            at + len < source.size() && len < 8) {
            ++len;  // an incomplete character: give it another byte
            continue;
        }
        if (rc == static_cast<size_t>(-1) && errno != E2BIG && used == 0) {
            throw error(status::invalid_arg, fmt("invalid %s at byte %zu", charset.c_str(),
                                                 static_cast<size_t>(base) + at));
        }
        const size_t n = static_cast<size_t>(o - buf);
        const auto b = static_cast<uint32_t>(base + at);
        const auto e = static_cast<uint32_t>(base + at + (used ? used : len));
        out.text.append(buf, n);
        out.src.insert(out.src.end(), n, b);
        out.src_end.insert(out.src_end.end(), n, e);
        at += used ? used : len;
        len = 1;
    }
}

}  // namespace cacheblend
