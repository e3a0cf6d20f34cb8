// GGUF v2/v3 reader: mmap'd, every count, offset, size and string bounds-checked. A malformed file
// throws cacheblend::error (status::format for bad magic / unknown version / unknown types,
// status::corrupt for truncation, overflow and overlapping tensors, status::io for OS errors)
// with a message naming the file and the field; it never crashes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace cacheblend {

enum class gguf_value_type : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// "u32", "string", ...; "unknown" for ids outside the enum.
const char* gguf_type_name(gguf_value_type t);

struct gguf_array_info {
    gguf_value_type elem_type;
    uint64_t count;  // elements, not bytes
};

struct gguf_tensor {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous (row) dimension
    dtype type = dtype::f32;
    uint64_t offset = 0;           // relative to the data section
    size_t nbytes = 0;
    const uint8_t* data = nullptr; // inside the mapping, valid while the gguf_file lives
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class gguf_file {
public:
    // Maps and validates `path`. Throws cacheblend::error.
    static std::unique_ptr<gguf_file> open(const std::string& path);
    // Parses an in-memory image (copied). For tests and fuzzing.
    static std::unique_ptr<gguf_file> from_bytes(const void* data, size_t size,
                                                 const std::string& name = "<memory>");
    ~gguf_file();

    const std::string& path() const;
    uint32_t version() const;
    size_t alignment() const;
    size_t file_size() const;
    // Absolute offset of the tensor data section (a multiple of alignment()).
    size_t data_offset() const;

    // ---- metadata ----
    bool has(std::string_view key) const;
    std::optional<gguf_value_type> type_of(std::string_view key) const;
    // Typed getters return nullopt when the key is absent and throw status::format when it is
    // present with an incompatible type. Integer getters accept any integer type whose value fits;
    // float getters accept f32/f64.
    std::optional<std::string> get_string(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    // Arrays: element type must match the getter family (strings / any integer / any float).
    std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
    std::optional<std::vector<float>> get_float_array(std::string_view key) const;
    // Zero-copy view of a string array (tokenizer vocabularies are large): pointers into the map.
    std::optional<std::vector<std::string_view>> get_string_array_view(std::string_view key) const;
    // Element type and length of an array without materializing it; nullopt when absent, throws
    // status::format when the key is not an array.
    std::optional<gguf_array_info> array_info(std::string_view key) const;
    std::vector<std::string> keys() const;  // file order

    // ---- tensors ----
    const std::vector<gguf_tensor>& tensors() const;
    const gguf_tensor* find_tensor(std::string_view name) const;  // nullptr if absent

    // 64-bit content fingerprint: hash of header, metadata and tensor data (sampled
    // deterministically for speed). Used in model fingerprints.
    uint64_t content_hash() const;

private:
    gguf_file();
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace cacheblend
