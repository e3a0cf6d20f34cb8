#include "retrieval/catalog.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "core/util/error.h"
#include "core/util/private-path.h"

namespace cacheblend {

namespace {

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
    const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw error(status::catalog, fmt("catalog: %s: %s (SQLite %d)", what.c_str(), msg,
                                     db ? sqlite3_extended_errcode(db) : rc));
}

const char* const k_schema_v1 = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents(
    id INTEGER PRIMARY KEY,
    uri TEXT NOT NULL UNIQUE,
    content_hash TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    size INTEGER NOT NULL DEFAULT 0,
    collection TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    chunker TEXT NOT NULL DEFAULT '',  -- chunking settings + tokenizer: a change re-chunks
    ingested_at INTEGER NOT NULL DEFAULT (strftime('%s','now')));
CREATE INDEX documents_collection ON documents(collection);
CREATE TABLE chunks(
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: FAISS ids stay unambiguous
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    n_tokens INTEGER NOT NULL,
    tokens BLOB NOT NULL,
    kv_key TEXT,
    embedding BLOB,
    UNIQUE(doc_id, ordinal));
CREATE INDEX chunks_kv_key ON chunks(kv_key) WHERE kv_key IS NOT NULL;
CREATE INDEX chunks_no_embedding ON chunks(id) WHERE embedding IS NULL;
CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id');
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE pending_kv_deletes(kv_key TEXT PRIMARY KEY);
INSERT INTO meta(key, value) VALUES ('vector_version', '0');
)sql";

// Words of the query as an FTS5 OR expression of quoted strings, so FTS5 operators, column
// filters and quotes in user text are inert.
std::string fts_query(const std::string& q) {
    std::string out, word;
    const auto flush = [&] {
        if (word.empty()) return;
        if (!out.empty()) out += " OR ";
        out += '"' + word + '"';
        word.clear();
    };
    for (char c : q) {
        const unsigned char u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || u >= 0x80) {
            word += c;
        } else {
            flush();
        }
    }
    flush();
    return out;
}

}  // namespace

// A prepared statement that is finalized on scope exit; binds are 1-based.
struct catalog::stmt {
    sqlite3* db;
    sqlite3_stmt* s = nullptr;
    stmt(sqlite3* d, const char* sql) : db(d) {
        const int rc = sqlite3_prepare_v2(db, sql, -1, &s, nullptr);
        if (rc != SQLITE_OK) fail(db, rc, "prepare");
    }
    ~stmt() { sqlite3_finalize(s); }
    stmt(const stmt&) = delete;
    stmt& operator=(const stmt&) = delete;

    void check(int rc) {
        if (rc != SQLITE_OK) fail(db, rc, "bind");
    }
    stmt& bind(int i, int64_t v) {
        check(sqlite3_bind_int64(s, i, v));
        return *this;
    }
    stmt& bind(int i, const std::string& v) {
        check(sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
        return *this;
    }
    stmt& bind_blob(int i, const void* p, size_t n) {
        if (!p) {
            check(sqlite3_bind_null(s, i));
        } else {
            check(sqlite3_bind_blob64(s, i, p, n, SQLITE_TRANSIENT));
        }
        return *this;
    }
    bool step() {  // true: a row
        const int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db, rc, "step");
    }
    void run() {
        while (step()) {
        }
        sqlite3_reset(s);
    }
    void reset() {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    int64_t i64(int c) { return sqlite3_column_int64(s, c); }
    std::string text(int c) {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
        return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, c))) : std::string();
    }
    template <typename T>
    std::vector<T> blob(int c) {
        const void* p = sqlite3_column_blob(s, c);
        const size_t n = static_cast<size_t>(sqlite3_column_bytes(s, c)) / sizeof(T);
        std::vector<T> v(n);
        if (n) std::memcpy(v.data(), p, n * sizeof(T));
        return v;
    }
};

catalog::catalog(std::string path) : path_(std::move(path)) {}

catalog::~catalog() {
    if (db_) sqlite3_close_v2(db_);
}

