// GGUF reader. The whole file is validated once at open time (every count, length, offset and
// tensor extent), so the getters can walk the mapped bytes afterwards without re-checking.
// Layout: reference/gguf-and-llama-facts.md §1. Only little-endian files are read.
#include "core/model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <new>
#include <unordered_map>

#include "core/util/error.h"

namespace cacheblend {

namespace {

constexpr uint32_t k_magic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t k_default_alignment = 32;
constexpr int k_max_array_depth = 8;      // bounds recursion on hostile nesting
constexpr uint64_t k_max_key_len = 65535;  // spec limit
// Smallest encodings of a KV pair and of a tensor info (empty keys and names are rejected, so
// at least one byte each): hostile counts are capped against the bytes left before any loop.
constexpr uint64_t k_min_kv_bytes = 8 + 1 + 4 + 1;
constexpr uint64_t k_min_tensor_info_bytes = 8 + 1 + 4 + 4 + 8;
constexpr uint64_t k_min_array_header = 4 + 8;

size_t scalar_size(uint32_t t) {
    switch (static_cast<gguf_value_type>(t)) {
    case gguf_value_type::u8:
    case gguf_value_type::i8:
    case gguf_value_type::boolean: return 1;
    case gguf_value_type::u16:
    case gguf_value_type::i16: return 2;
    case gguf_value_type::u32:
    case gguf_value_type::i32:
    case gguf_value_type::f32: return 4;
    case gguf_value_type::u64:
    case gguf_value_type::i64:
    case gguf_value_type::f64: return 8;
    default: return 0;
    }
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(gguf_value_type::f64); }

bool is_int_type(gguf_value_type t) {
    switch (t) {
    case gguf_value_type::u8:
    case gguf_value_type::i8:
    case gguf_value_type::u16:
    case gguf_value_type::i16:
    case gguf_value_type::u32:
    case gguf_value_type::i32:
    case gguf_value_type::u64:
    case gguf_value_type::i64: return true;
    default: return false;
    }
}

bool is_float_type(gguf_value_type t) {
    return t == gguf_value_type::f32 || t == gguf_value_type::f64;
}

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Keys and names are arbitrary bytes: escape them and cap their length in messages.
std::string printable(std::string_view s) {
    std::string out;
    const size_t cap = 96;
    for (size_t i = 0; i < s.size() && i < cap; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            out += static_cast<char>(c);
        } else {
            out += fmt("\\x%02x", c);
        }
    }
    if (s.size() > cap) out += "...";
    return out;
}

// Integer value of a scalar at p; false when it does not fit in int64.
bool read_int(const uint8_t* p, gguf_value_type t, int64_t& out) {
    switch (t) {
    case gguf_value_type::u8: out = load<uint8_t>(p); return true;
    case gguf_value_type::i8: out = load<int8_t>(p); return true;
    case gguf_value_type::u16: out = load<uint16_t>(p); return true;
    case gguf_value_type::i16: out = load<int16_t>(p); return true;
    case gguf_value_type::u32: out = load<uint32_t>(p); return true;
    case gguf_value_type::i32: out = load<int32_t>(p); return true;
    case gguf_value_type::i64: out = load<int64_t>(p); return true;
    case gguf_value_type::u64: {
        const uint64_t v = load<uint64_t>(p);
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        out = static_cast<int64_t>(v);
        return true;
    }
    default: return false;
    }
}

double read_float(const uint8_t* p, gguf_value_type t) {
    return t == gguf_value_type::f32 ? static_cast<double>(load<float>(p)) : load<double>(p);
}

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

struct kv_entry {
    std::string_view key;  // points into the image
    gguf_value_type type;
    size_t value_pos;      // absolute offset of the value (after the type field)
};

struct aligned_free {
    void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t(64)); }
};

[[noreturn]] void fail_in(const std::string& path, status s, const std::string& detail) {
    throw error(s, "gguf: " + path + ": " + detail);
}

