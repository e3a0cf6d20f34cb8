// The chunk KV file format (docs/ARCHITECTURE.md, 'KV store'). Self-describing: a file alone says
// which model, KV format, shape, chunk key and tokens it holds, and every byte is covered by a
// checksum.
//
// Version 2, all integers little-endian:
//   0    8  magic "CBLKVST\0"
//   8    4  format version (2)
//   12   4  header_size: bytes from 0 up to and including the header checksum
//   16   8  model fingerprint
//   24   4  kv_format (1 = f16, 2 = q8, 3 = exact)
//   28   4  n_layer
//   32   4  n_kv_head
//   36   4  head_dim
//   40   4  n_tokens
//   44   4  alignment of layers (4096)
//   48   8  file_size (the whole file, padding included)
//   56  32  chunk key (SHA-256, core/kvstore/chunk-hash.h)
//   88      token ids, n_tokens x i32
//   ..      layer table, n_layer x {u64 offset, u64 size, u64 checksum}
//   ..   8  header checksum: xxh64(seed 0) of bytes [0, header_size - 8)
//   zero padding up to data_offset = align_up(header_size, 4096)
// Then layer l at data_offset + l * stride (stride = align_up(size, 4096)), so every layer starts
// on a 4096-byte boundary and an O_DIRECT read of it needs no bounce. A layer's payload is
//   f16: K rows [n_tokens][kv_dim] f16 | V rows [n_tokens][kv_dim] f16
//   exact: K rows [n_tokens][kv_dim] f32 | V rows [n_tokens][kv_dim] f16
//   q8 : K int8 [n_tokens][kv_dim] | K scales f16 [n_tokens][n_kv_head]
//        | V int8 [n_tokens][kv_dim] | V scales f16 [n_tokens][n_kv_head]
//        (scale = amax/127 of that head's row, value = int8 * scale)
// followed by zeros up to the stride; the layer checksum is xxh64 of the whole padded extent, so
// a flipped padding byte is caught too, seeded with the chunk key's first 8 bytes (little-endian,
// layer_seed()): a layer is bound to its chunk, and another chunk's layers spliced under this
// header (even with the table and header checksum redone) fail to verify. Readers recompute the
// layout from the header's shape and reject any table entry that disagrees, so no offset in a
// file is ever trusted.
//
// Version 1 was the same with seed 0 for layers. A library reading version 2 treats a version 1
// file as foreign (a miss: it is removed and the chunk recomputed; the store is a cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kvstore/kv-store.h"
#include "core/util/file-io.h"

