// Opening a KV store: create its folders owner-only (and refuse one another user could write),
// open or create the SQLite index (0600, WAL, schema version checked; a damaged index is rebuilt
// from the files, which are the truth), then reconcile: remove dead writers' temp files, adopt
// chunk files the index lost, drop rows whose file is gone.
#include "core/kvstore/kv-store-impl.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "core/kvstore/kv-store-sqlite.h"
#include "core/util/log.h"
#include "core/util/private-path.h"

namespace cacheblend {

namespace kv_store_detail {

namespace {

bool pid_alive(long pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

void store_impl::make_dirs() {
    if (dir_.empty()) throw error(status::invalid_arg, "kvstore: empty directory path");
    // mkdir -p, each new level owner-only
    for (size_t pos = 1; pos <= dir_.size(); ++pos) {
        if (pos != dir_.size() && dir_[pos] != '/') continue;
        const std::string sub = dir_.substr(0, pos);
        const int err = io_->mkdir(sub, 0700);
        file_stat st;
        // Some file systems answer EACCES or EROFS for a directory that exists: look first.
        if (err != 0 && err != EEXIST && !(io_->stat(sub, &st) == 0 && st.is_dir))
            check_io(err, status::io, "mkdir", sub);
    }
    file_stat st;
    check_io(io_->stat(dir_, &st), status::io, "stat", dir_);
    if (!st.is_dir) throw error(status::io, fmt("kvstore: %s is not a directory", dir_.c_str()));
    // KV another user could have written would be served as ours: refuse such a store.
    require_private("KV store", dir_, st);
}

void store_impl::open_index() {
    const std::string path = dir_ + "/" + k_index_name;
    // Create it ourselves so it is 0600 from birth; SQLite gives -wal/-shm the same mode.
    int fd = -1;
    check_io(io_->open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0600, &fd), status::io,
             "create", path);
    io_fd f(io_.get(), fd);
    file_stat st;
    check_io(io_->fstat(fd, &st), status::io, "fstat", path);
    if (!st.is_reg) throw error(status::io, fmt("kvstore: %s is not a regular file", path.c_str()));
    require_private("KV store index", path, st);
    f.reset();
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        sqlite3_close_v2(db_);
        db_ = nullptr;
        throw error(status::catalog,
                    fmt("kvstore index: open %s: %s (%d)", path.c_str(), msg.c_str(), rc));
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, k_busy_timeout_ms);
}

void store_impl::configure_index() {
    // journal_mode needs a moment alone with the file; another process may be opening too.
    for (int attempt = 0;; ++attempt) {
        try {
            stmt s(db_, "PRAGMA journal_mode=WAL");
            s.step();
            break;
        } catch (const sqlite_error& e) {
            if ((e.rc() & 0xff) != SQLITE_BUSY || attempt >= 20) throw;
            ::usleep(50000);
        }
    }
    exec(db_, "PRAGMA synchronous=NORMAL");  // WAL: durable at checkpoints, never corrupt
    txn t(db_);
    int64_t ver = 0;
    {
        stmt s(db_, "PRAGMA user_version");
        if (s.step()) ver = s.i64(0);
    }
    if (ver > k_schema_version)
        throw error(status::format, fmt("kvstore index: schema version %lld is newer than this "
                                        "library's (%d)",
                                        static_cast<long long>(ver), k_schema_version));
    if (ver < 1) {
        exec(db_,
             "CREATE TABLE IF NOT EXISTS entries("
             " key TEXT PRIMARY KEY,"
             " bytes INTEGER NOT NULL,"
             " created INTEGER NOT NULL,"
             " last_access INTEGER NOT NULL,"
             " model_fingerprint INTEGER NOT NULL) WITHOUT ROWID");
        exec(db_, "CREATE INDEX IF NOT EXISTS entries_lru ON entries(last_access)");
        exec(db_, "PRAGMA user_version=1");
    }
    t.commit();
}

void store_impl::open_all() {
    make_dirs();
    for (int attempt = 0;; ++attempt) {
        try {
            open_index();
            configure_index();
            break;
        } catch (const error& e) {
            const auto* se = dynamic_cast<const sqlite_error*>(&e);
            const int rc = se ? (se->rc() & 0xff) : 0;
            if (db_) sqlite3_close_v2(db_);
            db_ = nullptr;
            // The index is a cache of what the files say: if it is not a database, rebuild it.
            if (attempt > 0 || (rc != SQLITE_NOTADB && rc != SQLITE_CORRUPT)) throw;
            log_write(log_level::warn, "kvstore: index in %s is damaged (%s); rebuilding",
                      dir_.c_str(), e.what());
            for (const char* suffix : {"", "-wal", "-shm"})
                io_->unlink(dir_ + "/" + k_index_name + suffix);
        }
    }
    reconcile();
    evict(budget_, nullptr);
}

void store_impl::reconcile() {
    // One fsync makes every shard directory that exists now durable (a writer that created one
    // may have died before syncing its parent).
    check_io(io_->fsync_dir(dir_), status::io_write, "fsync", dir_);
    std::vector<std::string> shards;
    check_io(io_->list_dir(dir_, &shards), status::io, "list", dir_);
    struct found {
        std::string hex;
        file_stat st;
    };
    std::vector<found> files;
    const int64_t now_ns = wall_us() * 1000;
    const long self = static_cast<long>(::getpid());
    for (const std::string& s : shards) {
        if (s.size() != 2 || !is_hex_key(s + std::string(62, '0'))) continue;
        const std::string sd = dir_ + "/" + s;
        file_stat st;
        if (io_->lstat(sd, &st) != 0) continue;
        if (st.is_link) {
            // We only ever create folders here: a link would lead lookups out of the store.
            log_write(log_level::warn, "kvstore: removing symbolic link %s", sd.c_str());
            io_->unlink(sd);
            continue;
        }
        if (!st.is_dir) continue;
        require_private("KV store folder", sd, st);
        {
            std::lock_guard<std::mutex> lk(mu_);
            durable_shards_.insert(sd);
        }
        std::vector<std::string> names;
        if (io_->list_dir(sd, &names) != 0) continue;
        for (const std::string& n : names) {
            const std::string path = sd + "/" + n;
            if (n.compare(0, sizeof(k_temp_prefix) - 1, k_temp_prefix) == 0) {
                // tmp-<pid>-<seq>-<nonce>: a dead writer's leftovers, or anything a minute old
                const long pid = std::strtol(n.c_str() + sizeof(k_temp_prefix) - 1, nullptr, 10);
                if (io_->stat(path, &st) != 0) continue;
                const bool stale = now_ns - st.mtime_ns > k_stale_temp_ns;
                if (stale || (pid != self && !pid_alive(pid))) io_->unlink(path);
                continue;
            }
            if (n.size() != 67 || n.compare(64, 3, ".kv") != 0) continue;
            const std::string hex = n.substr(0, 64);
            if (!is_hex_key(hex) || hex.compare(0, 2, s) != 0) continue;
            if (io_->lstat(path, &st) != 0 || !st.is_reg) continue;  // links: lookup removes
            files.push_back({hex, st});
        }
    }

    std::lock_guard<std::mutex> lk(mu_);
    std::unordered_set<std::string> rows;
    {
        stmt s(db_, "SELECT key FROM entries");
        while (s.step()) rows.insert(s.text(0));
    }
    std::unordered_set<std::string> on_disk;
    txn t(db_);
    for (const found& f : files) {
        on_disk.insert(f.hex);
        if (rows.count(f.hex)) continue;
        // Adopt: verification happens at lookup; the fingerprint is informative only.
        uint64_t fp = 0;
        int fd = -1;
        if (io_->open(file_path(f.hex), O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, &fd) != 0)
            continue;  // evicted meanwhile
        uint8_t hdr[24];
        size_t got = 0;
        if (io_->pread(fd, hdr, sizeof(hdr), 0, &got) == 0 && got == sizeof(hdr) &&
            std::memcmp(hdr, kv_file::magic, 8) == 0)
            for (int i = 0; i < 8; ++i) fp |= static_cast<uint64_t>(hdr[16 + i]) << (8 * i);
        io_->close(fd);
        const int64_t t_us = f.st.mtime_ns / 1000;
        stmt s(db_,
               "INSERT OR IGNORE INTO entries(key, bytes, created, last_access, "
               "model_fingerprint) VALUES(?1, ?2, ?3, ?3, ?4)");
        s.bind(1, f.hex).bind(2, static_cast<int64_t>(f.st.size)).bind(3, t_us);
        s.bind(4, static_cast<int64_t>(fp));
        s.step();
    }
    for (const std::string& hex : rows) {
        if (on_disk.count(hex)) continue;
        file_stat st;
        // Re-check: a writer may have renamed it into place after our listing.
        if (io_->lstat(file_path(hex), &st) == ENOENT) {
            stmt s(db_, "DELETE FROM entries WHERE key = ?1");
            s.bind(1, hex).step();
        }
    }
    t.commit();
}

}  // namespace kv_store_detail

}  // namespace cacheblend