// ggml's name (ggml_type_name) of a type id ggml defines or once defined but we do not support,
// or nullptr for an id ggml never had (upstream ggml.h, up to Q1_0 = 41).
const char* ggml_unsupported_type_name(uint32_t id) {
    switch (id) {
    case 4: return "q4_2 (removed from ggml)";
    case 5: return "q4_3 (removed from ggml)";
    case 16: return "iq2_xxs";
    case 17: return "iq2_xs";
    case 18: return "iq3_xxs";
    case 19: return "iq1_s";
    case 20: return "iq4_nl";
    case 21: return "iq3_s";
    case 22: return "iq2_s";
    case 23: return "iq4_xs";
    case 24: return "i8";
    case 25: return "i16";
    case 26: return "i32";
    case 27: return "i64";
    case 28: return "f64";
    case 29: return "iq1_m";
    case 31: return "q4_0_4_4 (removed from GGUF files)";
    case 32: return "q4_0_4_8 (removed from GGUF files)";
    case 33: return "q4_0_8_8 (removed from GGUF files)";
    case 34: return "tq1_0";
    case 35: return "tq2_0";
    case 36: return "iq4_nl_4_4 (removed from GGUF files)";
    case 37: return "iq4_nl_4_8 (removed from GGUF files)";
    case 38: return "iq4_nl_8_8 (removed from GGUF files)";
    case 39: return "mxfp4";
    case 40: return "nvfp4";
    case 41: return "q1_0";
    default: return nullptr;
    }
}

// The weight types a model may use, for messages.
std::string supported_weight_types() {
    std::string r;
    for (uint32_t id = 0; id < 64; ++id) {
        const dtype_traits* t = dtype_info(id);
        if (!t || id == static_cast<uint32_t>(dtype::q8_1) || id == static_cast<uint32_t>(dtype::q8_k)) {
            continue;
        }
        r += (r.empty() ? "" : " ") + std::string(t->name);
    }
    return r;
}

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

struct gguf_file::impl {
    std::string path;
    void* map = nullptr;  // mmap'd file, or
    size_t map_len = 0;
    std::unique_ptr<uint8_t, aligned_free> heap;  // from_bytes copy (64-byte aligned)
    const uint8_t* base = nullptr;
    size_t size = 0;

    uint32_t version = 0;
    size_t alignment = k_default_alignment;
    size_t meta_end = 0;    // end of the tensor infos
    size_t data_start = 0;  // start of the data section

    std::vector<kv_entry> kvs;
    std::unordered_map<std::string_view, size_t> kv_index;
    std::vector<gguf_tensor> tensors;
    std::unordered_map<std::string_view, size_t> tensor_index;  // views into the image

    ~impl() {
        if (map) ::munmap(map, map_len);
    }

    [[noreturn]] void fail(status s, const std::string& detail) const {
        fail_in(path, s, detail);
    }

    void parse();
    const kv_entry* find(std::string_view key) const {
        auto it = kv_index.find(key);
        return it == kv_index.end() ? nullptr : &kvs[it->second];
    }
    [[noreturn]] void type_error(const kv_entry& e, const char* expected) const {
        fail(status::format, fmt("key '%s' has type %s, expected %s", printable(e.key).c_str(),
                                 gguf_type_name(e.type), expected));
    }
    // Array element type, count and first element of an array entry; rejects nested arrays.
    const uint8_t* array_of(const kv_entry& e, const char* expected, gguf_value_type& et,
                            uint64_t& n) const {
        if (e.type != gguf_value_type::array) type_error(e, expected);
        const uint8_t* p = base + e.value_pos;
        et = static_cast<gguf_value_type>(load<uint32_t>(p));
        n = load<uint64_t>(p + 4);
        return p + k_min_array_header;
    }
    [[noreturn]] void elem_error(const kv_entry& e, gguf_value_type et,
                                 const char* expected) const {
        fail(status::format, fmt("key '%s' is an array of %s, expected %s",
                                 printable(e.key).c_str(), gguf_type_name(et), expected));
    }
};

namespace {

// Bounds-checked cursor over the image. `ctx` names the entry being parsed for messages.
class reader {
public:
    reader(const uint8_t* base, size_t size, const std::string& path)
        : base_(base), size_(size), path_(path) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    std::string ctx = "header";

