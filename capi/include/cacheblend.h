/*
 * libcacheblend: embedded RAG runtime with CacheBlend KV fusion. The stable C ABI.
 *
 * Conventions (docs/ARCHITECTURE.md, 'C ABI'):
 *  - Every fallible function returns cbl_status (CBL_OK = 0). On failure it records a
 *    thread-local message, readable with cbl_last_error() until the next cbl_ call on the same
 *    thread, and sets every out_* handle to NULL. Success does not clear the message.
 *  - (s & 0xff) is the primary status; extended codes add detail in the upper bits.
 *  - Handles are opaque and reference-counted; cbl_x_free(NULL) is a no-op.
 *  - Params structs start with struct_size; call the *_init() helper (it records your sizeof),
 *    then set fields. Zero means "library default" for every field. NULL params = all defaults.
 *    A struct_size above CBL_MAX_STRUCT_SIZE is CBL_INVALID_ARG (params and output structs).
 *  - Freeing a handle twice is undefined behaviour, as free() twice is in C: no library can
 *    tell a freed handle from a live one. cbl_x_free(NULL) is the only safe repeat; set your
 *    pointer to NULL after freeing it. A session freed during one of its own calls is the
 *    exception below (cbl_session_free): that is handled.
 *  - Strings are UTF-8, copied before return. The library never aborts, exits or prints.
 *  - Thread safety: models, KV stores and runtimes are shareable across threads; a session
 *    serves one call at a time (a concurrent call returns CBL_MISUSE); cancel from any thread.
 *  - Callbacks run on the calling thread; the library never frees a callback's user_data.
 *
 * This header is C99; it compiles with -Wall -Wextra -Werror -pedantic.
 */
#ifndef CACHEBLEND_H
#define CACHEBLEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  if defined(CBL_BUILD)
#    define CBL_API __declspec(dllexport)
#  elif defined(CBL_SHARED)
#    define CBL_API __declspec(dllimport)
#  else
#    define CBL_API
#  endif
#else
#  define CBL_API __attribute__((visibility("default")))
#endif

#define CBL_VERSION_MAJOR 0
#define CBL_VERSION_MINOR 1
#define CBL_VERSION_PATCH 0
#define CBL_VERSION_NUMBER (CBL_VERSION_MAJOR * 1000000 + CBL_VERSION_MINOR * 1000 + CBL_VERSION_PATCH)
#define CBL_VERSION_STRING "0.1.0"

/* The largest struct_size any sized struct (params or output) may carry. Structs only grow by
 * appended fields and the biggest is a few hundred bytes today, so 4 KiB leaves decades of room
 * while a garbage or uninitialised struct_size (a stack value, a pointer) is refused before the
 * library reads past the caller's struct. @since 0.1 */
#define CBL_MAX_STRUCT_SIZE 4096

/* ---- status codes ---- */
typedef int32_t cbl_status;
#define CBL_OK           0
#define CBL_ERROR        1   /* generic */
#define CBL_INVALID_ARG  2
#define CBL_MISUSE       3   /* wrong state or thread, re-entry */
#define CBL_NOMEM        4
#define CBL_IO           5
#define CBL_CORRUPT      6   /* checksum, truncation */
#define CBL_FORMAT       7   /* unknown version or layout */
#define CBL_UNSUPPORTED  8
#define CBL_DEVICE       9   /* CUDA, cuBLASLt */
#define CBL_ABORTED     10
#define CBL_RANGE       11
#define CBL_CATALOG     12   /* SQLite; its code is in the message */
#define CBL_INTERNAL    13
#define CBL_BUSY 14 /* the runtime's request queue is full: retry later (@since 0.1) */
#define CBL_IO_READ     (CBL_IO | (1 << 8))
#define CBL_IO_WRITE    (CBL_IO | (2 << 8))
#define CBL_DEVICE_OOM  (CBL_DEVICE | (1 << 8))

/** Message of the last failed call on this thread; never NULL. @since 0.1 */
CBL_API const char *cbl_last_error(void);
/** Status of the last failed call on this thread (CBL_OK if none). @since 0.1 */
CBL_API cbl_status cbl_last_status(void);
/** Static description of a status code; never NULL. @since 0.1 */
CBL_API const char *cbl_status_str(cbl_status s);

/* ---- versions ---- */
/** CBL_VERSION_NUMBER of the linked library. @since 0.1 */
CBL_API int32_t cbl_version_number(void);
/** CBL_VERSION_STRING of the linked library. @since 0.1 */
CBL_API const char *cbl_version_string(void);
/** Build facts, e.g. "cpu_isa=avx512 mimalloc=1 cuda=0". Static string. @since 0.1 */
CBL_API const char *cbl_build_info(void);

/* ---- logging ---- */
typedef enum cbl_log_level {
    CBL_LOG_LEVEL_DEBUG = 0,
    CBL_LOG_LEVEL_INFO = 1,
    CBL_LOG_LEVEL_WARN = 2,
    CBL_LOG_LEVEL_ERROR = 3
} cbl_log_level;
typedef void (*cbl_log_fn)(cbl_log_level level, const char *message, void *user_data);
/** Installs a process-wide log sink (NULL = silent, the default). @since 0.1 */
CBL_API void cbl_log_set(cbl_log_fn fn, void *user_data);

/* ---- memory ---- */
/** Frees memory the library handed to the caller (char*, void*). NULL is a no-op. @since 0.1 */
CBL_API void cbl_free(void *p);

