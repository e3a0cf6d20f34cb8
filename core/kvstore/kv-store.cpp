// KV store: files are the truth, the SQLite index is bookkeeping (sizes, LRU stamps). A file is
// usable only if it verifies; an index row without a file is dropped, a file without a row (a
// writer killed between rename and insert) is adopted. So a crash at any point leaves, at worst,
// an orphaned temp file (cleaned at open) or an unindexed file (adopted at open or lookup).
//
// The store's parts live in their own files (core/kvstore/kv-store-impl.h lists them); this one
// holds the public face and the read side.
#include "core/kvstore/kv-store.h"

#include <cerrno>

#include "core/kvstore/kv-store-impl.h"
#include "core/kvstore/kv-store-sqlite.h"
#include "core/util/log.h"

namespace cacheblend {

const char* kv_format_name(kv_format f) {
    switch (f) {
        case kv_format::f16: return "f16";
        case kv_format::q8: return "q8";
        case kv_format::exact: return "exact";
    }
    return "unknown";
}

bool parse_kv_format(const std::string& s, kv_format* out) {
    for (kv_format f : {kv_format::f16, kv_format::q8, kv_format::exact}) {
        if (s == kv_format_name(f)) {
            *out = f;
            return true;
        }
    }
    return false;
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

namespace kv_store_detail {

int64_t store_impl::stamp() {
    last_stamp_ = std::max(wall_us(), last_stamp_ + 1);
    return last_stamp_;
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
            stmt i(db_,
                   "INSERT OR IGNORE INTO entries(key, bytes, created, last_access, "
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
        v.status =
            e.code() == status::corrupt ? kv_verify_status::corrupt : kv_verify_status::io_error;
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

std::unordered_map<std::string, uint64_t> store_impl::bytes_by_key() {
    std::unordered_map<std::string, uint64_t> out;
    std::lock_guard<std::mutex> lk(mu_);
    stmt s(db_, "SELECT key, bytes FROM entries");
    while (s.step()) out.emplace(s.text(0), static_cast<uint64_t>(s.i64(1)));
    return out;
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

}  // namespace kv_store_detail

std::shared_ptr<kv_store> kv_store::open(const kv_store_params& p) {
    auto s = std::make_shared<kv_store_detail::store_impl>(p);
    s->open_all();
    return s;
}

}  // namespace cacheblend
