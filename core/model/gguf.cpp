// GGUF reader. The whole file is validated once at open time (every count, length, offset and
// tensor extent), so the getters can walk the mapped bytes afterwards without re-checking.
// Layout: reference/gguf-and-llama-facts.md §1. Only little-endian files are read.
// This file maps the file and answers the getters; the validation pass is gguf-parse.cpp, the
// state both share gguf-impl.h.
#include "core/model/gguf.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/model/gguf-impl.h"

namespace cacheblend {

using namespace gguf_detail;

namespace {

// Streaming 64-bit hash, word at a time (murmur-style mixing). Not cryptographic: it only has to
// tell model files apart deterministically and cheaply.
class hasher {
public:
    void update(const uint8_t* p, size_t n) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) word(load<uint64_t>(p + i));
        uint64_t tail = 0;
        for (size_t k = 0; i + k < n; ++k) tail |= static_cast<uint64_t>(p[i + k]) << (8 * k);
        word(tail ^ (static_cast<uint64_t>(n & 7) << 59));
    }
    void update_u64(uint64_t v) { word(v); }
    uint64_t finish() const {
        uint64_t x = h_;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        x ^= x >> 33;
        return x;
    }

private:
    void word(uint64_t w) {
        w *= 0x87c37b91114253d5ULL;
        w = (w << 31) | (w >> 33);
        w *= 0x4cf5ad432745937fULL;
        h_ ^= w;
        h_ = ((h_ << 27) | (h_ >> 37)) * 5 + 0x52dce729;
    }
    uint64_t h_ = 0x6a09e667f3bcc908ULL;
};

}  // namespace

const char* gguf_type_name(gguf_value_type t) {
    switch (t) {
        case gguf_value_type::u8: return "u8";
        case gguf_value_type::i8: return "i8";
        case gguf_value_type::u16: return "u16";
        case gguf_value_type::i16: return "i16";
        case gguf_value_type::u32: return "u32";
        case gguf_value_type::i32: return "i32";
        case gguf_value_type::f32: return "f32";
        case gguf_value_type::boolean: return "bool";
        case gguf_value_type::string: return "string";
        case gguf_value_type::array: return "array";
        case gguf_value_type::u64: return "u64";
        case gguf_value_type::i64: return "i64";
        case gguf_value_type::f64: return "f64";
    }
    return "unknown";
}

// ---- gguf_file ----

gguf_file::gguf_file() : impl_(std::make_unique<impl>()) {}
gguf_file::~gguf_file() = default;

std::unique_ptr<gguf_file> gguf_file::open(const std::string& path) {
    std::unique_ptr<gguf_file> f(new gguf_file());
    impl& m = *f->impl_;
    m.path = path;
    // O_NONBLOCK: opening a FIFO given as a model must not wait for a writer (it is then
    // refused below as not a regular file).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) m.fail(status::io, fmt("open: %s", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        m.fail(status::io, fmt("fstat: %s", std::strerror(e)));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        m.fail(status::io, "not a regular file");
    }
    m.size = static_cast<size_t>(st.st_size);
    if (m.size > 0) {
        void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            m.fail(status::io, fmt("mmap %zu B: %s", m.size, std::strerror(e)));
        }
        m.map = p;
        m.map_len = m.size;
        m.base = static_cast<const uint8_t*>(p);
    }
    ::close(fd);  // the mapping keeps the file referenced
    m.parse();
    return f;
}

std::unique_ptr<gguf_file> gguf_file::from_bytes(const void* data, size_t size,
                                                 const std::string& name) {
    std::unique_ptr<gguf_file> f(new gguf_file());
    impl& m = *f->impl_;
    m.path = name;
    m.size = size;
    if (size > 0) {
        // Exact-size allocation (so sanitizers catch any overread), aligned like a mapping would be
        // for tensor data.
        m.heap.reset(static_cast<uint8_t*>(::operator new(size, std::align_val_t(64))));
        std::memcpy(m.heap.get(), data, size);
        m.base = m.heap.get();
    }
    m.parse();
    return f;
}

const std::string& gguf_file::path() const { return impl_->path; }
uint32_t gguf_file::version() const { return impl_->version; }
size_t gguf_file::alignment() const { return impl_->alignment; }
size_t gguf_file::file_size() const { return impl_->size; }
size_t gguf_file::data_offset() const { return impl_->data_start; }

bool gguf_file::has(std::string_view key) const { return impl_->find(key) != nullptr; }

std::optional<gguf_value_type> gguf_file::type_of(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    return e->type;
}

std::optional<std::string> gguf_file::get_string(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    if (e->type != gguf_value_type::string) impl_->type_error(*e, "string");
    const uint8_t* p = impl_->base + e->value_pos;
    return std::string(reinterpret_cast<const char*>(p + 8),
                       static_cast<size_t>(load<uint64_t>(p)));
}