std::unique_ptr<catalog> catalog::open(const std::string& path) {
    // The catalog's text is what search returns: one others could write is not ours to trust.
    require_private_path("catalog", path, false);
    std::unique_ptr<catalog> c(new catalog(path));
    // The catalog holds document text: owner-only, like the KV store (docs/data-dir.md).
    const mode_t old = ::umask(077);
    const int rc = sqlite3_open_v2(path.c_str(), &c->db_,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                       SQLITE_OPEN_NOMUTEX,
                                   nullptr);
    ::umask(old);
    if (rc != SQLITE_OK) {
        std::string msg = c->db_ ? sqlite3_errmsg(c->db_) : sqlite3_errstr(rc);
        throw error(status::catalog, fmt("catalog: cannot open %s: %s (SQLite %d)", path.c_str(),
                                         msg.c_str(), rc));
    }
    sqlite3_busy_timeout(c->db_, 10000);
    sqlite3_extended_result_codes(c->db_, 1);
    // Two processes creating one catalog both switch it to WAL; SQLite answers the loser
    // SQLITE_BUSY at once (no busy handler for a journal mode change), so it retries here.
    for (int attempt = 0;; ++attempt) {
        const int jrc = sqlite3_exec(c->db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
        if (jrc == SQLITE_OK) break;
        const bool busy = (jrc & 0xff) == SQLITE_BUSY || (jrc & 0xff) == SQLITE_LOCKED;
        // Not busy, or still busy after ~10 s (the busy timeout): exec reports it with the message.
        if (!busy || attempt >= 200) {
            c->exec("PRAGMA journal_mode=WAL");
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    c->exec("PRAGMA synchronous=NORMAL");
    c->exec("PRAGMA foreign_keys=ON");
    c->migrate();
    return c;
}

void catalog::exec(const char* sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        std::string msg = err ? err : sqlite3_errstr(rc);
        sqlite3_free(err);
        throw error(status::catalog, fmt("catalog %s: %s (SQLite %d)", path_.c_str(), msg.c_str(),
                                         sqlite3_extended_errcode(db_)));
    }
}

namespace {

// BEGIN IMMEDIATE ... COMMIT, rolled back on exceptions.
class transaction {
public:
    explicit transaction(sqlite3* db) : db_(db) {
        const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(db_, rc, "begin transaction");
    }
    ~transaction() {
        if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    void commit() {
        const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(db_, rc, "commit");
        db_ = nullptr;
    }

private:
    sqlite3* db_;
};

}  // namespace

void catalog::migrate() {
    std::lock_guard<std::mutex> lock(mu_);
    transaction tx(db_);
    int64_t version;
    {
        stmt s(db_, "PRAGMA user_version");
        s.step();
        version = s.i64(0);
    }
    if (version > k_catalog_schema_version) {
        throw error(status::format,
                    fmt("catalog %s has schema version %lld, newer than this library's %d",
                        path_.c_str(), static_cast<long long>(version), k_catalog_schema_version));
    }
    if (version < 1) {
        exec(k_schema_v1);
        exec("PRAGMA user_version=1");
    }
    // Later versions: if (version < 2) { ALTER ...; PRAGMA user_version=2 } and so on.
    add_citation_columns();
    tx.commit();
}

// chunks.page and chunks.heading (citations of PDFs and headed documents) came after schema 1.
// They are nullable columns added when missing rather than a new schema version: a catalog
// written by an older library opens here, and an older library still opens this one (it names
// the columns it writes and never reads these).
void catalog::add_citation_columns() {
    bool page = false, heading = false;
    {
        stmt s(db_, "SELECT name FROM pragma_table_info('chunks')");
        while (s.step()) {
            const std::string name = s.text(0);
            page = page || name == "page";
            heading = heading || name == "heading";
        }
    }
    if (!page) exec("ALTER TABLE chunks ADD COLUMN page INTEGER");
    if (!heading) exec("ALTER TABLE chunks ADD COLUMN heading TEXT");
}

std::optional<std::string> catalog::get_meta(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT value FROM meta WHERE key = ?1");
    s.bind(1, key);
    if (!s.step()) return std::nullopt;
    return s.text(0);
}

void catalog::set_meta(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    s.bind(1, key).bind(2, value).run();
}

namespace {

const char* const k_doc_columns =
    "SELECT d.id, d.uri, d.content_hash, d.mtime_ns, d.size, d.collection, d.metadata, "
    "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id), d.chunker FROM documents d ";

// The first nine columns, in k_doc_columns' order (every document query starts with them).
template <typename Stmt>  // catalog::stmt, private to the class
document_info read_document(Stmt& s) {
    document_info d;
    d.id = s.i64(0);
    d.uri = s.text(1);
    d.content_hash = s.text(2);
    d.mtime_ns = s.i64(3);
    d.size = s.i64(4);
    d.collection = s.text(5);
    d.metadata = s.text(6);
    d.n_chunks = s.i64(7);
    d.chunker = s.text(8);
    return d;
}

}  // namespace

std::optional<document_info> catalog::find_document(const std::string& uri) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, (std::string(k_doc_columns) + "WHERE d.uri = ?1").c_str());
    s.bind(1, uri);
    if (!s.step()) return std::nullopt;
    return read_document(s);
}

std::vector<document_info> catalog::list_documents(const std::string& uri_prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    // substr() rather than LIKE: '%' and '_' in paths are not wildcards.
    stmt s(db_, (std::string(k_doc_columns) +
                 "WHERE substr(d.uri, 1, length(?1)) = ?1 ORDER BY d.uri")
                    .c_str());
    s.bind(1, uri_prefix);
    std::vector<document_info> out;
    while (s.step()) {
        out.push_back(read_document(s));
    }
    return out;
}

void catalog::bump_vector_version_locked() {
    stmt s(db_, "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vector_version'");
    s.run();
}

std::vector<int64_t> catalog::remove_document_locked(int64_t doc_id) {
    std::vector<int64_t> ids;
    {
        stmt s(db_, "SELECT id FROM chunks WHERE doc_id = ?1 ORDER BY ordinal");
        s.bind(1, doc_id);
        while (s.step()) ids.push_back(s.i64(0));
    }
    {
        // Keys only this document refers to become pending deletes, in the same transaction, so
        // a crash cannot lose track of a KV file that lost its last reference.
        stmt s(db_, "INSERT OR IGNORE INTO pending_kv_deletes(kv_key) "
                    "SELECT DISTINCT kv_key FROM chunks c"
                    " WHERE c.doc_id = ?1 AND kv_key IS NOT NULL"
                    " AND NOT EXISTS (SELECT 1 FROM chunks o WHERE o.kv_key = c.kv_key"
                    " AND o.doc_id != ?1)");
        s.bind(1, doc_id).run();
    }
    stmt(db_, "DELETE FROM chunks WHERE doc_id = ?1").bind(1, doc_id).run();
    stmt(db_, "DELETE FROM documents WHERE id = ?1").bind(1, doc_id).run();
    return ids;
}

replace_result catalog::replace_document(const document_info& doc,
                                         const std::vector<new_chunk>& chunks) {
    if (doc.uri.empty()) throw error(status::invalid_arg, "catalog: document uri is empty");
    std::lock_guard<std::mutex> lock(mu_);
    transaction tx(db_);
    replace_result r;
    {
        stmt s(db_, "SELECT id FROM documents WHERE uri = ?1");
        s.bind(1, doc.uri);
        if (s.step()) {
            const int64_t old = s.i64(0);
            s.reset();
            r.removed = remove_document_locked(old);
        }
    }
    {
        const std::string meta = doc.metadata.empty() ? "{}" : doc.metadata;
        stmt v(db_, "SELECT json_valid(?1) AND json_type(?1) = 'object'");
        v.bind(1, meta);
        if (!v.step() || v.i64(0) != 1) {
            throw error(status::invalid_arg,
                        "catalog: metadata of " + doc.uri + " is not a JSON object");
        }
        stmt s(db_, "INSERT INTO documents(uri, content_hash, mtime_ns, size, collection, metadata,"
                    " chunker) VALUES (?1, ?2, ?3, ?4, ?5, json(?6), ?7)");
        s.bind(1, doc.uri).bind(2, doc.content_hash).bind(3, doc.mtime_ns).bind(4, doc.size);
        s.bind(5, doc.collection).bind(6, meta).bind(7, doc.chunker).run();
        r.doc_id = sqlite3_last_insert_rowid(db_);
    }
    stmt ins(db_,
             "INSERT INTO chunks(doc_id, ordinal, text, start, \"end\", n_tokens, tokens, "
             "embedding, page, heading) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    for (size_t i = 0; i < chunks.size(); ++i) {
        const new_chunk& c = chunks[i];
        ins.reset();
        ins.bind(1, r.doc_id).bind(2, static_cast<int64_t>(i)).bind(3, c.text);
        ins.bind(4, c.start).bind(5, c.end).bind(6, static_cast<int64_t>(c.tokens.size()));
        // An empty token list still needs a non-NULL blob.
        static const int32_t none = 0;
        ins.bind_blob(7, c.tokens.empty() ? static_cast<const void*>(&none) : c.tokens.data(),
                      c.tokens.size() * sizeof(token_id));
        ins.bind_blob(8, c.embedding.empty() ? nullptr : c.embedding.data(),
                      c.embedding.size() * sizeof(float));
        // NULL when absent, so "no page" and "no heading" stay distinguishable from values.
        if (c.page > 0) {
            ins.bind(9, static_cast<int64_t>(c.page));
        } else {
            ins.bind_blob(9, nullptr, 0);  // NULL
        }
        if (!c.heading.empty()) {
            ins.bind(10, c.heading);
        } else {
            ins.bind_blob(10, nullptr, 0);  // NULL
        }
        ins.run();
        r.added.push_back(sqlite3_last_insert_rowid(db_));
    }
    bump_vector_version_locked();
    tx.commit();
    return r;
}

std::vector<int64_t> catalog::remove_document(const std::string& uri) {
    std::lock_guard<std::mutex> lock(mu_);
    transaction tx(db_);
    int64_t id;
    {
        stmt s(db_, "SELECT id FROM documents WHERE uri = ?1");
        s.bind(1, uri);
        if (!s.step()) return {};
        id = s.i64(0);
    }
    std::vector<int64_t> ids = remove_document_locked(id);
    bump_vector_version_locked();
    tx.commit();
    return ids;
}

std::vector<chunk_info> catalog::get_chunks(const std::vector<int64_t>& ids, bool with_embedding) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_,
           "SELECT c.id, c.doc_id, c.ordinal, c.text, c.start, c.\"end\", c.n_tokens, "
           "c.tokens, c.kv_key, CASE WHEN ?2 THEN c.embedding END, d.uri, c.page, "
           "c.heading FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?1");
    std::vector<chunk_info> out;
    out.reserve(ids.size());
    for (int64_t id : ids) {
        s.reset();
        s.bind(1, id).bind(2, static_cast<int64_t>(with_embedding));
        if (!s.step()) continue;
        chunk_info c;
        c.id = s.i64(0);
        c.doc_id = s.i64(1);
        c.ordinal = static_cast<int32_t>(s.i64(2));
        c.text = s.text(3);
        c.start = s.i64(4);
        c.end = s.i64(5);
        c.n_tokens = static_cast<int32_t>(s.i64(6));
        c.tokens = s.blob<token_id>(7);
        c.tokens.resize(static_cast<size_t>(c.n_tokens));
        c.kv_key = s.text(8);
        c.embedding = s.blob<float>(9);
        c.uri = s.text(10);
        c.page = static_cast<int32_t>(s.i64(11));
        c.heading = s.text(12);
        out.push_back(std::move(c));
    }
    return out;
}

