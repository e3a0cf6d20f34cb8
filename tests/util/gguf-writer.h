// In-memory GGUF writer for tests: synthetic models and handcrafted malformed files.
//
//   cbltest::gguf_builder b;
//   b.set_str("general.architecture", "llama").set_u32("llama.block_count", 2);
//   b.set_arr_str("tokenizer.ggml.tokens", {"a", "b"});
//   b.add_tensor_f32("output_norm.weight", {64}, std::vector<float>(64, 1.0f));
//   b.add_tensor("token_embd.weight", dtype::q8_0, {64, 32}, bytes);  // raw blocks
//   std::vector<uint8_t> img = b.build();   // or b.write(path)
//
// Layout follows ggml's writer: KVs in insertion order, tensor data in insertion order at
// sequential aligned offsets, each tensor (the last included) zero-padded to the alignment.
// For corruption tests, build(&layout) reports where every field went so a test can patch the
// image (patch_u32 / patch_u64), and the override_* / add_tensor_raw hooks write values the
// typed API would refuse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/gguf.h"
#include "kernels/dtype.h"

namespace cbltest {

using cacheblend::dtype;
using cacheblend::gguf_value_type;

// Little-endian encoder; also handy to craft raw value payloads (nested arrays, bad bools).
class byte_writer {
public:
    byte_writer& u8(uint8_t v) { return put(&v, 1); }
    byte_writer& i8(int8_t v) { return put(&v, 1); }
    byte_writer& u16(uint16_t v) { return put(&v, 2); }
    byte_writer& i16(int16_t v) { return put(&v, 2); }
    byte_writer& u32(uint32_t v) { return put(&v, 4); }
    byte_writer& i32(int32_t v) { return put(&v, 4); }
    byte_writer& u64(uint64_t v) { return put(&v, 8); }
    byte_writer& i64(int64_t v) { return put(&v, 8); }
    byte_writer& f32(float v) { return put(&v, 4); }
    byte_writer& f64(double v) { return put(&v, 8); }
    byte_writer& str(std::string_view s) { return u64(s.size()).put(s.data(), s.size()); }
    byte_writer& put(const void* p, size_t n);
    byte_writer& pad_to(size_t alignment);  // zero bytes up to the next multiple

    size_t size() const { return buf_.size(); }
    const std::vector<uint8_t>& bytes() const { return buf_; }
    std::vector<uint8_t> take() { return std::move(buf_); }

private:
    std::vector<uint8_t> buf_;
};

// Byte positions of every field in a built image.
struct gguf_layout {
    size_t magic = 0, version = 4, n_tensors = 8, n_kv = 16;
    struct kv_fields {
        size_t key_len, type, value;  // value: first byte after the type field
    };
    struct tensor_fields {
        size_t name_len, n_dims, dims, type, offset;
        size_t data;    // absolute position of the tensor's data
        size_t nbytes;  // bytes of data written for it
    };
    std::vector<kv_fields> kvs;
    std::vector<tensor_fields> tensors;
    size_t infos_end = 0;   // end of the tensor infos (padding starts here)
    size_t data_start = 0;  // start of the data section
    size_t size = 0;
};

class gguf_builder {
public:
    // ---- metadata: set_* replaces an existing key in place, else appends ----
    gguf_builder& set_u8(const std::string& key, uint8_t v);
    gguf_builder& set_i8(const std::string& key, int8_t v);
    gguf_builder& set_u16(const std::string& key, uint16_t v);
    gguf_builder& set_i16(const std::string& key, int16_t v);
    gguf_builder& set_u32(const std::string& key, uint32_t v);
    gguf_builder& set_i32(const std::string& key, int32_t v);
    gguf_builder& set_u64(const std::string& key, uint64_t v);
    gguf_builder& set_i64(const std::string& key, int64_t v);
    gguf_builder& set_f32(const std::string& key, float v);
    gguf_builder& set_f64(const std::string& key, double v);
    gguf_builder& set_bool(const std::string& key, bool v);
    gguf_builder& set_str(const std::string& key, std::string_view v);

