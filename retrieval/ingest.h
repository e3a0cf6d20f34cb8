// Document ingestion into a data directory (DESIGN.md §2, §6):
//   DIR/catalog.db      the SQLite catalog (truth)
//   DIR/vectors.faiss   the FAISS index (derived; rebuilt when missing, corrupt or stale)
// and, when the caller passes one, a KV store whose files the catalog's KV keys name.
// Files and folders (.txt, .md, .html) are read, extracted, chunked on the LLM's tokens, embedded
// and committed one document per transaction, so an interrupted run leaves every document either
// in its old or its new version; re-running finishes the job (unchanged files are skipped by
// content hash). Files that cannot be ingested are skipped with a reason and the rest go on.
// A corpus is thread-safe for searches; ingest/remove calls are serialized internally.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "retrieval/catalog.h"
#include "retrieval/chunker.h"
#include "retrieval/embedder.h"
#include "retrieval/faiss-index.h"
#include "retrieval/hybrid-search.h"
#include "retrieval/text-extract.h"

namespace cacheblend {

class kv_store;

struct corpus_params {
    encode_fn encode;           // the LLM tokenizer (required)
    std::string tokenizer_id;   // identifies it (model name + fingerprint): a change re-chunks
    std::shared_ptr<embedder> emb;  // optional: without it, BM25 only
    vector_index_params index;
    std::shared_ptr<kv_store> kv;   // optional: KV files of removed chunks are deleted from it
};

struct ingest_progress {
    const char* phase = "";   // "scan", "ingest", "chunk", "embed", "kv", "index"
    // "chunk" (bytes) and "embed" (chunks) also come during one big file, with `current` set.
    int64_t done = 0, total = 0;
    std::string current;      // the file being worked on
};

constexpr int64_t k_default_max_document_bytes = 16ll << 20;

struct ingest_params {
    chunker_params chunking;
    std::string collection;                      // stored with every document
    // Larger files are skipped with a reason (ingest_text: refused). 16 MiB is about 4M tokens,
    // a 3000-page book: larger "text" files are nearly always logs or data dumps, and embedding
    // one takes tens of CPU-minutes (about 0.2 s per 512-token chunk per core).
    int64_t max_document_bytes = k_default_max_document_bytes;
    // A file still not committed after this long is abandoned (its transaction never commits)
    // and skipped with "took longer than N s"; the run goes on with the next file. Checked at
    // every progress point within the file (every 64 KiB chunked, every embedding batch).
    // 0: no limit (the default: wall time depends on the machine, the size limit does not).
    double max_file_seconds = 0;
    bool prune_missing = true;  // documents under an ingested folder whose file is gone go
    // Called between files and batches; return false to stop (error(status::aborted)).
    std::function<bool(const ingest_progress&)> progress;
    // Eager KV precompute: computes and stores the chunk's KV, returns its chunk key (hex).
    // Runs for every chunk without a KV key (so an interrupted precompute resumes).
    std::function<std::string(const chunk_info&)> precompute_kv;
    // Test hook: called after each committed document (crash tests stop the process here).
    std::function<void(const std::string& uri)> after_commit;
};

struct ingest_report {
    int64_t files_seen = 0, added = 0, updated = 0, unchanged = 0, removed = 0, skipped = 0;
    int64_t chunks_added = 0, chunks_removed = 0, embedded = 0, kv_computed = 0, kv_deleted = 0;
    std::vector<std::pair<std::string, std::string>> skipped_files;  // (path, reason)
    std::vector<std::string> notices;  // e.g. "no embedder: BM25 only", "index rebuilt: ..."
};

// An ingest stopped by interrupt or its progress callback (status::aborted), with what it had
// committed by then: documents commit one by one, so the partial counts are real.
class ingest_aborted : public error {
public:
    ingest_aborted(const std::string& msg, ingest_report r)
        : error(status::aborted, msg), report(std::move(r)) {}
    ingest_report report;
};

// Agreement of the catalog, the FAISS index and the KV store (tests, `ingest --check`).
struct consistency_report {
    int64_t documents = 0, chunks = 0, vectors = 0, kv_keys = 0;
    std::vector<std::string> problems;  // empty when consistent
};

class corpus {
public:
    // Creates dir (0700) when missing. Throws status::invalid_arg without an encoder.
    static std::unique_ptr<corpus> open(const std::string& dir, corpus_params p);
    ~corpus();

    catalog& cat() { return *cat_; }
    const vector_index* index() const { return index_.get(); }
    const std::string& dir() const { return dir_; }

    // Files and folders (recursively; hidden entries and symlinked folders are not followed).
    ingest_report ingest_paths(const std::vector<std::string>& paths, const ingest_params& p);
    // One in-memory document under a caller-chosen uri (metadata: a JSON object or empty).
    // Returns false when unchanged. Throws status::invalid_arg for bad text or metadata.
    bool ingest_text(const std::string& uri, std::string_view text, doc_kind kind,
                     const std::string& metadata_json, const ingest_params& p,
                     ingest_report* report = nullptr);
    // Removes a document, its vectors and (last reference) KV files; false when absent.
    // `report` (optional) gets removed, chunks_removed and kv_deleted added to it.
    bool remove(const std::string& uri, ingest_report* report = nullptr);

    search_result search(const std::string& query, const search_params& p) const;

    // Saves the index if it changed and deletes unreferenced KV files (done by ingest too).
    void flush();
    consistency_report check();

private:
    corpus() = default;
    struct doc_input;
    bool ingest_one(const doc_input& in, const ingest_params& p, ingest_report& r);
    void ingest_paths_locked(const std::vector<std::string>& paths, const ingest_params& p,
                             ingest_report& r);
    bool remove_locked(const std::string& uri, ingest_report* r = nullptr);
    void finish_locked(const ingest_params& p, ingest_report& r);
    void embed_missing(const ingest_params& p, ingest_report& r);
    void precompute_missing(const ingest_params& p, ingest_report& r);
    void delete_pending_kv(ingest_report* r);
    void save_index_locked();
    std::string chunker_id(const chunker_params& c) const;

    std::string dir_;
    corpus_params p_;
    std::unique_ptr<catalog> cat_;
    std::unique_ptr<vector_index> index_;
    std::string index_path_;
    bool index_dirty_ = false;
    std::mutex write_mu_;  // one ingest/remove at a time
};

// Paths for a data directory.
std::string corpus_catalog_path(const std::string& dir);
std::string corpus_index_path(const std::string& dir);

}  // namespace cacheblend
