// The KV store index's SQLite helpers: prepared statements with bound parameters only, errors
// that keep SQLite's code (so open can tell a damaged index from a busy one), and a BEGIN
// IMMEDIATE transaction rolled back when anything throws. Internal to core/kvstore/kv-store*.cpp.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "core/util/error.h"

namespace cacheblend {
namespace kv_store_detail {

// Carries SQLite's code: a ROLLBACK while unwinding resets sqlite3_errcode().
class sqlite_error : public error {
public:
    sqlite_error(int rc, const std::string& msg) : error(status::catalog, msg), rc_(rc) {}
    int rc() const { return rc_; }

private:
    int rc_;
};

[[noreturn]] inline void throw_sqlite(sqlite3* db, int rc, const char* what) {
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

inline void exec(sqlite3* db, const char* sql) {
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

}  // namespace kv_store_detail
}  // namespace cacheblend