std::vector<int64_t> catalog::chunk_ids_without_embedding(int64_t limit) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT id FROM chunks WHERE embedding IS NULL ORDER BY id LIMIT ?1");
    s.bind(1, limit);
    std::vector<int64_t> out;
    while (s.step()) out.push_back(s.i64(0));
    return out;
}

std::vector<int64_t> catalog::chunk_ids_without_kv(int64_t limit) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT id FROM chunks WHERE kv_key IS NULL ORDER BY id LIMIT ?1");
    s.bind(1, limit);
    std::vector<int64_t> out;
    while (s.step()) out.push_back(s.i64(0));
    return out;
}

int64_t catalog::count_chunks_without_kv() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT COUNT(*) FROM chunks WHERE kv_key IS NULL");
    s.step();
    return s.i64(0);
}

void catalog::set_embeddings(const std::vector<int64_t>& ids, const std::vector<float>& flat) {
    if (ids.empty()) return;
    if (flat.size() % ids.size() != 0) {
        throw error(status::invalid_arg, "catalog: embeddings do not divide among the chunks");
    }
    const size_t dim = flat.size() / ids.size();
    std::lock_guard<std::mutex> lock(mu_);
    transaction tx(db_);
    stmt s(db_, "UPDATE chunks SET embedding = ?2 WHERE id = ?1");
    for (size_t i = 0; i < ids.size(); ++i) {
        s.reset();
        s.bind(1, ids[i]).bind_blob(2, flat.data() + i * dim, dim * sizeof(float));
        s.run();
    }
    bump_vector_version_locked();
    tx.commit();
}

