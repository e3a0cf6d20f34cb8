// Two tiers of chunk KV (docs/ARCHITECTURE.md, 'KV store'): this machine's store on SSD first,
// then a shared server (core/kvstore/kv-remote.h) that other machines fill.
//
// - lookup: the local store; on a miss, the shared tier. Its value is the KV file format split in
//   named values: "cbl:kv:<key hex>:hdr" holds the file's header (model fingerprint, format,
//   shape, key, tokens, layer table with checksums) and ":L<n>" layer n's payload, so the layer
//   loader streams layers from the server one by one as it does from disk. Everything is verified
//   before use (header checksum, key, model and shape, each layer's size and checksum): a corrupt,
//   truncated, evicted or foreign value is a miss, never used.
// - create: written to the local store and through to the shared tier (all values in one MSET).
// - A remote hit is not copied into the local store: the shared tier is the cluster's copy, the
//   local budget keeps what this machine computed, and the request path stays free of extra
//   writes (README, "Serving many users").
// - The shared tier never fails a request: when it is down, slow or refuses us (wrong password)
//   lookups are misses with a notice, write-through is skipped (counted in remote_stats).
// - Everything else (remove, verify, eviction, stats) is the local store's; remove also deletes
//   the shared header, so a value found corrupt is not served again.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/kvstore/kv-remote.h"
#include "core/kvstore/kv-store.h"

namespace cacheblend {

struct kv_remote_stats {
    uint64_t hits = 0, misses = 0, rejected = 0, errors = 0, writes = 0, write_errors = 0;
};

// `local` alone, or in front of the shared tier named by url (empty: $CBL_KV_REMOTE, else none).
// A bad URL (error(invalid_arg)) or a build without Redis (error(unsupported)) fails: a machine
// configured to share must not silently run alone. A server that is down does not: only
// requests reach it.
std::shared_ptr<kv_store> with_shared_tier(std::shared_ptr<kv_store> local, std::string url);

class tiered_kv_store final : public kv_store {
public:
    tiered_kv_store(std::shared_ptr<kv_store> local, std::shared_ptr<kv_remote> remote);

    std::unique_ptr<chunk_kv_reader> lookup(const chunk_key& key,
                                            const chunk_kv_meta& expect) override;
    std::unique_ptr<chunk_kv_reader> lookup_noted(const chunk_key& key, const chunk_kv_meta& expect,
                                                  kv_lookup_info* info) override;
    std::unique_ptr<chunk_kv_writer> create(const chunk_key& key, const chunk_kv_meta& meta,
                                            const std::vector<token_id>& tokens) override;
    bool contains(const chunk_key& key) override { return local_->contains(key); }
    bool remove(const chunk_key& key) override;
    void evict_to(uint64_t bytes) override { local_->evict_to(bytes); }
    kv_verify_result verify(const chunk_key& key, const chunk_kv_meta* expect) override {
        return local_->verify(key, expect);
    }
    std::vector<chunk_key> keys() override { return local_->keys(); }
    std::unordered_map<std::string, uint64_t> bytes_by_key() override {
        return local_->bytes_by_key();
    }
    kv_store_stats stats() override { return local_->stats(); }
    const std::string& dir() const override { return local_->dir(); }

    kv_remote_stats remote_stats() const;
    const std::shared_ptr<kv_store>& local() const { return local_; }

    // The names a chunk's values have on the server.
    static std::string header_name(const chunk_key& key);
    static std::string layer_name(const chunk_key& key, int32_t layer);

private:
    struct counters {
        std::atomic<uint64_t> hits{0}, misses{0}, rejected{0}, errors{0}, writes{0},
            write_errors{0};
    };
    std::shared_ptr<kv_store> local_;
    std::shared_ptr<kv_remote> remote_;
    std::shared_ptr<counters> n_;  // writers outlive nothing, but share the counters safely
    friend class tiered_writer;
};

}  // namespace cacheblend
