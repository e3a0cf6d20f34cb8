// Document ingestion into a data directory (docs/ARCHITECTURE.md, 'Ingest path';
// docs/data-dir.md):
//   DIR/catalog.db      the SQLite catalog (truth)
//   DIR/vectors.faiss   the FAISS index (derived; rebuilt when missing, corrupt or stale)
// and, when the caller passes one, a KV store whose files the catalog's KV keys name.
// Files and folders (every format of retrieval/extract/extract.h, by extension or content) are
// read, extracted, chunked on the LLM's tokens, embedded and committed one document per
// transaction, so an interrupted run leaves every document either
// in its old or its new version; re-running finishes the job (unchanged files are skipped by
// content hash). Files that cannot be ingested are skipped with a reason and the rest go on.
// A corpus is thread-safe for searches; ingest/remove calls are serialized internally and, across
// processes, by the data directory's writer lock (retrieval/writer-lock.h): a second writer waits
// (the progress callback sees phase "wait") and nothing either writes is lost. Searches never
// wait: when another process changed the catalog, the next search reloads the vector index.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/util/error.h"
#include "retrieval/catalog.h"
#include "retrieval/chunker.h"
#include "retrieval/embedder.h"
#include "retrieval/extract/extract.h"
#include "retrieval/faiss-index.h"
#include "retrieval/hybrid-search.h"
#include "retrieval/writer-lock.h"

namespace cacheblend {

class kv_store;
class file_io;

struct corpus_params {
    encode_fn encode;           // the LLM tokenizer (required)
    std::string tokenizer_id;   // identifies it (model name + fingerprint): a change re-chunks
    std::shared_ptr<embedder> emb;  // optional: without it, BM25 only
    vector_index_params index;
    std::shared_ptr<kv_store> kv;   // optional: KV files of removed chunks are deleted from it
    // The store is this data dir's own (DIR/kv, as the runtime opens it), not one shared with
    // other data dirs: then files no chunk references are ours to report and delete.
    bool kv_owned = false;
    // How documents are read (null: the OS); tests inject read failures and shrinking files.
    std::shared_ptr<file_io> io;
};

struct ingest_progress {
    // "scan", "ingest", "chunk", "embed", "kv", "index"; "wait" while another process holds the
    // data directory's writer lock (current: who, e.g. "pid 1234"; called every 50-200 ms).
    // "chunk" (bytes) and "embed" (chunks) also come during one big file, with `current` set.
    const char* phase = "";
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
    // Symlinks met in a folder are skipped ("symbolic link (not followed)") unless this is set;
    // then a link to a file is followed only when its real path stays inside that folder.
    // Paths given to ingest_paths are followed either way (the caller named them).
    bool follow_symlinks = false;
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

// Soundness of the catalog (SQLite and FTS integrity), each referenced KV file (read in full),
// and the agreement of catalog, FAISS index and KV store (tests, `ingest --check`).
struct consistency_report {
    int64_t documents = 0, chunks = 0, vectors = 0, kv_keys = 0;
    // The KV store is a cache: chunks without a KV file (evicted under the byte budget, never
    // computed) and, in the data dir's own store, files no chunk references (e.g. written for
    // another KV format) are information, not problems.
    int64_t kv_uncached = 0, kv_orphans = 0;
    std::vector<std::string> problems;  // empty when consistent
    std::vector<std::string> notes;     // information for the user
};

// What corpus::repair did, and what it could not do (each line says what the user can do).
struct repair_report {
    std::vector<std::string> repaired, not_repaired, notes;
};

class corpus {
public:
    // Creates dir (0700) when missing. Throws status::invalid_arg without an encoder.
    static std::unique_ptr<corpus> open(const std::string& dir, corpus_params p);
    ~corpus();

    catalog& cat() { return *cat_; }
    std::shared_ptr<const vector_index> index() const;
    const std::string& dir() const { return dir_; }

    // Files and folders (recursively; hidden entries, symlinks (see ingest_params::
    // follow_symlinks) and special files are skipped with a reason; nothing outside is read).
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
    // Fixes what check() finds where it can: rebuilds the FTS index and the vector index from
    // the catalog, embeds chunks without embeddings, deletes corrupt and orphaned KV files (and
    // forgets corrupt files' keys), finishes pending deletes and, with p.precompute_kv, computes
    // the missing KV. A catalog SQLite finds damaged is left alone (nothing else is touched).
    repair_report repair(const ingest_params& p);

private:
    corpus() = default;
    struct doc_input;
    struct damage;  // what a check found, for repair (corpus-check.cpp)
    damage inspect_locked();
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

    // Cross-process writing: every write takes the writer lock, then brings the in-memory index
    // to the catalog's current vector_version (another process may have written meanwhile).
    // Holds the writer lock for one write operation and keeps index_version_ honest (corpus.cpp).
    class write_scope {
    public:
        write_scope(corpus& c, const ingest_params* p);
        ~write_scope();
        write_scope(const write_scope&) = delete;
        write_scope& operator=(const write_scope&) = delete;

    private:
        corpus& c_;
        std::unique_ptr<writer_lock> lock_;
        int exceptions_;
    };
    std::unique_ptr<writer_lock> lock_writer(const ingest_params* p);
    void sync_index_locked();
    // The index for catalog version v: the saved file when it is stamped v, else a rebuild from
    // the catalog's embeddings (not saved here). *rebuilt says which.
    std::shared_ptr<vector_index> load_index(int64_t v, bool* rebuilt) const;
    void set_index(std::shared_ptr<vector_index> idx);
    std::shared_ptr<vector_index> index_snapshot() const;
    void refresh_index_if_stale() const;
    void remove_stale_temp_files() const;

    std::string dir_;
    corpus_params p_;
    std::shared_ptr<file_io> io_;
    std::unique_ptr<catalog> cat_;
    // Searches take a snapshot of the pointer (index_mu_), so a reload never frees an index that a
    // search is using; adds and removes go through vector_index's own lock.
    std::shared_ptr<vector_index> index_;
    mutable std::mutex index_mu_;
    std::string index_path_;
    bool index_dirty_ = false;
    // The catalog vector_version that index_ mirrors (-1: unknown, reload before use).
    mutable std::atomic<int64_t> index_version_{-1};
    mutable std::mutex write_mu_;  // one ingest/remove (or index reload) at a time
};

// Paths for a data directory.
std::string corpus_catalog_path(const std::string& dir);
std::string corpus_index_path(const std::string& dir);

}  // namespace cacheblend