void catalog::clear_embeddings() {
    std::lock_guard<std::mutex> lock(mu_);
    transaction tx(db_);
    exec("UPDATE chunks SET embedding = NULL WHERE embedding IS NOT NULL");
    bump_vector_version_locked();
    tx.commit();
}

void catalog::for_each_embedding(
    const std::function<void(int64_t id, const float* v, size_t dim)>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id");
    while (s.step()) {
        const auto* p = static_cast<const float*>(sqlite3_column_blob(s.s, 1));
        const size_t n = static_cast<size_t>(sqlite3_column_bytes(s.s, 1)) / sizeof(float);
        fn(s.i64(0), p, n);
    }
}

int64_t catalog::vector_version() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'vector_version'");
    return s.step() ? s.i64(0) : 0;
}

bool valid_metadata_key(const std::string& k) {
    if (k.empty() || k.size() > 128) return false;
    for (char c : k) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
            return false;
        }
    }
    return true;
}

namespace {

// The WHERE clause for a filter over documents aliased d; parameters from ?10 on.
std::string filter_sql(const search_filter& f) {
    std::string w;
    if (!f.collection.empty()) w += " AND d.collection = ?10";
    if (!f.uri_prefix.empty()) w += " AND substr(d.uri, 1, length(?11)) = ?11";
    for (size_t i = 0; i < f.metadata.size(); ++i) {
        if (!valid_metadata_key(f.metadata[i].first)) {
            throw error(status::invalid_arg,
                        "search: metadata key must be [A-Za-z0-9_.-]{1,128}: '" +
                            f.metadata[i].first + "'");
        }
        const int p = 12 + 2 * static_cast<int>(i);
        w += fmt(" AND CAST(json_extract(d.metadata, '$.\"' || ?%d || '\"') AS TEXT) = ?%d", p,
                 p + 1);
    }
    if (f.metadata.size() > 100) throw error(status::invalid_arg, "search: too many filters");
    return w;
}

void bind_filter(catalog::stmt& s, const search_filter& f) {
    if (!f.collection.empty()) s.bind(10, f.collection);
    if (!f.uri_prefix.empty()) s.bind(11, f.uri_prefix);
    for (size_t i = 0; i < f.metadata.size(); ++i) {
        const int p = 12 + 2 * static_cast<int>(i);
        s.bind(p, f.metadata[i].first).bind(p + 1, f.metadata[i].second);
    }
}

}  // namespace