std::optional<int64_t> gguf_file::get_int(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    if (!is_int_type(e->type)) impl_->type_error(*e, "an integer");
    int64_t v = 0;
    if (!read_int(impl_->base + e->value_pos, e->type, v)) {
        impl_->fail(status::format,
                    fmt("key '%s' value %" PRIu64 " does not fit in int64",
                        printable(e->key).c_str(), load<uint64_t>(impl_->base + e->value_pos)));
    }
    return v;
}

std::optional<double> gguf_file::get_float(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    if (!is_float_type(e->type)) impl_->type_error(*e, "f32 or f64");
    return read_float(impl_->base + e->value_pos, e->type);
}

std::optional<bool> gguf_file::get_bool(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    if (e->type != gguf_value_type::boolean) impl_->type_error(*e, "bool");
    return impl_->base[e->value_pos] != 0;
}

std::optional<std::vector<std::string_view>> gguf_file::get_string_array_view(
    std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    gguf_value_type et;
    uint64_t n = 0;
    const uint8_t* p = impl_->array_of(*e, "an array of strings", et, n);
    if (et != gguf_value_type::string) impl_->elem_error(*e, et, "strings");
    std::vector<std::string_view> out;
    out.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) {
        const size_t len = static_cast<size_t>(load<uint64_t>(p));
        out.emplace_back(reinterpret_cast<const char*>(p + 8), len);
        p += 8 + len;
    }
    return out;
}

std::optional<std::vector<std::string>> gguf_file::get_string_array(std::string_view key) const {
    auto views = get_string_array_view(key);
    if (!views) return std::nullopt;
    return std::vector<std::string>(views->begin(), views->end());
}

std::optional<std::vector<int64_t>> gguf_file::get_int_array(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    gguf_value_type et;
    uint64_t n = 0;
    const uint8_t* p = impl_->array_of(*e, "an array of integers", et, n);
    if (!is_int_type(et)) impl_->elem_error(*e, et, "integers");
    const size_t step = scalar_size(static_cast<uint32_t>(et));
    std::vector<int64_t> out(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i, p += step) {
        if (!read_int(p, et, out[i])) {
            impl_->fail(status::format, fmt("key '%s' element %" PRIu64 " does not fit in int64",
                                            printable(e->key).c_str(), i));
        }
    }
    return out;
}

std::optional<std::vector<float>> gguf_file::get_float_array(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    gguf_value_type et;
    uint64_t n = 0;
    const uint8_t* p = impl_->array_of(*e, "an array of floats", et, n);
    if (!is_float_type(et)) impl_->elem_error(*e, et, "f32 or f64");
    const size_t step = scalar_size(static_cast<uint32_t>(et));
    std::vector<float> out(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i, p += step) out[i] = static_cast<float>(read_float(p, et));
    return out;
}

std::optional<gguf_array_info> gguf_file::array_info(std::string_view key) const {
    const kv_entry* e = impl_->find(key);
    if (!e) return std::nullopt;
    gguf_array_info info{};
    impl_->array_of(*e, "an array", info.elem_type, info.count);
    return info;
}

std::vector<std::string> gguf_file::keys() const {
    std::vector<std::string> out;
    out.reserve(impl_->kvs.size());
    for (const kv_entry& e : impl_->kvs) out.emplace_back(e.key);
    return out;
}

const std::vector<gguf_tensor>& gguf_file::tensors() const { return impl_->tensors; }

const gguf_tensor* gguf_file::find_tensor(std::string_view name) const {
    auto it = impl_->tensor_index.find(name);
    return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

uint64_t gguf_file::content_hash() const {
    // Header, metadata and tensor infos in full; of each tensor its size, the first and last
    // 4 KiB and 16 evenly spaced 256 B samples in between (a few MB for a 100 MB model).
    constexpr size_t edge = 4096, sample = 256, n_samples = 16;
    const impl& m = *impl_;
    hasher h;
    h.update_u64(m.size);
    h.update(m.base, m.meta_end);
    for (const gguf_tensor& t : m.tensors) {
        h.update_u64(t.nbytes);
        if (t.nbytes <= 2 * edge + n_samples * sample) {
            h.update(t.data, t.nbytes);
            continue;
        }
        h.update(t.data, edge);
        const size_t mid = t.nbytes - 2 * edge - sample;
        for (size_t i = 0; i < n_samples; ++i) {
            h.update(t.data + edge + mid / (n_samples - 1) * i, sample);
        }
        h.update(t.data + t.nbytes - edge, edge);
    }
    return h.finish();
}

}  // namespace cacheblend