    [[noreturn]] void fail(status s, const std::string& detail) const {
        fail_in(path_, s, ctx + ": " + detail);
    }
    void need(uint64_t n, const char* what) const {
        if (n > remaining()) {
            fail(status::corrupt,
                 fmt("truncated %s at offset %zu (needs %" PRIu64 " B, file is %zu B)", what, pos_,
                     n, size_));
        }
    }
    void skip(uint64_t n, const char* what) {
        need(n, what);
        pos_ += static_cast<size_t>(n);
    }
    uint8_t u8(const char* what) {
        need(1, what);
        return base_[pos_++];
    }
    uint32_t u32(const char* what) {
        need(4, what);
        const uint32_t v = load<uint32_t>(base_ + pos_);
        pos_ += 4;
        return v;
    }
    uint64_t u64(const char* what) {
        need(8, what);
        const uint64_t v = load<uint64_t>(base_ + pos_);
        pos_ += 8;
        return v;
    }
    std::string_view str(const char* what) {
        const size_t at = pos_;
        const uint64_t len = u64(what);
        if (len > remaining()) {
            fail(status::corrupt,
                 fmt("%s at offset %zu has length %" PRIu64 " but only %zu B remain", what, at, len,
                     remaining()));
        }
        std::string_view s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return s;
    }

    // Validates one value of type t and moves past it.
    void skip_value(uint32_t t, int depth) {
        const size_t at = pos_;
        if (!known_type(t)) {
            fail(status::format, fmt("unknown value type %u before offset %zu", t, at));
        }
        const auto vt = static_cast<gguf_value_type>(t);
        if (vt == gguf_value_type::boolean) {
            const uint8_t b = u8("bool value");
            if (b > 1) {
                fail(status::corrupt, fmt("bool value %u at offset %zu is not 0 or 1", b, at));
            }
        } else if (vt == gguf_value_type::string) {
            str("string value");
        } else if (vt == gguf_value_type::array) {
            skip_array(depth);
        } else {
            skip(scalar_size(t), "value");
        }
    }

private:
    void skip_array(int depth) {
        const size_t at = pos_;
        const uint32_t et = u32("array element type");
        if (!known_type(et)) {
            fail(status::format, fmt("array at offset %zu has unknown element type %u", at, et));
        }
        const uint64_t n = u64("array length");
        if (et == static_cast<uint32_t>(gguf_value_type::array) && depth + 1 >= k_max_array_depth) {
            fail(status::corrupt, fmt("array at offset %zu nests deeper than %d levels", at,
                                      k_max_array_depth));
        }
        const size_t fixed = scalar_size(et);
        uint64_t min_elem = fixed;  // strings: length field; arrays: element type + count
        if (et == static_cast<uint32_t>(gguf_value_type::string)) min_elem = 8;
        if (et == static_cast<uint32_t>(gguf_value_type::array)) min_elem = k_min_array_header;
        if (n > remaining() / min_elem) {
            fail(status::corrupt,
                 fmt("array at offset %zu has %" PRIu64 " elements of >= %" PRIu64
                     " B but only %zu B remain",
                     at, n, min_elem, remaining()));
        }
        if (fixed && et != static_cast<uint32_t>(gguf_value_type::boolean)) {
            pos_ += static_cast<size_t>(n * fixed);  // fits: checked above
            return;
        }
        for (uint64_t i = 0; i < n; ++i) skip_value(et, depth + 1);
    }

    const uint8_t* base_;
    size_t size_;
    const std::string& path_;
    size_t pos_ = 0;
};

bool mul_overflow(uint64_t a, uint64_t b, uint64_t* out) {
    return __builtin_mul_overflow(a, b, out);
}
bool add_overflow(uint64_t a, uint64_t b, uint64_t* out) {
    return __builtin_add_overflow(a, b, out);
}

}  // namespace