std::vector<scored_chunk> catalog::search_bm25(const std::string& query, int32_t k,
                                               const search_filter& f) {
    const std::string q = fts_query(query);
    if (q.empty() || k <= 0) return {};
    const std::string where = filter_sql(f);
    std::lock_guard<std::mutex> lock(mu_);
    const std::string sql =
        "SELECT f.rowid, bm25(chunks_fts) AS r FROM chunks_fts f "
        "JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.doc_id "
        "WHERE chunks_fts MATCH ?1" + where + " ORDER BY r LIMIT ?2";
    stmt s(db_, sql.c_str());
    s.bind(1, q).bind(2, static_cast<int64_t>(k));
    bind_filter(s, f);
    std::vector<scored_chunk> out;
    while (s.step()) out.push_back({s.i64(0), -sqlite3_column_double(s.s, 1)});
    return out;
}

std::vector<document_info> catalog::list_documents(const search_filter& f) {
    const std::string where = filter_sql(f);
    std::lock_guard<std::mutex> lock(mu_);
    const std::string sql =
        "SELECT d.id, d.uri, d.content_hash, d.mtime_ns, d.size, d.collection, d.metadata, "
        "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id), d.chunker, "
        "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id AND c.kv_key IS NOT NULL), "
        "COALESCE(CAST(json_extract(d.metadata, '$.kind') AS TEXT), ''), d.ingested_at "
        "FROM documents d WHERE 1" +
        where + " ORDER BY d.uri";
    stmt s(db_, sql.c_str());
    bind_filter(s, f);
    std::vector<document_info> out;
    while (s.step()) {
        document_info d = read_document(s);
        d.n_kv_chunks = s.i64(9);
        d.kind = s.text(10);
        d.ingested_at = s.i64(11);
        out.push_back(std::move(d));
    }
    return out;
}

