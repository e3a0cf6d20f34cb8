// Content-addressed chunk KV store on SSD (docs/ARCHITECTURE.md, 'KV store'). One file per chunk
// holding, per layer, K before RoPE and V for the chunk's tokens, so the blending engine can stream
// layer by layer and rotate K to any position. Files are written atomically, verified on read
// (header + per-layer checksums) and indexed in SQLite (WAL) so threads and processes share one
// store under a byte budget with LRU eviction. A corrupt, truncated or foreign file is a miss:
// removed, never used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/kvstore/chunk-hash.h"
#include "core/tokenizer/tokenizer.h"
#include "kernels/dtype.h"

namespace cacheblend {

class file_io;

enum class kv_format : uint32_t {
    f16 = 1,  // K and V rows as IEEE half
    q8 = 2,   // int8 with one f16 scale per token per KV head (half the bytes)
    // K as f32 (before RoPE) and V as f16: 1.5x the bytes of f16, and relocation then computes
    // exactly the keys full prefill stores (f16 K would be rounded twice: before and after RoPE).
    exact = 3,
};
const char* kv_format_name(kv_format f);
// The type a format's K rows are read in without widening or rounding: f16 for the f16 format
// (copied as stored: half the bytes of f32 on the way to relocation, which a device backend
// uploads), f32 for the others (exact's keys are f32; q8's are int8 times a scale).
inline dtype stored_k_type(kv_format f) { return f == kv_format::f16 ? dtype::f16 : dtype::f32; }
// The format named by kv_format_name; false for any other text.
bool parse_kv_format(const std::string& s, kv_format* out);

// What a stored chunk must match to be usable (anything else is foreign and a miss).
struct chunk_kv_meta {
    uint64_t model_fingerprint = 0;
    kv_format format = kv_format::f16;
    int32_t n_layer = 0;
    int32_t n_kv_head = 0;
    int32_t head_dim = 0;
    int32_t n_tokens = 0;
    int64_t kv_dim() const { return static_cast<int64_t>(n_kv_head) * head_dim; }
};

// Streams one chunk's layers out of a verified file. read_layer() checks that layer's checksum
// and throws cacheblend::error(status::corrupt) on mismatch (the store then deletes the file), or
// error(status::io_read) on an I/O error (file kept). One thread at a time per reader (it may
// move between threads); it stays valid after the store is freed or the entry evicted.
class chunk_kv_reader {
public:
    virtual ~chunk_kv_reader() = default;
    virtual const chunk_kv_meta& meta() const = 0;
    virtual const std::vector<token_id>& tokens() const = 0;
    // K (pre-RoPE) rows of `layer` in k_type and V rows as f16: [n_tokens][kv_dim] each, row stride
    // ld elements. k_type is f32 (any format: the exact format loses nothing on the way to
    // relocation) or f16 for the f16 format only (stored_k_type: no widening); any other is
    // error(invalid_arg), before anything is read.
    virtual void read_layer_as(int32_t layer, void* k, dtype k_type, uint16_t* v, int64_t ld) = 0;
    // K as f32.
    void read_layer(int32_t layer, float* k, uint16_t* v, int64_t ld) {
        read_layer_as(layer, k, dtype::f32, v, ld);
    }
    virtual uint64_t bytes_read() const = 0;
    // True for a chunk streamed from the shared tier (core/kvstore/kv-tiered.h): its read errors
    // are the network's, so the request recomputes the chunk instead of failing.
    virtual bool is_remote() const { return false; }
};

// Collects a chunk's layers (any order) and publishes the file atomically on commit().
class chunk_kv_writer {
public:
    virtual ~chunk_kv_writer() = default;
    // f32 rows [n_tokens][kv_dim] (stride ld floats): K before RoPE and V.
    virtual void put_layer(int32_t layer, const float* k, const float* v, int64_t ld) = 0;
    // Writes temp file, fsyncs, renames, fsyncs the directory, records it in the index.
    // Throws on I/O failure; the store is left without the entry (never half-written).
    virtual void commit() = 0;
};

// What a full read of a stored chunk file found (kv_store::verify).
enum class kv_verify_status {
    ok,
    missing,   // no file (evicted, removed, never written): the store is a cache, not an error
    corrupt,   // truncated, a bad header or layer checksum, or it holds another chunk key
    foreign,   // valid, but not the model/format/shape asked for (or a newer file version)
    io_error,  // could not be read (not evidence of damage)
};
const char* kv_verify_status_name(kv_verify_status s);

struct kv_verify_result {
    kv_verify_status status = kv_verify_status::missing;
    std::string detail;  // why, naming the file; empty when ok
};

struct kv_store_params {
    std::string dir;               // created 0700 if missing
    uint64_t budget_bytes = 0;     // 0: 8 GiB
    bool direct_io = false;        // read with O_DIRECT (cold-cache measurements)
    std::shared_ptr<file_io> io;   // nullptr: the OS; tests inject failures here
};

struct kv_store_stats {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t hits = 0, misses = 0, corrupt_removed = 0, evictions = 0;
    uint64_t foreign_removed = 0;  // valid files of another model/format/shape or a newer version
};

// What a lookup found beyond the reader (kv_store::lookup_noted).
struct kv_lookup_info {
    std::string notice;  // why the shared tier was not used or its value not trusted ("" if so)
};

class kv_store {
public:
    static std::shared_ptr<kv_store> open(const kv_store_params& p);
    virtual ~kv_store() = default;

    // nullptr on a miss (absent, or present but corrupt/foreign: then it is deleted; an I/O
    // error reading the header is a miss that keeps the file). Verifies the header, not the
    // layers (read_layer does, as they stream). Files are 0600 in 0700 folders.
    virtual std::unique_ptr<chunk_kv_reader> lookup(const chunk_key& key,
                                                     const chunk_kv_meta& expect) = 0;
    // The same, telling the request why a tier was skipped (a store with one tier has nothing
    // to tell). A request's path asks this one; info may be nullptr.
    virtual std::unique_ptr<chunk_kv_reader> lookup_noted(const chunk_key& key,
                                                          const chunk_kv_meta& expect,
                                                          kv_lookup_info* info) {
        (void)info;
        return lookup(key, expect);
    }
    virtual std::unique_ptr<chunk_kv_writer> create(const chunk_key& key, const chunk_kv_meta& meta,
                                                    const std::vector<token_id>& tokens) = 0;
    virtual bool contains(const chunk_key& key) = 0;  // a file is present (not verified)
    virtual bool remove(const chunk_key& key) = 0;    // true if there was a file or row
    virtual void evict_to(uint64_t bytes) = 0;         // LRU entries out until <= bytes
    // Reads the whole file: header, key (the file must hold `key`), and every layer's checksum;
    // with `expect`, also its model and shape. Changes nothing (no removal, no LRU touch, no
    // counters): checks report, repairs decide.
    virtual kv_verify_result verify(const chunk_key& key, const chunk_kv_meta* expect) = 0;
    // Keys of every chunk file present, in no particular order (not verified; no temp files).
    virtual std::vector<chunk_key> keys() = 0;
    // Bytes of every indexed chunk file by hex key (the index's sizes, as stats() sums them).
    virtual std::unordered_map<std::string, uint64_t> bytes_by_key() = 0;
    virtual kv_store_stats stats() = 0;
    virtual const std::string& dir() const = 0;
};

}  // namespace cacheblend