void gguf_file::impl::parse() {
    reader r(base, size, path);

    const uint32_t magic = r.u32("magic");
    if (magic != k_magic) {
        fail(status::format, fmt("bad magic %02x %02x %02x %02x (not a GGUF file)", base[0],
                                 base[1], base[2], base[3]));
    }
    version = r.u32("version");
    if ((version & 0xffff) == 0 && version != 0) {
        fail(status::format, fmt("version field 0x%08x looks byte-swapped: big-endian GGUF files "
                                 "are not supported", version));
    }
    if (version == 1) fail(status::format, "GGUF v1 is not supported (only v2 and v3)");
    if (version != 2 && version != 3) {
        fail(status::format, fmt("unsupported GGUF version %u (only v2 and v3)", version));
    }
    const uint64_t n_tensors = r.u64("tensor count");
    const uint64_t n_kv = r.u64("metadata count");
    const uint64_t left = r.remaining();
    if (n_kv > left / k_min_kv_bytes || n_tensors > left / k_min_tensor_info_bytes ||
        n_kv * k_min_kv_bytes + n_tensors * k_min_tensor_info_bytes > left) {
        fail(status::corrupt, fmt("%" PRIu64 " metadata entries and %" PRIu64
                                  " tensors cannot fit in the %" PRIu64 " B after the header",
                                  n_kv, n_tensors, left));
    }

    // ---- metadata ----
    kvs.reserve(static_cast<size_t>(n_kv));
    kv_index.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
        r.ctx = fmt("metadata entry %" PRIu64, i);
        const size_t at = r.pos();
        const std::string_view key = r.str("key");
        if (key.empty()) r.fail(status::corrupt, fmt("empty key at offset %zu", at));
        if (key.size() > k_max_key_len) {
            r.fail(status::corrupt, fmt("key at offset %zu is %zu B long (limit %" PRIu64 ")", at,
                                        key.size(), k_max_key_len));
        }
        r.ctx = fmt("key '%s'", printable(key).c_str());
        const uint32_t t = r.u32("value type");
        const size_t value_pos = r.pos();
        r.skip_value(t, 0);
        if (!kv_index.emplace(key, kvs.size()).second) {
            r.fail(status::corrupt, fmt("duplicate key at offset %zu", at));
        }
        kvs.push_back({key, static_cast<gguf_value_type>(t), value_pos});
    }

    if (const kv_entry* e = find("general.alignment")) {
        int64_t a = 0;
        if (!is_int_type(e->type)) type_error(*e, "u32");
        const bool fits = read_int(base + e->value_pos, e->type, a);  // false: u64 > INT64_MAX
        if (!fits || a <= 0 || (a & (a - 1)) != 0 || a > (int64_t{1} << 30)) {
            fail(status::corrupt, fmt("general.alignment %s must be a power of two <= 2^30",
                                      fits ? std::to_string(a).c_str() : "(> 2^63)"));
        }
        alignment = static_cast<size_t>(a);
    }

    // ---- tensor infos ----
    tensors.reserve(static_cast<size_t>(n_tensors));
    tensor_index.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        r.ctx = fmt("tensor info %" PRIu64, i);
        const size_t at = r.pos();
        const std::string_view name = r.str("tensor name");
        if (name.empty()) r.fail(status::corrupt, fmt("empty tensor name at offset %zu", at));
        r.ctx = fmt("tensor '%s'", printable(name).c_str());
        gguf_tensor t;
        t.name.assign(name);
        t.n_dims = r.u32("n_dims");
        if (t.n_dims > 4) r.fail(status::corrupt, fmt("n_dims %u > 4", t.n_dims));
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const uint64_t ne = r.u64("dimension");
            if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                r.fail(status::corrupt, fmt("ne[%u] is negative (%" PRIi64 ")", d,
                                            static_cast<int64_t>(ne)));
            }
            t.ne[d] = static_cast<int64_t>(ne);
        }
        const size_t type_at = r.pos();
        const uint32_t type_id = r.u32("type");
        const dtype_traits* info = dtype_info(type_id);
        if (!info) {
            // A type ggml knows is a valid file we cannot run; an id it never had is a format error.
            if (const char* known = ggml_unsupported_type_name(type_id)) {
                r.fail(status::unsupported,
                       fmt("ggml type %s (id %u, at offset %zu) is not supported; weights must be "
                           "one of: %s",
                           known, type_id, type_at, supported_weight_types().c_str()));
            }
            r.fail(status::format, fmt("unknown ggml type id %u at offset %zu (not a ggml type: "
                                       "a newer GGUF or a corrupt file)",
                                       type_id, type_at));
        }
        t.type = static_cast<dtype>(type_id);
        t.offset = r.u64("data offset");

        uint64_t count = 1;
        for (int d = 0; d < 4; ++d) {
            if (mul_overflow(count, static_cast<uint64_t>(t.ne[d]), &count) ||
                count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                r.fail(status::corrupt,
                       fmt("element count of [%" PRIi64 ", %" PRIi64 ", %" PRIi64 ", %" PRIi64
                           "] overflows int64",
                           t.ne[0], t.ne[1], t.ne[2], t.ne[3]));
            }
        }
        if (t.ne[0] % info->block_elems != 0) {
            r.fail(status::corrupt, fmt("ne[0] = %" PRIi64 " is not a multiple of the %s block "
                                        "size %" PRIi64, t.ne[0], info->name, info->block_elems));
        }
        uint64_t nbytes = static_cast<uint64_t>(t.ne[0] / info->block_elems);
        bool over = mul_overflow(nbytes, info->block_bytes, &nbytes);
        for (int d = 1; d < 4 && !over; ++d) {
            over = mul_overflow(nbytes, static_cast<uint64_t>(t.ne[d]), &nbytes);
        }
        if (over || nbytes > std::numeric_limits<size_t>::max()) {
            r.fail(status::corrupt, "byte size overflows 64 bits");
        }
        t.nbytes = static_cast<size_t>(nbytes);
        if (!tensor_index.emplace(name, tensors.size()).second) {
            r.fail(status::corrupt, fmt("duplicate tensor name at offset %zu", at));
        }
        tensors.push_back(std::move(t));
    }
    meta_end = r.pos();

    // ---- data section ----
    uint64_t start = 0;
    if (add_overflow(meta_end, alignment - 1, &start)) start = std::numeric_limits<uint64_t>::max();
    start &= ~static_cast<uint64_t>(alignment - 1);
    if (tensors.empty()) {
        data_start = static_cast<size_t>(std::min<uint64_t>(start, size));  // padding optional
        return;
    }
    if (start > size) {
        fail(status::corrupt, fmt("data section starts at %" PRIu64 ", past end of file (%zu B)",
                                  start, size));
    }
    data_start = static_cast<size_t>(start);
    const uint64_t data_size = size - data_start;
    for (gguf_tensor& t : tensors) {
        const std::string name = printable(t.name);
        if (t.offset % alignment != 0) {
            fail(status::corrupt, fmt("tensor '%s' data offset %" PRIu64
                                      " is not a multiple of the alignment %zu",
                                      name.c_str(), t.offset, alignment));
        }
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            uint64_t b = 0, e = 0;
            if (add_overflow(data_start, t.offset, &b) || add_overflow(b, t.nbytes, &e)) {
                fail(status::corrupt, fmt("tensor '%s' data offset %" PRIu64 " + %zu B overflows",
                                          name.c_str(), t.offset, t.nbytes));
            }
            fail(status::corrupt, fmt("tensor '%s' data [%" PRIu64 ", %" PRIu64
                                      ") extends past end of file (%zu B)",
                                      name.c_str(), b, e, size));
        }
        t.data = base + data_start + t.offset;
    }

    // Overlap: sort extents by offset; each non-empty extent must start at or after the furthest
    // end seen so far.
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return tensors[a].offset != tensors[b].offset ? tensors[a].offset < tensors[b].offset
                                                      : a < b;
    });
    uint64_t max_end = 0;
    size_t max_idx = 0;
    bool have = false;
    for (size_t i : order) {
        const gguf_tensor& t = tensors[i];
        if (t.nbytes == 0) continue;
        if (have && t.offset < max_end) {
            const gguf_tensor& o = tensors[max_idx];
            fail(status::corrupt,
                 fmt("tensor '%s' data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' data [%"
                     PRIu64 ", %" PRIu64 ")",
                     printable(t.name).c_str(), data_start + t.offset,
                     data_start + t.offset + t.nbytes, printable(o.name).c_str(),
                     data_start + o.offset, data_start + o.offset + o.nbytes));
        }
        if (!have || t.offset + t.nbytes > max_end) {
            max_end = t.offset + t.nbytes;
            max_idx = i;
            have = true;
        }
    }
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
        impl_->fail(status::format, fmt("key '%s' value %" PRIu64 " does not fit in int64",
                                        printable(e->key).c_str(),
                                        load<uint64_t>(impl_->base + e->value_pos)));
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