namespace cacheblend {

// xxHash64 (Yann Collet's XXH64 algorithm, reimplemented here; bit-identical to the reference
// library for every seed). ~10+ GB/s per core: far cheaper than the SSD it guards.
uint64_t xxh64(const void* data, size_t n, uint64_t seed = 0);

namespace kv_file {

constexpr uint32_t version = 2;
constexpr uint64_t alignment = 4096;
constexpr size_t fixed_header_bytes = 88;
constexpr size_t layer_entry_bytes = 24;
extern const char magic[8];

// Shape limits: anything beyond them is rejected (writers: invalid_arg; readers: corrupt).
constexpr int32_t max_layers = 4096;
constexpr int32_t max_kv_heads = 4096;
constexpr int32_t max_head_dim = 65536;
constexpr int64_t max_kv_dim = 1 << 20;
constexpr int32_t max_tokens = 1 << 22;
constexpr uint64_t max_file_size = uint64_t(1) << 40;
constexpr uint64_t max_header_bytes =
    fixed_header_bytes + 4 * uint64_t(max_tokens) + layer_entry_bytes * max_layers + 8;

// The seed of every layer checksum of the chunk `key`: its first 8 bytes, little-endian.
uint64_t layer_seed(const chunk_key& key);

struct layer_entry {
    uint64_t offset = 0;
    uint64_t size = 0;      // payload bytes, padding excluded
    uint64_t checksum = 0;  // xxh64(layer_seed(key)) of the extent [offset, offset + stride)
};

struct layout {
    uint64_t header_size = 0;
    uint64_t data_offset = 0;
    uint64_t layer_bytes = 0;
    uint64_t layer_stride = 0;
    uint64_t file_size = 0;
};

// Throws error(invalid_arg) for a shape or format outside the limits.
layout compute_layout(const chunk_kv_meta& m);

struct header {
    uint32_t version = kv_file::version;
    chunk_kv_meta meta;
    chunk_key key;
    std::vector<token_id> tokens;
    std::vector<layer_entry> layers;
};

// header_size bytes, checksum included (no padding).
std::vector<uint8_t> encode_header(const header& h);

// Parses and verifies a header from `n` bytes at the start of a file of `file_size` bytes
// (n >= data_offset to also check the padding). Throws error(format) for a future version,
// error(unsupported) for an older one and error(corrupt) for anything else that is wrong. Does
// not compare with an expectation.
header decode_header(const uint8_t* data, size_t n, uint64_t file_size);

// Encodes one layer's payload (layer_bytes) from f32 rows; throws error(invalid_arg) when q8 meets
// a non-finite value or one too large for an f16 scale.
void encode_layer(const chunk_kv_meta& m, const float* k, const float* v, int64_t ld,
                  uint8_t* out);
// Decodes a payload into K rows of k_type and f16 V rows (stride ld elements); throws
// error(invalid_arg) for a k_type the format cannot give as stored (chunk_kv_reader::read_layer_as).
void decode_layer(const chunk_kv_meta& m, const uint8_t* payload, void* k, dtype k_type,
                  uint16_t* v, int64_t ld);
// Throws error(invalid_arg) unless K of format m.format can be read in k_type, and a layer with
// this ld and these pointers: the readers' argument check, before any I/O.
void check_read_args(const chunk_kv_meta& m, int32_t layer, const void* k, dtype k_type,
                     const uint16_t* v, int64_t ld, const char* who);

// Builds a whole file in memory (layers in any order) and writes it to a descriptor.
class builder {
public:
    // Throws error(invalid_arg) for a bad shape or tokens.size() != meta.n_tokens.
    builder(const chunk_kv_meta& meta, const chunk_key& key, std::vector<token_id> tokens);
    void put_layer(int32_t layer, const float* k, const float* v, int64_t ld);
    bool complete() const;
    // Header, then one pwrite per layer. Throws error(misuse) when a layer is missing and
    // error(io_write) on failure.
    void write(file_io& io, int fd, const std::string& path);
    const kv_file::layout& file_layout() const { return layout_; }
    const chunk_kv_meta& meta() const { return hdr_.meta; }
    // The header as write() puts it (checksums of the layers put so far) and layer l's payload
    // (layer_bytes): the shared tier stores these as separate values (core/kvstore/kv-tiered.h).
    std::vector<uint8_t> encoded_header() const { return encode_header(hdr_); }
    const uint8_t* layer_payload(int32_t l) const {
        return buf_.get() + hdr_.layers[static_cast<size_t>(l)].offset;
    }

private:
    header hdr_;
    kv_file::layout layout_;
    aligned_buffer buf_;
    std::vector<bool> have_;
};

}  // namespace kv_file

// A verified, open chunk file. One thread at a time (it reuses one aligned read buffer).
class kv_file_reader final : public chunk_kv_reader {
public:
    kv_file_reader(std::shared_ptr<file_io> io, io_fd fd, std::string path, kv_file::header h,
                   const file_stat& st);
    const chunk_kv_meta& meta() const override { return hdr_.meta; }
    const std::vector<token_id>& tokens() const override { return hdr_.tokens; }
    // Throws error(corrupt) on a checksum mismatch or truncation (after calling on_corrupt once),
    // error(io_read) on an I/O error (the file is kept), error(invalid_arg) for a bad layer/ld.
    void read_layer_as(int32_t layer, void* k, dtype k_type, uint16_t* v, int64_t ld) override;
    uint64_t bytes_read() const override { return bytes_read_; }

    const chunk_key& key() const { return hdr_.key; }
    const std::string& path() const { return path_; }
    const file_stat& identity() const { return st_; }  // dev/ino of the file that was verified
    void set_on_corrupt(std::function<void()> fn) { on_corrupt_ = std::move(fn); }

private:
    [[noreturn]] void corrupt(const std::string& why);

    std::shared_ptr<file_io> io_;
    io_fd fd_;
    std::string path_;
    kv_file::header hdr_;
    kv_file::layout layout_;
    file_stat st_;
    aligned_buffer buf_;
    uint64_t bytes_read_ = 0;
    std::function<void()> on_corrupt_;
};

enum class kv_open_status {
    ok,
    missing,         // no such file
    io_error,        // could not read it (kept: not evidence of damage)
    // bad magic, checksum, size, layout, a key that is not the file's name, or not a regular
    // file owned by us that others cannot write (a symlink, a FIFO, a planted file)
    corrupt,
    foreign,         // valid, but another model / format / shape or an older version
    future_version,  // written by a newer library
};

struct kv_open_result {
    kv_open_status status = kv_open_status::missing;
    std::string detail;  // why, for logs
    file_stat st;        // identity of the file examined (valid unless missing / open failed)
    bool have_st = false;
    std::unique_ptr<kv_file_reader> reader;  // only when ok
};

// Opens `path` (never through a symlink, never blocking on a FIFO), verifies its header, and
// checks it holds `key` with meta equal to `expect`. Never throws for a bad file (only
// std::bad_alloc).
kv_open_result open_kv_file(const std::shared_ptr<file_io>& io, const std::string& path,
                            const chunk_key& key, const chunk_kv_meta& expect, bool direct_io);
// The same with expect == nullptr accepting any model and shape (checks that know no model).
kv_open_result open_kv_file(const std::shared_ptr<file_io>& io, const std::string& path,
                            const chunk_key& key, const chunk_kv_meta* expect, bool direct_io);

}  // namespace cacheblend