std::vector<std::pair<int64_t, std::string>> catalog::document_kv_keys() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT DISTINCT doc_id, kv_key FROM chunks WHERE kv_key IS NOT NULL");
    std::vector<std::pair<int64_t, std::string>> out;
    while (s.step()) out.emplace_back(s.i64(0), s.text(1));
    return out;
}

std::vector<int64_t> catalog::filter_chunks(const std::vector<int64_t>& ids,
                                            const search_filter& f) {
    if (f.empty()) return ids;
    const std::string where = filter_sql(f);
    std::lock_guard<std::mutex> lock(mu_);
    const std::string sql =
        "SELECT 1 FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?1" + where;
    stmt s(db_, sql.c_str());
    std::vector<int64_t> out;
    for (int64_t id : ids) {
        s.reset();
        s.bind(1, id);
        bind_filter(s, f);
        if (s.step()) out.push_back(id);
    }
    return out;
}

void catalog::set_kv_key(int64_t chunk_id, const std::string& key_hex) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "UPDATE chunks SET kv_key = ?2 WHERE id = ?1");
    s.bind(1, chunk_id);
    if (key_hex.empty()) {
        s.bind_blob(2, nullptr, 0);
    } else {
        s.bind(2, key_hex);
    }
    s.run();
}

int64_t catalog::kv_refcount(const std::string& key_hex) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT COUNT(*) FROM chunks WHERE kv_key = ?1");
    s.bind(1, key_hex);
    s.step();
    return s.i64(0);
}

std::vector<std::string> catalog::pending_kv_deletes() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT kv_key FROM pending_kv_deletes ORDER BY kv_key");
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
}

void catalog::drop_pending_kv_delete(const std::string& key_hex) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt(db_, "DELETE FROM pending_kv_deletes WHERE kv_key = ?1").bind(1, key_hex).run();
}

std::vector<std::pair<int64_t, std::string>> catalog::chunk_kv_keys() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT id, kv_key FROM chunks ORDER BY id");
    std::vector<std::pair<int64_t, std::string>> out;
    while (s.step()) out.emplace_back(s.i64(0), s.text(1));
    return out;
}

std::vector<int64_t> catalog::embedded_chunk_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT id FROM chunks WHERE embedding IS NOT NULL ORDER BY id");
    std::vector<int64_t> out;
    while (s.step()) out.push_back(s.i64(0));
    return out;
}

int64_t catalog::count_documents() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT COUNT(*) FROM documents");
    s.step();
    return s.i64(0);
}

int64_t catalog::count_chunks() {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "SELECT COUNT(*) FROM chunks");
    s.step();
    return s.i64(0);
}

std::vector<std::string> catalog::integrity_problems() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    try {
        stmt s(db_, "PRAGMA integrity_check(20)");  // the first 20 findings say enough
        while (s.step()) {
            // A row may hold several lines, the first a "*** in database main ***" heading:
            // one finding per line, so reports stay one line per problem.
            const std::string row = s.text(0);
            size_t at = 0;
            while (at <= row.size()) {
                const size_t end = std::min(row.find('\n', at), row.size());
                const std::string line = row.substr(at, end - at);
                if (!line.empty() && line != "ok" && line.rfind("*** ", 0) != 0)
                    out.push_back(line);
                at = end + 1;
            }
        }
    } catch (const error& e) {  // too damaged to even walk
        out.emplace_back(e.what());
    }
    return out;
}

std::string catalog::fts_problem() {
    std::lock_guard<std::mutex> lock(mu_);
    // rank = 1 also compares the index with the content table (chunks); without it SQLite 3.40
    // only checks the index against itself and misses rows deleted from the index.
    char* err = nullptr;
    const int rc = sqlite3_exec(
        db_, "INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 1)", nullptr,
        nullptr, &err);
    std::string msg;
    if (rc != SQLITE_OK) msg = fmt("%s (SQLite %d)", err ? err : sqlite3_errstr(rc),
                                   sqlite3_extended_errcode(db_));
    sqlite3_free(err);
    return msg;
}

void catalog::rebuild_fts() {
    std::lock_guard<std::mutex> lock(mu_);
    exec("INSERT INTO chunks_fts(chunks_fts) VALUES('rebuild')");
}

void catalog::clear_kv_key(const std::string& key_hex) {
    std::lock_guard<std::mutex> lock(mu_);
    stmt s(db_, "UPDATE chunks SET kv_key = NULL WHERE kv_key = ?1");
    s.bind(1, key_hex);
    s.run();
}

}  // namespace cacheblend
