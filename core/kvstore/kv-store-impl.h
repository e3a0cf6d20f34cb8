// The KV store's implementation class (store_impl) and its writer, shared by the files that
// implement it:
//   kv-store.cpp        the public face and the read side: lookup, verify, keys, remove, stats,
//                       and the index bookkeeping they share (LRU stamps, dropping entries)
//   kv-store-open.cpp   opening: folders, the SQLite index (rebuilt when damaged), and
//                       reconciling files with index rows after a crash
//   kv-store-write.cpp  the write side: atomic publication of a chunk file, LRU eviction
// Files are the truth, the SQLite index is bookkeeping (docs/ARCHITECTURE.md, 'KV store').
// Internal to core/kvstore/kv-store*.cpp.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/kvstore/kv-file.h"
#include "core/kvstore/kv-store.h"
#include "core/util/file-io.h"

namespace cacheblend {
namespace kv_store_detail {

constexpr uint64_t k_default_budget = uint64_t(8) << 30;
constexpr int k_schema_version = 1;
constexpr int k_busy_timeout_ms = 10000;
constexpr int64_t k_stale_temp_ns = int64_t(60) * 1000000000;  // a writer never takes a minute
constexpr char k_index_name[] = "index.sqlite";
constexpr char k_temp_prefix[] = "tmp-";

inline int64_t wall_us() {
    using namespace std::chrono;
    return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

inline bool is_hex_key(const std::string& s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

class store_impl;

class store_writer final : public chunk_kv_writer {
public:
    store_writer(std::shared_ptr<store_impl> s, const chunk_key& key, const chunk_kv_meta& meta,
                 const std::vector<token_id>& tokens)
        : store_(std::move(s)), key_(key), b_(meta, key, tokens) {}
    void put_layer(int32_t layer, const float* k, const float* v, int64_t ld) override {
        if (done_) throw error(status::misuse, "kvstore: put_layer after commit");
        b_.put_layer(layer, k, v, ld);
    }
    void commit() override;

private:
    std::shared_ptr<store_impl> store_;
    chunk_key key_;
    kv_file::builder b_;
    bool done_ = false;
};

class store_impl final : public kv_store, public std::enable_shared_from_this<store_impl> {
public:
    explicit store_impl(const kv_store_params& p)
        : dir_(p.dir),
          budget_(p.budget_bytes ? p.budget_bytes : k_default_budget),
          direct_(p.direct_io),
          io_(p.io ? p.io : posix_file_io()) {
        while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
        std::random_device rd;
        nonce_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(wall_us());
    }
    ~store_impl() override {
        if (db_) sqlite3_close_v2(db_);
    }

    void open_all();

    std::unique_ptr<chunk_kv_reader> lookup(const chunk_key& key,
                                            const chunk_kv_meta& expect) override;
    std::unique_ptr<chunk_kv_writer> create(const chunk_key& key, const chunk_kv_meta& meta,
                                            const std::vector<token_id>& tokens) override {
        return std::make_unique<store_writer>(shared_from_this(), key, meta, tokens);
    }
    bool contains(const chunk_key& key) override {
        file_stat st;  // lstat: a symlink is never a stored chunk (lookup removes it)
        return io_->lstat(file_path(key.hex()), &st) == 0 && st.is_reg;
    }
    bool remove(const chunk_key& key) override;
    void evict_to(uint64_t bytes) override { evict(bytes, nullptr); }
    kv_verify_result verify(const chunk_key& key, const chunk_kv_meta* expect) override;
    std::vector<chunk_key> keys() override;
    std::unordered_map<std::string, uint64_t> bytes_by_key() override;
    kv_store_stats stats() override;
    const std::string& dir() const override { return dir_; }

    void commit(const chunk_key& key, kv_file::builder& b);

private:
    std::string shard_dir(const std::string& hex) const { return dir_ + "/" + hex.substr(0, 2); }
    std::string file_path(const std::string& hex) const {
        return shard_dir(hex) + "/" + hex + ".kv";
    }

    void make_dirs();
    void open_index();
    void configure_index();
    void reconcile();
    void ensure_shard(const std::string& shard);
    void evict(uint64_t target, const std::string* keep);
    // Removes the file if it is still the one described by `st` (a concurrent writer may have
    // replaced it with a good one), and the index row if no file is left.
    void drop_file(const std::string& hex, const file_stat* st);
    void drop_row(const std::string& hex);
    void touch(const std::string& hex, const file_stat& ident, uint64_t fingerprint);
    int64_t stamp();  // under mu_: strictly increasing within this store object

    std::string dir_;
    uint64_t budget_;
    bool direct_;
    std::shared_ptr<file_io> io_;
    uint64_t nonce_ = 0;
    std::atomic<uint64_t> temp_seq_{0};

    std::mutex mu_;  // guards db_, last_stamp_, durable_shards_
    sqlite3* db_ = nullptr;
    int64_t last_stamp_ = 0;
    std::set<std::string> durable_shards_;

    std::atomic<uint64_t> hits_{0}, misses_{0}, corrupt_removed_{0}, foreign_removed_{0},
        evictions_{0};
};

}  // namespace kv_store_detail
}  // namespace cacheblend
