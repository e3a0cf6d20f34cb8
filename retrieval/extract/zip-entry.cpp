// Bounded zip member reads with libzip (zip-entry.h).
#include "retrieval/extract/zip-entry.h"

#include <memory>

#include "core/util/error.h"

#if CBL_HAVE_LIBZIP
#include <zip.h>
#endif

namespace cacheblend {

#if CBL_HAVE_LIBZIP

namespace {

struct archive_closer {
    void operator()(zip_t* z) const { zip_discard(z); }  // read-only: nothing to write back
};
struct file_closer {
    void operator()(zip_file_t* f) const { zip_fclose(f); }
};

}  // namespace

std::string read_zip_entry(std::string_view zip, const char* name, const char* format,
                           int64_t max_bytes) {
    const std::string fmt_name = format;
    zip_error_t ze;
    zip_error_init(&ze);
    // The buffer is borrowed (freep = 0): `zip` outlives the archive.
    zip_source_t* src = zip_source_buffer_create(zip.data(), zip.size(), 0, &ze);
    if (!src) {
        zip_error_fini(&ze);
        throw error(status::nomem, "libzip: cannot create a source");
    }
    std::unique_ptr<zip_t, archive_closer> z(zip_open_from_source(src, ZIP_RDONLY, &ze));
    if (!z) {
        zip_source_free(src);
        const std::string why = zip_error_strerror(&ze);
        zip_error_fini(&ze);
        throw error(status::invalid_arg,
                    "damaged " + fmt_name + ": not a zip archive (" + why + ")");
    }
    zip_error_fini(&ze);
    std::unique_ptr<zip_file_t, file_closer> f(zip_fopen(z.get(), name, 0));
    if (!f) {
        const std::string why = zip_strerror(z.get());
        throw error(status::invalid_arg,
                    "damaged " + fmt_name + ": cannot open " + name + " (" + why + ")");
    }
    // Read what the data gives, never what the header claims, and stop one byte past the limit.
    std::string out;
    char buf[64 * 1024];
    for (;;) {
        const zip_int64_t n = zip_fread(f.get(), buf, sizeof buf);
        if (n < 0) {
            throw error(status::invalid_arg, "damaged " + fmt_name + ": cannot inflate " + name +
                                                 " (" + zip_file_strerror(f.get()) + ")");
        }
        if (n == 0) break;
        if (static_cast<int64_t>(out.size()) + n > max_bytes) {
            throw error(status::invalid_arg,
                        fmt("%s: %s inflates past %lld bytes (limit %lld: --max-file-size; a zip "
                            "bomb?)",
                            format, name, static_cast<long long>(max_bytes),
                            static_cast<long long>(max_bytes)));
        }
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

#else

std::string read_zip_entry(std::string_view, const char*, const char*, int64_t) {
    throw error(status::invalid_arg, "unsupported file type (built without libzip)");
}

#endif

}  // namespace cacheblend
