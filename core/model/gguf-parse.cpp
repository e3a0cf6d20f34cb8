// The GGUF validation pass, run once when a file is opened: header (magic, version, counts
// capped by the bytes left), every metadata entry (key, type, nested arrays walked with a depth
// limit), the tensor table (names, shapes, types, byte sizes without overflow) and the data
// section (alignment, every extent inside the file, no two overlapping). After it the getters in
// gguf.cpp can walk the mapped bytes without re-checking.

#include "core/model/gguf-impl.h"

#include <algorithm>

namespace cacheblend {

using namespace gguf_detail;

namespace {

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
        if (!t || id == static_cast<uint32_t>(dtype::q8_1) ||
            id == static_cast<uint32_t>(dtype::q8_k)) {
            continue;
        }
        r += (r.empty() ? "" : " ") + std::string(t->name);
    }
    return r;
}

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
            fail(status::corrupt,
                 fmt("array at offset %zu nests deeper than %d levels", at, k_max_array_depth));
        }
        const size_t fixed = scalar_size(et);
        uint64_t min_elem = fixed;  // strings: length field; arrays: element type + count
        if (et == static_cast<uint32_t>(gguf_value_type::string)) min_elem = 8;
        if (et == static_cast<uint32_t>(gguf_value_type::array)) min_elem = k_min_array_header;
        if (n > remaining() / min_elem) {
            fail(status::corrupt, fmt("array at offset %zu has %" PRIu64 " elements of >= %" PRIu64
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
                                 "are not supported",
                                 version));
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
                r.fail(status::corrupt,
                       fmt("ne[%u] is negative (%" PRIi64 ")", d, static_cast<int64_t>(ne)));
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
                r.fail(status::corrupt, fmt("element count of [%" PRIi64 ", %" PRIi64 ", %" PRIi64
                                            ", %" PRIi64 "] overflows int64",
                                            t.ne[0], t.ne[1], t.ne[2], t.ne[3]));
            }
        }
        if (t.ne[0] % info->block_elems != 0) {
            r.fail(status::corrupt, fmt("ne[0] = %" PRIi64 " is not a multiple of the %s block "
                                        "size %" PRIi64,
                                        t.ne[0], info->name, info->block_elems));
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
        fail(status::corrupt,
             fmt("data section starts at %" PRIu64 ", past end of file (%zu B)", start, size));
    }
    data_start = static_cast<size_t>(start);
    const uint64_t data_size = size - data_start;
    for (gguf_tensor& t : tensors) {
        const std::string name = printable(t.name);
        if (t.offset % alignment != 0) {
            fail(status::corrupt,
                 fmt("tensor '%s' data offset %" PRIu64 " is not a multiple of the alignment %zu",
                     name.c_str(), t.offset, alignment));
        }
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            uint64_t b = 0, e = 0;
            if (add_overflow(data_start, t.offset, &b) || add_overflow(b, t.nbytes, &e)) {
                fail(status::corrupt, fmt("tensor '%s' data offset %" PRIu64 " + %zu B overflows",
                                          name.c_str(), t.offset, t.nbytes));
            }
            fail(status::corrupt,
                 fmt("tensor '%s' data [%" PRIu64 ", %" PRIu64 ") extends past end of file (%zu B)",
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
            fail(status::corrupt, fmt("tensor '%s' data [%" PRIu64 ", %" PRIu64
                                      ") overlaps tensor '%s' data [%" PRIu64 ", %" PRIu64 ")",
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

}  // namespace cacheblend
