// The chunk catalog (docs/ARCHITECTURE.md, 'Retrieval'): documents, chunks (text, source offsets
// for citations, LLM tokens, KV key, embedding) and an FTS5 index over chunk text, in one SQLite
// file (WAL, schema migrations by PRAGMA user_version, parameterized SQL only). The catalog is the
// source of truth: the FAISS index and the KV store are derived from it and rebuilt or cleaned up
// from it. Thread-safe: one connection behind a mutex; several processes may share the file (WAL +
// busy timeout). Every failure throws cacheblend::error(status::catalog) with SQLite's code and
// message.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tokenizer/tokenizer.h"

struct sqlite3;

namespace cacheblend {

constexpr int32_t k_catalog_schema_version = 1;

struct document_info {
    int64_t id = 0;
    std::string uri;           // absolute path for files, any caller-chosen string otherwise
    std::string content_hash;  // hex SHA-256 of the source bytes
    int64_t mtime_ns = 0;
    int64_t size = 0;
    std::string collection;
    std::string metadata;      // a JSON object (validated and normalized by SQLite)
    std::string chunker;       // chunking settings it was cut with (a change re-chunks it)
    int64_t n_chunks = 0;      // filled by list/find
    int64_t n_kv_chunks = 0;   // chunks whose KV is stored (filled by list_documents(filter))
    std::string kind;          // metadata's "kind" ("" when absent; filled as n_kv_chunks)
    int64_t ingested_at = 0;   // unix seconds of its last (re)ingest (filled as n_kv_chunks)
    int64_t kv_bytes = 0;      // bytes of its chunks' KV files (filled by rag_runtime::documents)
};

struct chunk_info {
    int64_t id = 0;
    int64_t doc_id = 0;
    int32_t ordinal = 0;
    std::string text;
    int64_t start = 0, end = 0;  // byte range in the source document
    int32_t n_tokens = 0;
    std::vector<token_id> tokens;  // LLM token ids of text (no BOS/EOS)
    std::string kv_key;            // hex chunk key once its KV is stored, else empty
    std::vector<float> embedding;  // empty when not embedded (or not requested)
    std::string uri;               // of the document (filled by get_chunks)
    int32_t page = 0;              // 1-based page (PDF); 0: none
    std::string heading;           // nearest preceding heading; "": none
};

struct new_chunk {
    std::string text;
    int64_t start = 0, end = 0;
    std::vector<token_id> tokens;
    std::vector<float> embedding;  // may be empty: embedded later
    int32_t page = 0;              // 1-based page (PDF); 0: none
    std::string heading;           // nearest preceding heading; "": none
};

// Restricts a search to matching documents. Metadata keys are plain identifiers
// ([A-Za-z0-9_.-]); values compare as text with the metadata's JSON value.
struct search_filter {
    std::string collection;  // empty: any
    std::string uri_prefix;  // empty: any
    std::vector<std::pair<std::string, std::string>> metadata;
    bool empty() const { return collection.empty() && uri_prefix.empty() && metadata.empty(); }
};

// A metadata key a filter accepts ([A-Za-z0-9_.-], 1 to 128 bytes): keys are spliced into a JSON
// path, so the charset keeps them inert; front ends check it to reject a bad key as bad usage.
bool valid_metadata_key(const std::string& key);

struct scored_chunk {
    int64_t chunk_id = 0;
    double score = 0;  // larger is better
};

struct replace_result {
    int64_t doc_id = 0;
    std::vector<int64_t> added;    // new chunk ids, in ordinal order
    std::vector<int64_t> removed;  // chunk ids of the previous version
};

class catalog {
public:
    // Creates the file when missing (0600), migrates older schemas, rejects newer ones with
    // status::format.
    static std::unique_ptr<catalog> open(const std::string& path);
    ~catalog();
    catalog(const catalog&) = delete;
    catalog& operator=(const catalog&) = delete;

    const std::string& path() const { return path_; }

