// PDF with poppler-cpp: the text of each page, in reading order, one section per page so every
// chunk knows its page. The document is parsed from the bytes the walk already read (through the
// opened, checked file descriptor), never reopened by name. Corrupt and encrypted files are
// refused with a reason; a PDF without a text layer (a scan) says so.
#include <climits>
#include <memory>
#include <mutex>

#include "core/util/error.h"
#include "retrieval/extract/extractors.h"

#if CBL_HAVE_POPPLER
#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>
#endif

namespace cacheblend {

#if CBL_HAVE_POPPLER

namespace {

// poppler prints its parse errors to stderr unless told otherwise; a library must not print.
void quiet(const std::string&, void*) {}

void silence_poppler() {
    static std::once_flag once;
    std::call_once(once, [] { poppler::set_debug_error_function(quiet, nullptr); });
}

}  // namespace

extracted_text extract_pdf(std::string_view source, const extract_limits& lim) {
    silence_poppler();
    if (source.size() > static_cast<size_t>(INT_MAX)) {
        throw error(status::invalid_arg, "PDF too large for poppler (2 GiB)");
    }
    std::unique_ptr<poppler::document> doc(
        poppler::document::load_from_raw_data(source.data(), static_cast<int>(source.size())));
    if (!doc) throw error(status::invalid_arg, "corrupt PDF (poppler cannot parse it)");
    if (doc->is_locked()) {
        throw error(status::invalid_arg, "encrypted PDF (a password is needed to read it)");
    }
    text_builder b;
    const int n = doc->pages();
    for (int i = 0; i < n; ++i) {
        if (lim.check) lim.check();
        const std::unique_ptr<poppler::page> page(doc->create_page(i));
        if (!page) continue;
        const poppler::byte_array utf8 = page->text().to_utf8();
        b.page(i + 1);
        // Paragraphs are not marked in a PDF: a blank line (or a form feed) ends one; the
        // lines within it join with spaces.
        const std::string_view text(utf8.data(), utf8.size());
        size_t at = 0;
        for (;;) {
            size_t end = text.find("\n\n", at);
            const size_t ff = text.find('\f', at);
            if (ff < end) end = ff;
            b.paragraph(text.substr(at, end == std::string_view::npos ? end : end - at));
            if (end == std::string_view::npos) break;
            at = end + 1;
        }
    }
    if (b.empty()) {
        throw error(status::invalid_arg,
                    n > 0 ? fmt("empty document (no text on its %d pages: a scan without a text "
                                "layer?)",
                                n)
                          : std::string("corrupt PDF (no pages)"));
    }
    return b.finish(true);
}

#else

extracted_text extract_pdf(std::string_view, const extract_limits&) {
    throw error(status::invalid_arg, "unsupported file type (built without poppler)");
}

#endif

}  // namespace cacheblend
