// KV store: files are the truth, the SQLite index is bookkeeping (sizes, LRU stamps). A file is
// usable only if it verifies; an index row without a file is dropped, a file without a row (a
// writer killed between rename and insert) is adopted. So a crash at any point leaves, at worst,
// an orphaned temp file (cleaned at open) or an unindexed file (adopted at open or lookup).
#include "core/kvstore/kv-store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <unordered_set>

#include "core/util/file-io.h"
#include "core/kvstore/kv-file.h"
#include "core/util/log.h"
#include "core/util/private-path.h"

namespace cacheblend {

const char* kv_format_name(kv_format f) {
    switch (f) {
        case kv_format::f16: return "f16";
        case kv_format::q8: return "q8";
        case kv_format::exact: return "exact";
    }
    return "unknown";
}

const char* kv_verify_status_name(kv_verify_status s) {
    switch (s) {
        case kv_verify_status::ok: return "ok";
        case kv_verify_status::missing: return "missing";
        case kv_verify_status::corrupt: return "corrupt";
        case kv_verify_status::foreign: return "foreign";
        case kv_verify_status::io_error: return "io_error";
    }
    return "unknown";
}

namespace {

constexpr uint64_t k_default_budget = uint64_t(8) << 30;
constexpr int k_schema_version = 1;
constexpr int k_busy_timeout_ms = 10000;
constexpr int64_t k_stale_temp_ns = int64_t(60) * 1000000000;  // a writer never takes a minute
constexpr char k_index_name[] = "index.sqlite";
constexpr char k_temp_prefix[] = "tmp-";

int64_t wall_us() {
    using namespace std::chrono;
    return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

bool is_hex_key(const std::string& s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

bool pid_alive(long pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// ---- SQLite helpers (parameterized statements only) ----

// Carries SQLite's code: a ROLLBACK while unwinding resets sqlite3_errcode().
class sqlite_error : public error {
public:
    sqlite_error(int rc, const std::string& msg) : error(status::catalog, msg), rc_(rc) {}
    int rc() const { return rc_; }

private:
    int rc_;
};

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const char* what) {
    if (db) rc = sqlite3_extended_errcode(db);
    throw sqlite_error(rc, fmt("kvstore index: %s: %s (%d)", what,
                               db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), rc));
}

class stmt {
public:
    stmt(sqlite3* db, const char* sql) : db_(db) {
        const int rc = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
        if (rc != SQLITE_OK) throw_sqlite(db, rc, "prepare");
    }
    ~stmt() { sqlite3_finalize(s_); }
    stmt(const stmt&) = delete;
    stmt& operator=(const stmt&) = delete;

    stmt& bind(int i, int64_t v) {
        check(sqlite3_bind_int64(s_, i, v));
        return *this;
    }
    stmt& bind(int i, const std::string& v) {
        check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
        return *this;
    }
    // true while a row is available
    bool step() {
        const int rc = sqlite3_step(s_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw_sqlite(db_, rc, sqlite3_sql(s_));
    }
    int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
    std::string text(int col) const {
        const unsigned char* t = sqlite3_column_text(s_, col);
        return t ? std::string(reinterpret_cast<const char*>(t),
                               static_cast<size_t>(sqlite3_column_bytes(s_, col)))
                 : std::string();
    }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
    }
    sqlite3* db_;
    sqlite3_stmt* s_ = nullptr;
};

void exec(sqlite3* db, const char* sql) {
    stmt s(db, sql);
    while (s.step()) {
    }
}

// BEGIN IMMEDIATE ... COMMIT, rolled back if anything throws.
class txn {
public:
    explicit txn(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
    ~txn() {
        if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    void commit() {
        exec(db_, "COMMIT");
        done_ = true;
    }

private:
    sqlite3* db_;
    bool done_ = false;
};

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
        : dir_(p.dir), budget_(p.budget_bytes ? p.budget_bytes : k_default_budget),
          direct_(p.direct_io), io_(p.io ? p.io : posix_file_io()) {
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

void store_writer::commit() {
    if (done_) throw error(status::misuse, "kvstore: commit called twice");
    store_->commit(key_, b_);
    done_ = true;
}

int64_t store_impl::stamp() {
    last_stamp_ = std::max(wall_us(), last_stamp_ + 1);
    return last_stamp_;
}

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
    if (!st.is_reg)
        throw error(status::io, fmt("kvstore: %s is not a regular file", path.c_str()));
    require_private("KV store index", path, st);
    f.reset();
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        sqlite3_close_v2(db_);
        db_ = nullptr;
        throw error(status::catalog, fmt("kvstore index: open %s: %s (%d)", path.c_str(),
                                         msg.c_str(), rc));
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
                                        "library's (%d)", static_cast<long long>(ver),
                                        k_schema_version));
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
        stmt s(db_, "INSERT OR IGNORE INTO entries(key, bytes, created, last_access, "
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
        throw error(status::misuse, fmt("kvstore: commit of %s before all layers were put",
                                        key.hex().c_str()));
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
        stmt s(db_, "INSERT INTO entries(key, bytes, created, last_access, model_fingerprint) "
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

void store_impl::drop_row(const std::string& hex) {
    try {
        std::lock_guard<std::mutex> lk(mu_);
        stmt s(db_, "DELETE FROM entries WHERE key = ?1");
        s.bind(1, hex).step();
    } catch (const error& e) {
        log_write(log_level::warn, "kvstore: %s", e.what());
    }
}

void store_impl::drop_file(const std::string& hex, const file_stat* st) {
    const std::string path = file_path(hex);
    file_stat now;
    const int err = io_->lstat(path, &now);  // a link is removed itself, not judged by its target
    if (err == 0) {
        if (st && (now.dev != st->dev || now.ino != st->ino)) return;  // replaced: not ours
        const int u = io_->unlink(path);
        if (u != 0 && u != ENOENT) {
            log_write(log_level::warn, "kvstore: unlink %s: %s", path.c_str(),
                      errno_name(u).c_str());
            return;
        }
    } else if (err != ENOENT) {
        return;
    }
    drop_row(hex);
}

void store_impl::touch(const std::string& hex, const file_stat& ident, uint64_t fingerprint) {
    try {
        std::lock_guard<std::mutex> lk(mu_);
        const int64_t now = stamp();
        const uint64_t bytes = ident.size;
        stmt u(db_, "UPDATE entries SET last_access = ?1, bytes = ?2 WHERE key = ?3");
        u.bind(1, now).bind(2, static_cast<int64_t>(bytes)).bind(3, hex).step();
        file_stat st;
        if (sqlite3_changes(db_) == 0 && io_->lstat(file_path(hex), &st) == 0 &&
            st.dev == ident.dev && st.ino == ident.ino) {
            // A verified file the index does not know: a writer died between rename and insert.
            // (The stat skips files another process evicted while we were verifying them.)
            stmt i(db_, "INSERT OR IGNORE INTO entries(key, bytes, created, last_access, "
                        "model_fingerprint) VALUES(?1, ?2, ?3, ?3, ?4)");
            i.bind(1, hex).bind(2, static_cast<int64_t>(bytes)).bind(3, now);
            i.bind(4, static_cast<int64_t>(fingerprint)).step();
        }
    } catch (const error& e) {
        // LRU bookkeeping must not turn a good hit into a failure
        log_write(log_level::warn, "kvstore: %s", e.what());
    }
}

std::unique_ptr<chunk_kv_reader> store_impl::lookup(const chunk_key& key,
                                                    const chunk_kv_meta& expect) {
    const std::string hex = key.hex();
    kv_open_result r = open_kv_file(io_, file_path(hex), key, expect, direct_);
    switch (r.status) {
        case kv_open_status::ok: {
            touch(hex, r.st, r.reader->meta().model_fingerprint);
            std::weak_ptr<store_impl> weak = shared_from_this();
            const file_stat ident = r.st;
            r.reader->set_on_corrupt([weak, hex, ident] {
                if (auto s = weak.lock()) {
                    s->corrupt_removed_++;
                    s->drop_file(hex, &ident);
                }
            });
            hits_++;
            return std::move(r.reader);
        }
        case kv_open_status::missing: {
            file_stat st;  // a writer may have renamed it into place since our open
            if (io_->lstat(file_path(hex), &st) == ENOENT) drop_row(hex);
            break;
        }
        case kv_open_status::io_error:
            // Not evidence of damage: keep the file, report a miss.
            log_write(log_level::warn, "kvstore: %s", r.detail.c_str());
            break;
        case kv_open_status::corrupt:
        case kv_open_status::foreign:
        case kv_open_status::future_version:
            log_write(log_level::info, "kvstore: removing %s", r.detail.c_str());
            (r.status == kv_open_status::corrupt ? corrupt_removed_ : foreign_removed_)++;
            drop_file(hex, r.have_st ? &r.st : nullptr);
            break;
    }
    misses_++;
    return nullptr;
}

kv_verify_result store_impl::verify(const chunk_key& key, const chunk_kv_meta* expect) {
    kv_verify_result v;
    const kv_open_result r = open_kv_file(io_, file_path(key.hex()), key, expect, false);
    v.detail = r.detail;
    switch (r.status) {
        case kv_open_status::ok: break;
        case kv_open_status::missing: v.status = kv_verify_status::missing; return v;
        case kv_open_status::io_error: v.status = kv_verify_status::io_error; return v;
        case kv_open_status::corrupt: v.status = kv_verify_status::corrupt; return v;
        case kv_open_status::foreign:
        case kv_open_status::future_version: v.status = kv_verify_status::foreign; return v;
    }
    // The header is sound; the layers are only checked when read, so read them all. The
    // reader has no on_corrupt hook here: a check must not delete what it reports.
    const chunk_kv_meta& m = r.reader->meta();
    const size_t n = static_cast<size_t>(m.n_tokens) * static_cast<size_t>(m.kv_dim());
    std::vector<float> k(std::max<size_t>(n, 1));
    std::vector<uint16_t> val(k.size());
    try {
        for (int32_t l = 0; l < m.n_layer; ++l)
            r.reader->read_layer(l, k.data(), val.data(), m.kv_dim());
    } catch (const error& e) {
        v.status = e.code() == status::corrupt ? kv_verify_status::corrupt
                                               : kv_verify_status::io_error;
        v.detail = e.what();
        return v;
    }
    v.status = kv_verify_status::ok;
    v.detail.clear();
    return v;
}

std::vector<chunk_key> store_impl::keys() {
    std::vector<chunk_key> out;
    std::vector<std::string> shards;
    check_io(io_->list_dir(dir_, &shards), status::io, "list", dir_);
    for (const std::string& s : shards) {
        if (s.size() != 2 || !is_hex_key(s + std::string(62, '0'))) continue;
        std::vector<std::string> names;
        const std::string sd = dir_ + "/" + s;
        file_stat st;
        if (io_->stat(sd, &st) != 0 || !st.is_dir || io_->list_dir(sd, &names) != 0) continue;
        for (const std::string& n : names) {
            if (n.size() != 67 || n.compare(64, 3, ".kv") != 0) continue;
            const std::string hex = n.substr(0, 64);
            chunk_key k;
            if (hex.compare(0, 2, s) == 0 && parse_chunk_key(hex, &k)) out.push_back(k);
        }
    }
    return out;
}

bool store_impl::remove(const chunk_key& key) {
    const std::string hex = key.hex();
    const std::string path = file_path(hex);
    const int err = io_->unlink(path);
    if (err != 0 && err != ENOENT) check_io(err, status::io_write, "unlink", path);
    std::lock_guard<std::mutex> lk(mu_);
    stmt s(db_, "DELETE FROM entries WHERE key = ?1");
    s.bind(1, hex).step();
    return err == 0 || sqlite3_changes(db_) > 0;
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
        stmt s(db_, "SELECT key, bytes FROM entries WHERE key != ?1 "
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

kv_store_stats store_impl::stats() {
    kv_store_stats st;
    {
        std::lock_guard<std::mutex> lk(mu_);
        stmt s(db_, "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries");
        if (s.step()) {
            st.entries = static_cast<uint64_t>(s.i64(0));
            st.bytes = static_cast<uint64_t>(s.i64(1));
        }
    }
    st.hits = hits_;
    st.misses = misses_;
    st.corrupt_removed = corrupt_removed_;
    st.foreign_removed = foreign_removed_;
    st.evictions = evictions_;
    return st;
}

}  // namespace

std::shared_ptr<kv_store> kv_store::open(const kv_store_params& p) {
    auto s = std::make_shared<store_impl>(p);
    s->open_all();
    return s;
}

}  // namespace cacheblend