/* ---- models ---- */
typedef struct cbl_model cbl_model;

typedef struct cbl_model_params {
    size_t struct_size;  /* set by cbl_model_params_init() */
    bool vocab_only;     /* load only the tokenizer (vocabulary GGUFs) */
    /* new fields are appended here only */
} cbl_model_params;

static inline void cbl_model_params_init(cbl_model_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** Loads a GGUF model. path is a file or a model name ("qwen2.5-coder-1.5b": its file in
 *  ${XDG_CACHE_HOME:-~/.cache}/cacheblend/models, which cacheblend-fetch-model NAME fills; an
 *  existing file of that name wins). NULL = $CBL_MODEL (a path or a name), else the default model,
 *  qwen2.5-coder-1.5b. A missing file is CBL_IO with a message naming the fetch command. On
 *  failure *out_model is NULL. @since 0.1 */
CBL_API cbl_status cbl_model_load(const char *path, const cbl_model_params *params,
                                  cbl_model **out_model);
/** Drops the caller's reference. NULL is a no-op. @since 0.1 */
CBL_API void cbl_model_free(cbl_model *model);
/** Vocabulary size (0 for NULL). @since 0.1 */
CBL_API int32_t cbl_model_n_vocab(const cbl_model *model);
/** Training context length (0 for NULL or vocab-only models). @since 0.1 */
CBL_API int32_t cbl_model_n_ctx_train(const cbl_model *model);

/**
 * Tokenizes text[0..len). add_special adds BOS/EOS as the model's flags say; parse_special
 * matches control-token text. Size-query pattern: with ids == NULL or cap too small, returns
 * CBL_OK / CBL_RANGE respectively and sets *out_n to the number of ids needed. @since 0.1
 */
CBL_API cbl_status cbl_tokenize(const cbl_model *model, const char *text, size_t len,
                                bool add_special, bool parse_special, int32_t *ids, size_t cap,
                                size_t *out_n);

/* ---- devices ---- */
/** Number of compute devices; device 0 is always the CPU. @since 0.1 */
CBL_API int32_t cbl_device_count(void);
/** Name of device i ("cpu", "cuda:0"), or NULL when out of range. Static string. @since 0.1 */
CBL_API const char *cbl_device_name(int32_t i);

/* ---- enums (explicit values, never reused; 0 always means "library default") ---- */
/* Prefill modes. */
#define CBL_MODE_DEFAULT 0 /* CBL_MODE_BLEND */
#define CBL_MODE_FULL    1 /* compute every prompt token (the quality oracle) */
#define CBL_MODE_PREFIX  2 /* reuse only the leading chunk's KV (exact prefix caching) */
#define CBL_MODE_REUSE   3 /* reuse every cached chunk's KV as is (no recompute) */
#define CBL_MODE_BLEND   4 /* CacheBlend: reuse, recompute the most deviating tokens */
/* Retrieval modes. */
#define CBL_SEARCH_DEFAULT 0 /* CBL_SEARCH_HYBRID */
#define CBL_SEARCH_HYBRID  1 /* dense + BM25, reciprocal-rank fusion */
#define CBL_SEARCH_DENSE   2 /* embedder + FAISS only */
#define CBL_SEARCH_BM25    3 /* SQLite FTS5 only */
/* KV formats of the chunk store. */
#define CBL_KV_DEFAULT 0 /* CBL_KV_F16 */
#define CBL_KV_F16     1
#define CBL_KV_Q8      2 /* 8-bit per token and head: half the bytes, small fidelity cost */
#define CBL_KV_EXACT   3 /* K in f32, V in f16: 1.5x the bytes of F16, and a reused chunk's KV
                            is bit for bit what full prefill computes (F16 rounds K twice) */
/* Document formats for cbl_runtime_ingest_text. */
#define CBL_DOC_DEFAULT  0 /* CBL_DOC_TEXT */
#define CBL_DOC_TEXT     1
#define CBL_DOC_MARKDOWN 2
#define CBL_DOC_HTML     3 /* markup stripped */
/* Why generation stopped. */
#define CBL_STOP_NONE     0 /* no generation ran */
#define CBL_STOP_EOG      1 /* end-of-generation token */
#define CBL_STOP_LENGTH   2 /* max_tokens reached */
#define CBL_STOP_CONTEXT  3 /* the session's context is full */
#define CBL_STOP_CALLBACK 4 /* the token callback returned false */

/* ---- names of the enums above: one table, in the library ----
 * Front ends print and parse these values by name (a CLI flag, JSON output, a binding's String);
 * asking the library keeps every front end on the same words. */
#define CBL_NAMES_MODE 1      /* CBL_MODE_*: "full", "prefix", "reuse", "blend" */
#define CBL_NAMES_SEARCH 2    /* CBL_SEARCH_*: "hybrid", "dense", "bm25" */
#define CBL_NAMES_KV_FORMAT 3 /* CBL_KV_*: "f16", "q8", "exact" */
#define CBL_NAMES_DOC 4       /* CBL_DOC_*: "text", "markdown", "html" */
#define CBL_NAMES_STOP 5      /* CBL_STOP_*: "none", "eog", "length", "context", "callback" */

/** The name of `value` among the CBL_NAMES_* `kind`'s constants: a static string, or NULL for a
 *  kind or value the library does not know. A DEFAULT (0) value names the default it stands for
 *  (CBL_MODE_DEFAULT gives "blend"; CBL_STOP_NONE, which is no default, gives "none").
 *  @since 0.1 */
CBL_API const char *cbl_enum_name(int32_t kind, int32_t value);

/** The value named `name` (exactly as cbl_enum_name spells it) of the CBL_NAMES_* `kind`, in
 *  *out_value. CBL_INVALID_ARG for an unknown kind or name; the message lists the valid names.
 *  @since 0.1 */
CBL_API cbl_status cbl_enum_parse(int32_t kind, const char *name, int32_t *out_value);

/* ---- runtime: model + KV store + catalog + index in one handle ----
 * Thread safety: a runtime is shared by any number of threads. Searches run in parallel; ingest
 * and delete calls are serialized internally. Sessions made from it keep it alive. */
typedef struct cbl_runtime cbl_runtime;

typedef struct cbl_runtime_params {
    size_t struct_size;         /* set by cbl_runtime_params_init() */
    const char *model_path;     /* a file or a model name, as cbl_model_load takes; NULL =
                                   $CBL_MODEL, else the default model (qwen2.5-coder-1.5b) */
    const char *embedder_path;  /* NULL = $CBL_EMBED_MODEL, else the default embedder; a missing
                                   default file means BM25-only retrieval (reported, not an error) */
    const char *data_dir;       /* NULL = ${XDG_DATA_HOME:-~/.local/share}/cacheblend; created 0700 */
    uint64_t kv_budget_bytes;   /* 0 = 8 GiB; least recently used chunk KV is evicted past it */
    int32_t n_threads;          /* 0 = all cores */
    const char *device;         /* NULL = "cpu"; a device this build lacks gives CBL_UNSUPPORTED */
    bool no_embedder;           /* true: do not load an embedder (BM25 only) */
    bool must_exist;            /* true: open an existing data directory only: CBL_IO "no data
                                   directory at ..." when data_dir holds no catalog.db, and
                                   nothing is created (for read-only front ends, where a
                                   mistyped path must not become an empty corpus). @since 0.1 */
    const char *kv_remote;      /* NULL = $CBL_KV_REMOTE, else none: a shared chunk-KV tier,
                                   "redis://[user:password@]host:port/db". Chunks missing here are
                                   read from it, chunks computed here are written to it; a server
                                   that is down, slow or refuses us only makes requests use local
                                   KV or recompute (cbl_stats.notice says so). A malformed URL is
                                   CBL_INVALID_ARG; a build without Redis, CBL_UNSUPPORTED.
                                   README, "Serving many users". @since 0.1 */
    /* Admission of the sessions' calls (ask, prefill_*, generate): at most max_active_requests
       run at once (0 = 4), taking turns on the runtime's thread pool; up to max_queued_requests
       more wait in arrival order (0 = 64, negative = none wait); a call beyond them returns
       CBL_BUSY at once ("runtime busy: ...": retry later, or answer HTTP 503). A call waiting
       for its turn returns CBL_ABORTED when its session is cancelled. @since 0.1 */
    int32_t max_active_requests;
    int32_t max_queued_requests;
    /* RAM for all sessions' working KV caches and compute scratch together (0 = half of the
       machine's physical memory). A session whose cache (n_ctx tokens) or whose prefill would
       pass it fails with CBL_NOMEM naming what it needed and what others hold, instead of
       the process being killed for memory. @since 0.1 */
    uint64_t session_memory_bytes;
    /* new fields are appended here only */
} cbl_runtime_params;

static inline void cbl_runtime_params_init(cbl_runtime_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** Opens (creating when missing, unless must_exist) the data directory and loads the model and the embedder.
 *  On failure *out_runtime is NULL and nothing is left open. @since 0.1 */
CBL_API cbl_status cbl_runtime_open(const cbl_runtime_params *params, cbl_runtime **out_runtime);
/** Drops the caller's reference; sessions still using the runtime keep it open, and so does a
 *  call running on it (freeing it from inside an ingest progress callback is safe: the call
 *  finishes on its own reference). @since 0.1 */
CBL_API void cbl_runtime_free(cbl_runtime *runtime);
/** A new reference to the runtime's model (free it with cbl_model_free). @since 0.1 */
CBL_API cbl_status cbl_runtime_model(cbl_runtime *runtime, cbl_model **out_model);
/** Why dense retrieval is off ("" when an embedder is loaded). Static until the runtime is
 *  freed. @since 0.1 */
CBL_API const char *cbl_runtime_notice(const cbl_runtime *runtime);
/** Aborts the ingest calls running on this runtime now (any thread); they return CBL_ABORTED
 *  after committing whole documents only. Later calls are not affected. @since 0.1 */
CBL_API void cbl_runtime_interrupt(cbl_runtime *runtime);

/* ---- ingest ---- */
typedef struct cbl_progress {
    size_t struct_size;   /* the library's sizeof; fields past the caller's header are extra */
    const char *phase;    /* "scan", "ingest", "chunk", "embed", "kv", "index"; "skip" (a file
                             was skipped: `message` says why), "notice" (e.g. the index was
                             rebuilt) or "wait": another process is writing to the data directory
                             (one writer at a time; `current` says who, e.g. "pid 1234"); called
                             every 50-200 ms until it is done, return false to stop waiting.
                             "chunk" (bytes) and "embed" (chunks) also come during one big file,
                             with `current` naming it and done/total moving */
    int64_t done;
    int64_t total;
    const char *current;  /* the file being worked on ("" when none) */
    const char *message;  /* phase "skip": why `current` was skipped */
} cbl_progress;

/** Progress callback, on the calling thread; return false to abort (CBL_ABORTED). The pointers
 *  in *progress are valid during the call only. */
typedef bool (*cbl_progress_fn)(const cbl_progress *progress, void *user_data);

typedef struct cbl_ingest_params {
    size_t struct_size;          /* set by cbl_ingest_params_init() */
    const char *collection;      /* NULL = none; searches can filter on it */
    const char *metadata_json;   /* ingest_text only: a JSON object stored with the document */
    int32_t format;              /* ingest_text only: CBL_DOC_*; files go by their extension */
    int32_t chunk_tokens;        /* 0 = 512 LLM tokens per chunk */
    bool precompute_kv;          /* compute every new chunk's KV now (else on first use) */
    cbl_progress_fn progress;    /* NULL = none */
    void *progress_user_data;
    /* ingest_path: follow a symlink met in the folder when its real path stays inside that
       folder (else, and by default, it is skipped: "symbolic link (not followed)"). A path
       passed in is followed either way. */
    bool follow_symlinks;
    int64_t max_file_bytes;      /* 0 = 16 MiB (CBL_DEFAULT_MAX_FILE_BYTES); larger files are
                                    skipped with a reason, a larger ingest_text is
                                    CBL_INVALID_ARG; INT64_MAX = no limit. 16 MiB is ~4M tokens,
                                    a 3000-page book: bigger "text" files are nearly always logs
                                    or dumps, and embedding one takes tens of CPU-minutes */
    double max_file_seconds;     /* 0 = no limit; a file not committed within this many seconds
                                    is abandoned (nothing of it committed), skipped with "took
                                    longer than N s", and the run goes on with the next file;
                                    ingest_text returns CBL_ABORTED. Checked every 64 KiB
                                    chunked and every embedding batch of the file */
    /* new fields are appended here only */
} cbl_ingest_params;

#define CBL_DEFAULT_MAX_FILE_BYTES 16777216 /* 16 MiB */

static inline void cbl_ingest_params_init(cbl_ingest_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/* Output struct: the caller sets struct_size (cbl_ingest_report_init). */
typedef struct cbl_ingest_report {
    size_t struct_size;
    int64_t files_seen, added, updated, unchanged, removed, skipped;
    int64_t chunks_added, chunks_removed, embedded, kv_computed;
    int64_t kv_deleted;  /* chunk KV files whose last reference went */
} cbl_ingest_report;

static inline void cbl_ingest_report_init(cbl_ingest_report *r) {
    memset(r, 0, sizeof(*r));
    r->struct_size = sizeof(*r);
}

/** Ingests text[0..len) as the document `uri` (replacing an older version of it). Each document
 *  commits atomically. out_report may be NULL; on CBL_ABORTED it still counts what was
 *  committed. @since 0.1 */
CBL_API cbl_status cbl_runtime_ingest_text(cbl_runtime *runtime, const char *uri, const char *text,
                                           size_t len, const cbl_ingest_params *params,
                                           cbl_ingest_report *out_report);
/** Ingests a file or, recursively, a folder (.txt, .md, .html). Unchanged files are skipped by
 *  content hash; files inside it that cannot be read are skipped with a reason (progress phase
 *  "skip") and the rest go on. A `path` that cannot be accessed itself (missing, no permission)
 *  is CBL_IO naming it and the reason ("cannot access /x: ENOENT") and nothing is ingested:
 *  a mistyped path must not look like success. Documents committed before an abort or error
 *  stay; on CBL_ABORTED (cbl_runtime_interrupt, or the progress callback returned false)
 *  *out_report counts them. @since 0.1 */
CBL_API cbl_status cbl_runtime_ingest_path(cbl_runtime *runtime, const char *path,
                                           const cbl_ingest_params *params,
                                           cbl_ingest_report *out_report);
/** Removes a document, its vectors and (last reference) its chunks' KV. *out_found tells
 *  whether it existed: an unknown uri is CBL_OK with *out_found false, so callers that treat
 *  it as a mistake (the CLI's `ingest --remove` exits 1) check it. @since 0.1 */
CBL_API cbl_status cbl_runtime_delete(cbl_runtime *runtime, const char *uri, bool *out_found);
/** cbl_runtime_delete that also counts: out_report->removed is 1 when the document existed
 *  (else 0), chunks_removed its chunks, kv_deleted the KV files whose last reference went; the
 *  other counts are 0. @since 0.1 */
CBL_API cbl_status cbl_runtime_delete_counted(cbl_runtime *runtime, const char *uri,
                                              cbl_ingest_report *out_report);

/* Output struct: the caller sets struct_size (cbl_corpus_stats_init). */
typedef struct cbl_corpus_stats {
    size_t struct_size;
    int64_t documents, chunks;
    int64_t kv_entries;   /* chunk KV files in the store */
    uint64_t kv_bytes;
    /* @since 0.1: sizes for operators (`cacheblend stats`) */
    int64_t vectors;            /* vectors in the dense index (0 without an embedder) */
    uint64_t catalog_bytes;     /* catalog.db with its write-ahead log */
    uint64_t index_bytes;       /* vectors.faiss */
    uint64_t kv_budget_bytes;   /* the KV store's budget (kv_budget_bytes, 0 resolved to 8 GiB) */
    uint64_t disk_free_bytes;   /* free to this user on the data directory's file system */
} cbl_corpus_stats;

static inline void cbl_corpus_stats_init(cbl_corpus_stats *s) {
    memset(s, 0, sizeof(*s));
    s->struct_size = sizeof(*s);
}

/** Counts and sizes of the runtime's data directory. @since 0.1 */
CBL_API cbl_status cbl_runtime_stats(cbl_runtime *runtime, cbl_corpus_stats *out_stats);
/** Checks that the catalog, the vector index and the KV store agree. *out_problems is NULL when
 *  they do, else one problem per line (free it with cbl_free). @since 0.1 */
CBL_API cbl_status cbl_runtime_check(cbl_runtime *runtime, char **out_problems);
/** Repairs what cbl_runtime_check finds where it can: rebuilds the catalog's full-text index and
 *  the vector index from the catalog, embeds chunks without embeddings, deletes damaged and
 *  unreferenced KV files, finishes pending deletes and, with params->precompute_kv, computes
 *  missing chunk KV (params: precompute_kv and progress are read; NULL = defaults). A catalog
 *  that SQLite finds damaged is left as it is (re-ingest into a new data directory).
 *  *out_report is NULL when there was nothing to do, else one line per item, starting with
 *  "repaired: ", "not repaired: " (still a problem: cbl_runtime_check lists it) or "note: "
 *  (free it with cbl_free). CBL_OK even when something is left. @since 0.1 */
CBL_API cbl_status cbl_runtime_repair(cbl_runtime *runtime, const cbl_ingest_params *params,
                                      char **out_report);

/* ---- search ---- */
typedef struct cbl_search_params {
    size_t struct_size;      /* set by cbl_search_params_init() */
    int32_t k;               /* 0 = 5 */
    int32_t mode;            /* CBL_SEARCH_* */
    const char *collection;  /* NULL = every collection */
    const char *uri_prefix;  /* NULL = every document; else only uris starting with it */
    /* Metadata filter (@since 0.1): only documents whose metadata holds metadata_values[i] under
     * metadata_keys[i] for every i < n_metadata (keys: 1 to 128 of [A-Za-z0-9_.-]; files carry
     * "kind" = text|markdown|html|pdf|docx|odt|csv|json and "path"). */
    const char *const *metadata_keys;
    const char *const *metadata_values;
    size_t n_metadata;
    /* new fields are appended here only */
} cbl_search_params;

static inline void cbl_search_params_init(cbl_search_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/* One retrieved chunk (also a citation). Output struct: the caller sets struct_size
 * (cbl_hit_init). Strings are borrowed from the results or answer handle. */
typedef struct cbl_hit {
    size_t struct_size;
    int64_t chunk_id;
    const char *uri;     /* the document */
    int64_t start, end;  /* byte range of the chunk in the source document */
    double score;        /* RRF (hybrid), cosine (dense) or -bm25 (bm25): higher is better */
    const char *text;    /* the chunk's text, NUL-terminated */
    size_t text_len;
    int32_t n_tokens;    /* LLM tokens */
    /* Where the chunk is, for formats that have it (appended after 0.1.0; an older library
     * leaves both as cbl_hit_init set them). For PDF, DOCX and ODT, start/end are offsets in
     * the extracted text (their bytes are compressed); page and heading locate the passage. */
    int32_t page;        /* 1-based page of a PDF; 0 = none */
    const char *heading; /* nearest preceding heading (HTML, DOCX, ODT); "" or NULL = none */
} cbl_hit;

static inline void cbl_hit_init(cbl_hit *h) {
    memset(h, 0, sizeof(*h));
    h->struct_size = sizeof(*h);
}

typedef struct cbl_results cbl_results;

/** Best-first chunks for `query`. @since 0.1 */
CBL_API cbl_status cbl_runtime_search(cbl_runtime *runtime, const char *query,
                                      const cbl_search_params *params, cbl_results **out_results);
/** Number of hits (0 for NULL). @since 0.1 */
CBL_API size_t cbl_results_count(const cbl_results *results);
/** Hit i; its strings live until cbl_results_free. CBL_RANGE past the end. @since 0.1 */
CBL_API cbl_status cbl_results_hit(const cbl_results *results, size_t i, cbl_hit *out_hit);
/** What the retriever changed, e.g. dense search skipped without an embedder ("" if nothing). */
CBL_API const char *cbl_results_notice(const cbl_results *results);
/** The CBL_SEARCH_* that ran: hybrid falls back to BM25 without an embedder (0 for NULL).
 *  @since 0.1 */
CBL_API int32_t cbl_results_mode(const cbl_results *results);
/** NULL is a no-op. @since 0.1 */
CBL_API void cbl_results_free(cbl_results *results);

/* ---- documents: what a data directory holds ---- */
/* One document. Output struct: the caller sets struct_size (cbl_document_info_init). Strings
 * are borrowed from the list and live until cbl_documents_free. @since 0.1 */
typedef struct cbl_document_info {
    size_t struct_size;
    const char *uri;           /* a file's absolute path, or the uri given to ingest_text */
    const char *kind;          /* "text", "markdown", "html" ("" when its metadata has none) */
    const char *collection;    /* "" when none */
    const char *metadata_json; /* the document's metadata, a JSON object */
    int64_t n_chunks;
    int64_t n_kv_chunks;       /* chunks whose KV is stored (precomputed or used by a request) */
    int64_t source_bytes;      /* size of the source text when ingested */
    int64_t mtime_ns;          /* the file's modification time when ingested (ns since the
                                  epoch; 0 for ingest_text) */
    /* Appended after the fields above (struct_size tells them apart). ingested_at: when it was
     * last (re)ingested, in seconds since the epoch (UTC). kv_bytes: the size of its chunks'
     * stored KV files (a chunk identical to another document's counts in both). */
    int64_t ingested_at;
    int64_t kv_bytes;
} cbl_document_info;

static inline void cbl_document_info_init(cbl_document_info *d) {
    memset(d, 0, sizeof(*d));
    d->struct_size = sizeof(*d);
}

typedef struct cbl_documents cbl_documents;

/** The documents a search with `filter` may return, ordered by uri: its collection, uri_prefix
 *  and metadata fields are read (k and mode are not); NULL = every document. @since 0.1 */
CBL_API cbl_status cbl_runtime_documents(cbl_runtime *runtime, const cbl_search_params *filter,
                                         cbl_documents **out_documents);
/** Number of documents (0 for NULL). @since 0.1 */
CBL_API size_t cbl_documents_count(const cbl_documents *documents);
/** Document i; its strings live until cbl_documents_free. CBL_RANGE past the end. @since 0.1 */
CBL_API cbl_status cbl_documents_get(const cbl_documents *documents, size_t i,
                                     cbl_document_info *out_info);
/** NULL is a no-op. @since 0.1 */
CBL_API void cbl_documents_free(cbl_documents *documents);

/* ---- chunk KV store (for apps with their own retrieval) ---- */
typedef struct cbl_kvstore cbl_kvstore;

typedef struct cbl_kvstore_params {
    size_t struct_size;        /* set by cbl_kvstore_params_init() */
    uint64_t budget_bytes;     /* 0 = 8 GiB */
    bool direct_io;            /* read with O_DIRECT (bypass the page cache) */
    const char *kv_remote;     /* NULL = $CBL_KV_REMOTE, else none: the shared tier behind this
                                  store, as cbl_runtime_params.kv_remote. @since 0.1 */
    /* new fields are appended here only */
} cbl_kvstore_params;

static inline void cbl_kvstore_params_init(cbl_kvstore_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** Opens (creating 0700) a chunk KV store in dir. Thread-safe; processes may share it. */
CBL_API cbl_status cbl_kvstore_open(const char *dir, const cbl_kvstore_params *params,
                                    cbl_kvstore **out_store);
/** Drops the caller's reference. NULL is a no-op. @since 0.1 */
CBL_API void cbl_kvstore_free(cbl_kvstore *store);

/* ---- sessions: one request at a time ----
 * A session may move between threads but serves one call at a time: a second concurrent call,
 * or a callback calling back into its own session, returns CBL_MISUSE. cbl_session_cancel may
 * be called from any thread. */
typedef struct cbl_session cbl_session;

typedef struct cbl_session_params {
    size_t struct_size;     /* set by cbl_session_params_init() */
    int32_t n_threads;      /* 0 = the runtime's (or all cores) */
    int32_t n_ctx;          /* 0 = the model's training context, at most 8192 */
    int32_t mode;           /* CBL_MODE_* */
    float recompute_ratio;  /* 0 = 0.15; share of reused tokens recomputed in CBL_MODE_BLEND */
    bool auto_ratio;        /* pick the ratio from measured load and compute rates */
    int32_t kv_format;      /* CBL_KV_* */
    bool calibrated_ratio;  /* CBL_MODE_BLEND: the ratio `cacheblend calibrate` recorded in the
                               store for this model and kv_format, read when the session is
                               made (recompute_ratio when there is none; full prefill when no
                               ratio below 1 met its target: the stats' notice says which) */
    const char *device;     /* NULL = the runtime's device (cbl_session_create), "cpu"
                               (cbl_session_create_with); else "cpu" or "cuda:N" as
                               cbl_runtime_params.device takes it: CBL_UNSUPPORTED for a device
                               this build lacks, CBL_DEVICE for one this machine lacks (the
                               error says why). @since 0.1 */
    /* new fields are appended here only */
} cbl_session_params;

static inline void cbl_session_params_init(cbl_session_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** A session over the runtime's model and KV store. @since 0.1 */
CBL_API cbl_status cbl_session_create(cbl_runtime *runtime, const cbl_session_params *params,
                                      cbl_session **out_session);
/** A session over a model and a KV store of your own, for cbl_session_prefill_chunks; with
 *  store == NULL it serves plain prefills only (cbl_session_prefill_text / _tokens). @since 0.1 */
CBL_API cbl_status cbl_session_create_with(cbl_model *model, cbl_kvstore *store,
                                           const cbl_session_params *params,
                                           cbl_session **out_session);
/** NULL is a no-op. Freeing a session while one of its calls runs (from that call's token
 *  callback, or from another thread once the call has started) is safe: the call is cancelled
 *  (it returns CBL_ABORTED soon, unless it was already finishing) and the session is released
 *  when the call returns. Do not use the handle after this; freeing it twice is undefined.
 *  @since 0.1 */
CBL_API void cbl_session_free(cbl_session *session);
/** Makes the session's running call return CBL_ABORTED soon (between layers or tokens). Any
 *  thread; NULL is a no-op; without a running call it does nothing. @since 0.1 */
CBL_API void cbl_session_cancel(cbl_session *session);

/** Token callback, on the calling thread: piece[0..len) is the token's text (not NUL-terminated;
 *  may be a partial UTF-8 sequence). Return false to stop generating (CBL_STOP_CALLBACK). */
typedef bool (*cbl_token_fn)(const char *piece, size_t len, int32_t token, void *user_data);

typedef struct cbl_generate_params {
    size_t struct_size;      /* set by cbl_generate_params_init() */
    int32_t max_tokens;      /* 0 = 128 */
    float temperature;       /* 0 = greedy */
    uint64_t seed;           /* sampling seed for temperature > 0 */
    cbl_token_fn on_token;   /* NULL = none */
    void *user_data;
    int32_t top_logprobs;    /* record the k most likely first tokens (0 = none), from the
                                model's logits before any penalty */
    bool ignore_eog;         /* generate max_tokens even past end-of-generation (benchmarks) */
    int32_t top_k;           /* temperature > 0: keep the k most likely; 0 = 40, < 0 = off */
    float top_p;             /* temperature > 0: nucleus threshold; 0 = 0.95, >= 1 = off */
    float min_p;             /* temperature > 0: drop below min_p x best; 0 = 0.05, < 0 = off */
    /* Repetition penalties (llama.cpp's), before greedy selection too, over the last
     * repeat_last_n tokens of the context, the prompt included. End-of-generation tokens are
     * never penalized (the chat template puts one right before the answer). */
    float repeat_penalty;    /* a seen token's logit / this when > 0, x this when <= 0;
                                0 = 1 (off); negative: CBL_INVALID_ARG */
    int32_t repeat_last_n;   /* the window in tokens: 0 = 64, -1 = the whole context */
    float frequency_penalty; /* logit -= this x the token's count in the window; 0 = off */
    float presence_penalty;  /* logit -= this once the token is in the window; 0 = off */
    /* new fields are appended here only */
} cbl_generate_params;

static inline void cbl_generate_params_init(cbl_generate_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

typedef struct cbl_ask_params {
    size_t struct_size;      /* set by cbl_ask_params_init() */
    int32_t k;               /* chunks to retrieve; 0 = 4 */
    int32_t search_mode;     /* CBL_SEARCH_* */
    const char *collection;  /* NULL = every collection */
    const char *uri_prefix;  /* NULL = every document */
    int32_t max_tokens;      /* 0 = 128 */
    float temperature;       /* 0 = greedy */
    uint64_t seed;
    cbl_token_fn on_token;   /* NULL = none */
    void *user_data;
    bool compare_full;       /* also time the same prompt in CBL_MODE_FULL (stats.full_ttft_ms) */
    int32_t top_logprobs;    /* record the k most likely first tokens (0 = none), from the
                                model's logits before any penalty */
    const char *const *metadata_keys;    /* metadata filter, as in cbl_search_params */
    const char *const *metadata_values;
    size_t n_metadata;
    /* Sampling as in cbl_generate_params, with ask's own penalty defaults: answers are greedy
     * with a repeat penalty of 1.1 over the last 64 tokens, which keeps them on the passages'
     * wording yet ends the loops greedy decoding falls into. Set repeat_penalty = 1 for plain
     * greedy. Callers whose struct ends before top_k get these defaults too. */
    int32_t top_k;           /* temperature > 0: 0 = 40, < 0 = off */
    float top_p;             /* temperature > 0: 0 = 0.95, >= 1 = off */
    float min_p;             /* temperature > 0: 0 = 0.05, < 0 = off */
    float repeat_penalty;    /* 0 = 1.1; 1 = off; negative: CBL_INVALID_ARG */
    int32_t repeat_last_n;   /* 0 = 64, -1 = the whole context */
    float frequency_penalty; /* 0 = off */
    float presence_penalty;  /* 0 = off */
    /* new fields are appended here only */
} cbl_ask_params;

static inline void cbl_ask_params_init(cbl_ask_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/* Per-request statistics. Output struct: the caller sets struct_size (cbl_stats_init). */
typedef struct cbl_stats {
    size_t struct_size;
    int32_t mode;             /* CBL_MODE_* that ran */
    float ratio;              /* recompute ratio used */
    double ttft_ms;           /* request start to the first sampled token */
    double prefill_ms;        /* blended prefill alone */
    double load_ms, load_wait_ms, select_ms, compute_ms;
    double search_ms;         /* ask: retrieval */
    double store_ms;          /* ask: storing computed chunk KV after the answer (not in TTFT) */
    double decode_tokens_per_s;
    double full_ttft_ms;      /* compare_full only, else 0 */
    int64_t prompt_tokens, tokens_reused, tokens_recomputed, tokens_missed;
    uint64_t bytes_loaded;    /* chunk KV read from the store */
    int32_t chunks_hit, chunks_missed;
    int32_t chunks_used, chunks_dropped;  /* ask: retrieved chunks in / left out of the prompt */
    int32_t generated_tokens;
    int32_t stop_reason;      /* CBL_STOP_* */
    int32_t search_mode;      /* ask: the CBL_SEARCH_* that ran (hybrid falls back to BM25
                                 without an embedder) */
    int32_t n_ctx;            /* the session's context */
    const char *notice;       /* what ran differently, e.g. "no cached chunks: computed in full"
                                 ("" if nothing); valid until cbl_answer_free, or for
                                 cbl_session_prefill_chunks until the next call on the session */
    int64_t tokens_remote;    /* of tokens_reused: read from the shared tier (kv_remote) */
    uint64_t bytes_remote;    /* of bytes_loaded: read from the shared tier */
    double dense_ms;          /* of compute_ms: work on every prompt row (blend: the layers
                                 before the check layer and its Q/K/V projection; full: all) */
    double relocate_ms;       /* of compute_ms: rotating stored K into the cache */
    double queue_ms;          /* the call's wait for a turn at the runtime's admission
                                 (max_active_requests); not part of ttft_ms */
} cbl_stats;

static inline void cbl_stats_init(cbl_stats *s) {
    memset(s, 0, sizeof(*s));
    s->struct_size = sizeof(*s);
}

typedef struct cbl_answer cbl_answer;

/** Retrieves the best chunks for `question`, assembles [preamble][chunks][question] in the chat
 *  template within the context (lowest-ranked chunks dropped, counted in stats), prefills with
 *  the session's mode reusing the store's chunk KV, and generates the answer, streaming tokens to
 *  on_token. Chunks computed from scratch are stored afterwards. @since 0.1 */
CBL_API cbl_status cbl_session_ask(cbl_session *session, const char *question,
                                   const cbl_ask_params *params, cbl_answer **out_answer);
/** Lower level: prefills [preamble][chunks...][question] from your own chunks (in prompt order),
 *  reusing their stored KV and storing the misses. Follow with cbl_session_generate. lens may be
 *  NULL for NUL-terminated chunks. out_stats may be NULL. @since 0.1 */
CBL_API cbl_status cbl_session_prefill_chunks(cbl_session *session, const char *const *chunks,
                                              const size_t *lens, size_t n_chunks,
                                              const char *question, cbl_stats *out_stats);
typedef struct cbl_prompt_params {
    size_t struct_size;      /* set by cbl_prompt_params_init() */
    bool chat;               /* render the text as a user message in the model's chat template */
    const char *system;      /* chat only: a system message (NULL = none) */
    bool parse_special;      /* plain text: match control-token text (chat always does) */
    /* new fields are appended here only */
} cbl_prompt_params;

static inline void cbl_prompt_params_init(cbl_prompt_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** Plain prefill of a whole prompt (no chunk reuse), from the start of the context. Plain text
 *  is tokenized like llama.cpp (BOS/EOS as the model's flags say). Follow with
 *  cbl_session_generate. out_stats may be NULL. @since 0.1 */
CBL_API cbl_status cbl_session_prefill_text(cbl_session *session, const char *text, size_t len,
                                            const cbl_prompt_params *params, cbl_stats *out_stats);
/** The same from token ids. @since 0.1 */
CBL_API cbl_status cbl_session_prefill_tokens(cbl_session *session, const int32_t *tokens,
                                              size_t n, cbl_stats *out_stats);
/** The prompt ids of the last prefill of any kind; *out_n gets their number. The array lives
 *  until the next call on the session (NULL when there is none). @since 0.1 */
CBL_API const int32_t *cbl_session_prompt_tokens(const cbl_session *session, size_t *out_n);
/** Generates from the last prefill (once per prefill; CBL_MISUSE otherwise).
 *  @since 0.1 */
CBL_API cbl_status cbl_session_generate(cbl_session *session, const cbl_generate_params *params,
                                        cbl_answer **out_answer);

/** The answer's text, NUL-terminated ("" for NULL). Lives until cbl_answer_free. @since 0.1 */
CBL_API const char *cbl_answer_text(const cbl_answer *answer);
/** Citations: the chunks the prompt used, best first (0 for prefill_chunks answers). */
CBL_API size_t cbl_answer_n_citations(const cbl_answer *answer);
/** Citation i; strings live until cbl_answer_free. CBL_RANGE past the end. @since 0.1 */
CBL_API cbl_status cbl_answer_citation(const cbl_answer *answer, size_t i, cbl_hit *out_hit);
/** The generated token ids (no prompt, no stop token); *out_n gets their number. The array
 *  lives until cbl_answer_free (NULL when there are none). @since 0.1 */
CBL_API const int32_t *cbl_answer_tokens(const cbl_answer *answer, size_t *out_n);
/** Number of recorded first-token alternatives (the top_logprobs param). @since 0.1 */
CBL_API size_t cbl_answer_n_top_logprobs(const cbl_answer *answer);
/** Alternative i, most likely first: token id and natural-log probability. @since 0.1 */
CBL_API cbl_status cbl_answer_top_logprob(const cbl_answer *answer, size_t i, int32_t *out_token,
                                          float *out_logprob);
/** The request's statistics. @since 0.1 */
CBL_API cbl_status cbl_answer_stats(const cbl_answer *answer, cbl_stats *out_stats);
/** NULL is a no-op. @since 0.1 */
CBL_API void cbl_answer_free(cbl_answer *answer);

/** The text of one token (special tokens as their text). Size-query pattern as cbl_tokenize:
 *  with buf == NULL or cap too small, CBL_OK / CBL_RANGE and *out_len = bytes needed. The text
 *  is not NUL-terminated. @since 0.1 */
CBL_API cbl_status cbl_token_to_piece(const cbl_model *model, int32_t token, char *buf, size_t cap,
                                      size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif /* CACHEBLEND_H */
