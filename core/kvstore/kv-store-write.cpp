// The KV store's write side: a chunk file is written to a temp file, synced and renamed into its
// shard folder (made durable first), then indexed; a failure at any step takes the entry back.
// After each commit the store evicts least recently used files down to its byte budget.
#include "core/kvstore/kv-store-impl.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/kvstore/kv-store-sqlite.h"
#include "core/util/log.h"
#include "core/util/private-path.h"

namespace cacheblend {

namespace kv_store_detail {

void store_writer::commit() {
    if (done_) throw error(status::misuse, "kvstore: commit called twice");
    store_->commit(key_, b_);
    done_ = true;
}

void store_impl::ensure_shard(const std::string& shard) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (durable_shards_.count(shard)) return;
    }
    int err = io_->mkdir(shard, 0700);
    file_stat st;
    if (err == EEXIST && io_->lstat(shard, &st) == 0 && st.is_link) {
        // A link planted since open (reconcile removes those it finds): ours is a folder.
        io_->unlink(shard);
        err = io_->mkdir(shard, 0700);
    }
    if (err != 0 && err != EEXIST) check_io(err, status::io_write, "mkdir", shard);
    check_io(io_->lstat(shard, &st), status::io_write, "stat", shard);
    if (!st.is_dir)
        throw error(status::io_write, fmt("kvstore: %s is not a directory", shard.c_str()));
    require_private("KV store folder", shard, st);
    // The new directory entry must be durable before files in it can be.
    check_io(io_->fsync_dir(dir_), status::io_write, "fsync", dir_);
    std::lock_guard<std::mutex> lk(mu_);
    durable_shards_.insert(shard);
}

void store_impl::commit(const chunk_key& key, kv_file::builder& b) {
    if (!b.complete())
        throw error(status::misuse,
                    fmt("kvstore: commit of %s before all layers were put", key.hex().c_str()));
    const std::string hex = key.hex();
    const std::string shard = shard_dir(hex);
    const std::string final_path = file_path(hex);
    ensure_shard(shard);

    std::string tmp;
    int fd = -1;
    for (int attempt = 0;; ++attempt) {
        tmp = fmt("%s/%s%ld-%llu-%016llx", shard.c_str(), k_temp_prefix,
                  static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(temp_seq_.fetch_add(1)),
                  static_cast<unsigned long long>(nonce_));
        const int err = io_->open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, &fd);
        if (err == 0) break;
        if (err != EEXIST || attempt >= 100) check_io(err, status::io_write, "create", tmp);
    }
    io_fd f(io_.get(), fd);
    file_stat ident;
    try {
        b.write(*io_, fd, tmp);
        check_io(io_->fdatasync(fd), status::io_write, "fdatasync", tmp);
        check_io(io_->fstat(fd, &ident), status::io_write, "fstat", tmp);
        // close() can report a deferred write error (NFS): treat it as one
        check_io(f.close(), status::io_write, "close", tmp);
        check_io(io_->rename(tmp, final_path), status::io_write, "rename", tmp);
    } catch (...) {
        f.reset();
        io_->unlink(tmp);
        throw;
    }
    try {
        check_io(io_->fsync_dir(shard), status::io_write, "fsync", shard);
        std::lock_guard<std::mutex> lk(mu_);
        const int64_t now = stamp();
        stmt s(db_,
               "INSERT INTO entries(key, bytes, created, last_access, model_fingerprint) "
               "VALUES(?1, ?2, ?3, ?3, ?4) ON CONFLICT(key) DO UPDATE SET "
               "bytes = excluded.bytes, created = excluded.created, "
               "last_access = excluded.last_access, "
               "model_fingerprint = excluded.model_fingerprint");
        s.bind(1, hex).bind(2, static_cast<int64_t>(b.file_layout().file_size)).bind(3, now);
        s.bind(4, static_cast<int64_t>(b.meta().model_fingerprint));
        s.step();
    } catch (...) {
        // The rename may not survive a power cut, or the index lost track: take the entry back
        // so a failed commit never leaves it behind.
        drop_file(hex, &ident);
        throw;
    }
    try {
        evict(budget_, &hex);
    } catch (const error& e) {
        log_write(log_level::warn, "kvstore: eviction after commit failed: %s", e.what());
    }
}

void store_impl::evict(uint64_t target, const std::string* keep) {
    std::lock_guard<std::mutex> lk(mu_);
    // The write lock spans the whole pass, so processes sharing the store evict one at a time.
    txn t(db_);
    uint64_t total = 0;
    {
        stmt s(db_, "SELECT COALESCE(SUM(bytes), 0) FROM entries");
        if (s.step()) total = static_cast<uint64_t>(s.i64(0));
    }
    if (total <= target) {
        t.commit();
        return;
    }
    struct victim {
        std::string hex;
        uint64_t bytes;
    };
    std::vector<victim> victims;
    {
        stmt s(db_,
               "SELECT key, bytes FROM entries WHERE key != ?1 "
               "ORDER BY last_access ASC, key ASC");
        s.bind(1, keep ? *keep : std::string());
        uint64_t left = total;
        while (left > target && s.step()) {
            victims.push_back({s.text(0), static_cast<uint64_t>(s.i64(1))});
            left -= std::min<uint64_t>(left, victims.back().bytes);
        }
    }
    for (const victim& v : victims) {
        const std::string path = file_path(v.hex);
        const int err = io_->unlink(path);
        if (err != 0 && err != ENOENT) {
            log_write(log_level::warn, "kvstore: evict %s: %s", path.c_str(),
                      errno_name(err).c_str());
            continue;
        }
        stmt s(db_, "DELETE FROM entries WHERE key = ?1");
        s.bind(1, v.hex).step();
        if (err == 0) evictions_++;
    }
    t.commit();
}

}  // namespace kv_store_detail

}  // namespace cacheblend