    gguf_builder& set_arr_str(const std::string& key, const std::vector<std::string>& v);
    gguf_builder& set_arr_u8(const std::string& key, const std::vector<uint8_t>& v);
    gguf_builder& set_arr_i8(const std::string& key, const std::vector<int8_t>& v);
    gguf_builder& set_arr_u16(const std::string& key, const std::vector<uint16_t>& v);
    gguf_builder& set_arr_i16(const std::string& key, const std::vector<int16_t>& v);
    gguf_builder& set_arr_u32(const std::string& key, const std::vector<uint32_t>& v);
    gguf_builder& set_arr_i32(const std::string& key, const std::vector<int32_t>& v);
    gguf_builder& set_arr_u64(const std::string& key, const std::vector<uint64_t>& v);
    gguf_builder& set_arr_i64(const std::string& key, const std::vector<int64_t>& v);
    gguf_builder& set_arr_f32(const std::string& key, const std::vector<float>& v);
    gguf_builder& set_arr_f64(const std::string& key, const std::vector<double>& v);
    gguf_builder& set_arr_bool(const std::string& key, const std::vector<bool>& v);

    // Any value: type id plus the encoded bytes that follow the type field. For arrays the
    // payload starts with the element type and count (see byte_writer).
    gguf_builder& set_raw(const std::string& key, uint32_t type_id, std::vector<uint8_t> payload);
    // Appends even if the key exists (duplicate-key tests).
    gguf_builder& append_raw(const std::string& key, uint32_t type_id,
                             std::vector<uint8_t> payload);
    gguf_builder& remove(const std::string& key);
    bool has(const std::string& key) const;

    // Layout alignment, also written as general.alignment (u32). Setting general.alignment via
    // set_u32 only writes the key and leaves the layout at its current alignment (default 32).
    gguf_builder& set_alignment(uint32_t alignment);
    gguf_builder& set_version(uint32_t version);  // 2 or 3 (default); any value is written

    // ---- tensors ----
    // `shape` is in ggml order (shape[0] = row length); bytes.size() must match the type and
    // shape exactly (std::invalid_argument otherwise).
    gguf_builder& add_tensor(const std::string& name, dtype type, const std::vector<int64_t>& shape,
                             std::vector<uint8_t> bytes);
    gguf_builder& add_tensor_f32(const std::string& name, const std::vector<int64_t>& shape,
                                 const std::vector<float>& values);
    // Tensor of the right size filled with a deterministic byte pattern (seeded by the name).
    gguf_builder& add_tensor_filled(const std::string& name, dtype type,
                                    const std::vector<int64_t>& shape);
    // Writes exactly what it is given: any type id, any number of dims (raw u64, so negative
    // values appear as two's complement), any data bytes. offset: explicit data offset, else the
    // next sequential aligned one.
    gguf_builder& add_tensor_raw(const std::string& name, uint32_t type_id,
                                 const std::vector<uint64_t>& dims, std::vector<uint8_t> bytes,
                                 std::optional<uint64_t> offset = std::nullopt);
    // Overrides the offset written in a tensor's info (its data still goes where the layout puts
    // it).
    gguf_builder& set_tensor_offset(const std::string& name, uint64_t offset);

    // ---- header overrides (written instead of the true values) ----
    gguf_builder& override_magic(uint32_t magic);
    gguf_builder& override_n_tensors(uint64_t n);
    gguf_builder& override_n_kv(uint64_t n);

    std::vector<uint8_t> build(gguf_layout* layout = nullptr) const;
    // Writes build() to path; throws std::runtime_error on failure.
    void write(const std::string& path, gguf_layout* layout = nullptr) const;

private:
    struct kv {
        std::string key;
        uint32_t type;
        std::vector<uint8_t> payload;
    };
    struct tensor {
        std::string name;
        uint32_t type_id;
        std::vector<uint64_t> dims;
        std::vector<uint8_t> bytes;
        std::optional<uint64_t> info_offset;  // written in the info instead of the real one
        std::optional<uint64_t> data_offset;  // where the data goes (raw tensors only)
    };
    gguf_builder& set_kv(const std::string& key, gguf_value_type t, std::vector<uint8_t> payload);
    tensor* find_tensor(const std::string& name);

    std::vector<kv> kvs_;
    std::vector<tensor> tensors_;
    uint32_t alignment_ = 32;
    uint32_t version_ = 3;
    std::optional<uint32_t> magic_;
    std::optional<uint64_t> n_tensors_, n_kv_;
};

// Expected byte size of a tensor of `type` with `shape` (throws std::invalid_argument when ne[0]
// is not a multiple of the block size).
size_t tensor_bytes(dtype type, const std::vector<int64_t>& shape);
std::vector<uint8_t> f32_bytes(const std::vector<float>& v);

void patch_u32(std::vector<uint8_t>& img, size_t pos, uint32_t v);
void patch_u64(std::vector<uint8_t>& img, size_t pos, uint64_t v);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// A unique path under $TMPDIR (or /tmp), removed when this goes out of scope.
class temp_file {
public:
    explicit temp_file(const std::string& stem = "cbltest");
    ~temp_file();
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace cbltest
