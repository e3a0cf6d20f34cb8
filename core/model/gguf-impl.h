// The GGUF reader's private state (gguf_file::impl) and the helpers its two halves share:
// gguf-parse.cpp validates the whole image once at open time, gguf.cpp maps the file and answers
// the getters from the validated bytes. Internal to core/model/gguf*.cpp.
#pragma once

#include <sys/mman.h>

#include <cinttypes>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model/gguf.h"
#include "core/util/error.h"

namespace cacheblend {
namespace gguf_detail {

constexpr uint32_t k_magic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t k_default_alignment = 32;
constexpr int k_max_array_depth = 8;       // bounds recursion on hostile nesting
constexpr uint64_t k_max_key_len = 65535;  // spec limit
// Smallest encodings of a KV pair and of a tensor info (empty keys and names are rejected, so
// at least one byte each): hostile counts are capped against the bytes left before any loop.
constexpr uint64_t k_min_kv_bytes = 8 + 1 + 4 + 1;
constexpr uint64_t k_min_tensor_info_bytes = 8 + 1 + 4 + 4 + 8;
constexpr uint64_t k_min_array_header = 4 + 8;

inline size_t scalar_size(uint32_t t) {
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

inline bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(gguf_value_type::f64); }

inline bool is_int_type(gguf_value_type t) {
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

inline bool is_float_type(gguf_value_type t) {
    return t == gguf_value_type::f32 || t == gguf_value_type::f64;
}

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Keys and names are arbitrary bytes: escape them and cap their length in messages.
inline std::string printable(std::string_view s) {
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
inline bool read_int(const uint8_t* p, gguf_value_type t, int64_t& out) {
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

inline double read_float(const uint8_t* p, gguf_value_type t) {
    return t == gguf_value_type::f32 ? static_cast<double>(load<float>(p)) : load<double>(p);
}

struct kv_entry {
    std::string_view key;  // points into the image
    gguf_value_type type;
    size_t value_pos;  // absolute offset of the value (after the type field)
};

struct aligned_free {
    void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t(64)); }
};

[[noreturn]] inline void fail_in(const std::string& path, status s, const std::string& detail) {
    throw error(s, "gguf: " + path + ": " + detail);
}

}  // namespace gguf_detail

struct gguf_file::impl {
    using kv_entry = gguf_detail::kv_entry;
    using aligned_free = gguf_detail::aligned_free;

    std::string path;
    void* map = nullptr;  // mmap'd file, or
    size_t map_len = 0;
    std::unique_ptr<uint8_t, aligned_free> heap;  // from_bytes copy (64-byte aligned)
    const uint8_t* base = nullptr;
    size_t size = 0;

    uint32_t version = 0;
    size_t alignment = gguf_detail::k_default_alignment;
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
        gguf_detail::fail_in(path, s, detail);
    }

    void parse();
    const kv_entry* find(std::string_view key) const {
        auto it = kv_index.find(key);
        return it == kv_index.end() ? nullptr : &kvs[it->second];
    }
    [[noreturn]] void type_error(const kv_entry& e, const char* expected) const {
        fail(status::format,
             fmt("key '%s' has type %s, expected %s", gguf_detail::printable(e.key).c_str(),
                 gguf_type_name(e.type), expected));
    }
    // Array element type, count and first element of an array entry; rejects nested arrays.
    const uint8_t* array_of(const kv_entry& e, const char* expected, gguf_value_type& et,
                            uint64_t& n) const {
        if (e.type != gguf_value_type::array) type_error(e, expected);
        const uint8_t* p = base + e.value_pos;
        et = static_cast<gguf_value_type>(gguf_detail::load<uint32_t>(p));
        n = gguf_detail::load<uint64_t>(p + 4);
        return p + gguf_detail::k_min_array_header;
    }
    [[noreturn]] void elem_error(const kv_entry& e, gguf_value_type et,
                                 const char* expected) const {
        fail(status::format,
             fmt("key '%s' is an array of %s, expected %s", gguf_detail::printable(e.key).c_str(),
                 gguf_type_name(et), expected));
    }
};

}  // namespace cacheblend