    std::optional<std::string> get_meta(const std::string& key);
    void set_meta(const std::string& key, const std::string& value);

    std::optional<document_info> find_document(const std::string& uri);
    std::vector<document_info> list_documents(const std::string& uri_prefix = "");
    // The documents a search with this filter may return, by uri, with kind and n_kv_chunks.
    std::vector<document_info> list_documents(const search_filter& f);
    // (document id, hex KV key) of every chunk whose KV is stored, each pair once: what a
    // document's KV bytes are summed over.
    std::vector<std::pair<int64_t, std::string>> document_kv_keys();

    // Atomically replaces the document with this uri (or adds it) and all its chunks. Keys of
    // KV files no chunk refers to any more are queued in pending_kv_deletes(). Bumps
    // vector_version(). Throws status::invalid_arg for metadata that is not a JSON object.
    replace_result replace_document(const document_info& doc, const std::vector<new_chunk>& chunks);
    // Removes the document and its chunks (KV keys queued as above); returns the chunk ids.
    std::vector<int64_t> remove_document(const std::string& uri);

    std::vector<chunk_info> get_chunks(const std::vector<int64_t>& ids,
                                       bool with_embedding = false);
    std::vector<int64_t> chunk_ids_without_embedding(int64_t limit);
    std::vector<int64_t> chunk_ids_without_kv(int64_t limit);
    int64_t count_chunks_without_kv();  // the work a precompute pass has ahead (progress totals)
    // flat holds ids.size() vectors back to back; bumps vector_version.
    void set_embeddings(const std::vector<int64_t>& ids, const std::vector<float>& flat);
    void clear_embeddings();                                           // bumps vector_version
    // Every stored embedding, in id order (index rebuild). dim is checked by the caller.
    void for_each_embedding(const std::function<void(int64_t id, const float* v, size_t dim)>& fn);
    int64_t vector_version();

    // BM25 over chunk text; the query is split into words and OR-ed (FTS5 syntax in it is
    // treated as text). Empty when the query has no words.
    std::vector<scored_chunk> search_bm25(const std::string& query, int32_t k,
                                          const search_filter& f = {});
    // The subset of ids whose documents pass the filter (order kept).
    std::vector<int64_t> filter_chunks(const std::vector<int64_t>& ids, const search_filter& f);

    // KV references: a key is referenced by every chunk row that holds it.
    void set_kv_key(int64_t chunk_id, const std::string& key_hex);
    int64_t kv_refcount(const std::string& key_hex);
    std::vector<std::string> pending_kv_deletes();
    // Cleanup order (crash-safe): for each pending key, if kv_refcount() is 0 delete the KV file,
    // then drop the key from the queue.
    void drop_pending_kv_delete(const std::string& key_hex);

    // (chunk id, kv key or "") of every chunk, and the ids that have an embedding (checks).
    std::vector<std::pair<int64_t, std::string>> chunk_kv_keys();
    std::vector<int64_t> embedded_chunk_ids();

    int64_t count_documents();
    int64_t count_chunks();

    // Damage checks (`ingest --check`): SQLite's integrity_check findings (empty when the file
    // is sound), and the FTS index compared with the chunk text ("" when they agree). Neither
    // throws for damage: damage is what they report.
    std::vector<std::string> integrity_problems();
    std::string fts_problem();
    // Repairs: the FTS index rebuilt from the chunk text; a KV key forgotten by every chunk
    // that holds it (its file is gone), so precompute computes it again.
    void rebuild_fts();
    void clear_kv_key(const std::string& key_hex);

    struct stmt;  // implementation detail (prepared statement wrapper)

private:
    explicit catalog(std::string path);
    void exec(const char* sql);
    void migrate();
    void add_citation_columns();
    void bump_vector_version_locked();
    std::vector<int64_t> remove_document_locked(int64_t doc_id);

    std::string path_;
    sqlite3* db_ = nullptr;
    std::mutex mu_;
};

}  // namespace cacheblend
