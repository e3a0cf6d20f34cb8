/*
 * C shims between the Go binding and libcacheblend (shim.c).
 *
 * Each shim fills a params struct with its static inline _init() helper, calls one cbl_ function
 * and, when that fails, copies cbl_last_error() into *err (malloc'd; the caller frees it with
 * free()) before returning. The copy must happen inside the same cgo call: the message is
 * thread-local, and a goroutine may run on another OS thread by its next cgo call.
 *
 * Callbacks take a runtime/cgo.Handle as user_data (sink); 0 means no callback.
 */
#ifndef CACHEBLEND_GO_SHIM_H
#define CACHEBLEND_GO_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cacheblend.h"

/* Search options as one plain struct (no C pointers owned here). Every pointer, the metadata
 * arrays included, points to C memory the Go caller allocates and frees around the call. */
typedef struct gocbl_search_opts {
    int32_t k;
    int32_t mode;
    const char *collection;
    const char *uri_prefix;
    const char *const *metadata_keys;
    const char *const *metadata_values;
    size_t n_metadata;
} gocbl_search_opts;

typedef struct gocbl_ingest_opts {
    const char *collection;
    const char *metadata_json;
    int32_t format;
    int32_t chunk_tokens;
    bool precompute_kv;
    bool follow_symlinks;
    int64_t max_file_bytes;
    double max_file_seconds;
} gocbl_ingest_opts;

typedef struct gocbl_session_opts {
    int32_t n_threads;
    int32_t n_ctx;
    int32_t mode;
    float recompute_ratio;
    bool auto_ratio;
    int32_t kv_format;
    const char* device;
} gocbl_session_opts;

typedef struct gocbl_ask_opts {
    int32_t k;
    int32_t search_mode;
    const char *collection;
    const char *uri_prefix;
    int32_t max_tokens;
    float temperature;
    uint64_t seed;
    bool compare_full;
    int32_t top_logprobs;
    const char *const *metadata_keys;   /* C memory, as in gocbl_search_opts */
    const char *const *metadata_values;
    size_t n_metadata;
    int32_t top_k;
    float top_p;
    float min_p;
    float repeat_penalty;
    int32_t repeat_last_n;
    float frequency_penalty;
    float presence_penalty;
} gocbl_ask_opts;

typedef struct gocbl_generate_opts {
    int32_t max_tokens;
    float temperature;
    uint64_t seed;
    int32_t top_logprobs;
    bool ignore_eog;
    int32_t top_k;
    float top_p;
    float min_p;
    float repeat_penalty;
    int32_t repeat_last_n;
    float frequency_penalty;
    float presence_penalty;
} gocbl_generate_opts;

/* cbl_runtime_params without struct_size: Go fills it, the shim copies it into the library's
   struct (so the Go side never depends on the struct's size). */
typedef struct gocbl_runtime_opts {
    const char* model_path;
    const char* embedder_path;
    const char* data_dir;
    uint64_t kv_budget_bytes;
    int32_t n_threads;
    const char* device;
    bool no_embedder;
    bool must_exist;
    const char* kv_remote;
    int32_t max_active_requests;
    int32_t max_queued_requests;
    uint64_t session_memory_bytes;
} gocbl_runtime_opts;

cbl_status gocbl_runtime_open(const gocbl_runtime_opts* o, cbl_runtime** out, char** err);
cbl_status gocbl_runtime_model(cbl_runtime *rt, cbl_model **out, char **err);
cbl_status gocbl_ingest_text(cbl_runtime *rt, const char *uri, const char *text, size_t len,
                             const gocbl_ingest_opts *o, uintptr_t sink, cbl_ingest_report *rep,
                             char **err);
cbl_status gocbl_ingest_path(cbl_runtime *rt, const char *path, const gocbl_ingest_opts *o,
                             uintptr_t sink, cbl_ingest_report *rep, char **err);
cbl_status gocbl_delete(cbl_runtime *rt, const char *uri, bool *found, char **err);
cbl_status gocbl_delete_counted(cbl_runtime *rt, const char *uri, cbl_ingest_report *rep,
                                char **err);
cbl_status gocbl_runtime_stats(cbl_runtime *rt, cbl_corpus_stats *out, char **err);
cbl_status gocbl_runtime_check(cbl_runtime *rt, char **problems, char **err);
cbl_status gocbl_runtime_repair(cbl_runtime *rt, bool precompute_kv, char **report, char **err);
cbl_status gocbl_search(cbl_runtime *rt, const char *query, const gocbl_search_opts *o,
                        cbl_results **out, char **err);
cbl_status gocbl_results_hit(const cbl_results *res, size_t i, cbl_hit *out, char **err);
/* The search options' filter fields (k and mode are not read). */
cbl_status gocbl_documents(cbl_runtime *rt, const gocbl_search_opts *o, cbl_documents **out,
                           char **err);
cbl_status gocbl_documents_get(const cbl_documents *docs, size_t i, cbl_document_info *out,
                               char **err);

cbl_status gocbl_model_load(const char *path, bool vocab_only, cbl_model **out, char **err);
cbl_status gocbl_tokenize(const cbl_model *m, const char *text, size_t len, bool add_special,
                          bool parse_special, int32_t *ids, size_t cap, size_t *out_n, char **err);
cbl_status gocbl_kvstore_open(const char *dir, uint64_t budget_bytes, bool direct_io,
                              cbl_kvstore **out, char **err);

cbl_status gocbl_session_create(cbl_runtime *rt, const gocbl_session_opts *o, cbl_session **out,
                                char **err);
cbl_status gocbl_session_create_with(cbl_model *m, cbl_kvstore *kv, const gocbl_session_opts *o,
                                     cbl_session **out, char **err);
cbl_status gocbl_session_ask(cbl_session *s, const char *question, const gocbl_ask_opts *o,
                             uintptr_t sink, cbl_answer **out, char **err);
cbl_status gocbl_session_prefill_chunks(cbl_session *s, const char *const *chunks,
                                        const size_t *lens, size_t n, const char *question,
                                        cbl_stats *out_stats, char **err);
cbl_status gocbl_session_prefill_text(cbl_session *s, const char *text, size_t len, bool chat,
                                      const char *system, bool parse_special, cbl_stats *out_stats,
                                      char **err);
cbl_status gocbl_session_prefill_tokens(cbl_session *s, const int32_t *tokens, size_t n,
                                        cbl_stats *out_stats, char **err);
cbl_status gocbl_session_generate(cbl_session *s, const gocbl_generate_opts *o, uintptr_t sink,
                                  cbl_answer **out, char **err);

cbl_status gocbl_answer_citation(const cbl_answer *a, size_t i, cbl_hit *out, char **err);
cbl_status gocbl_answer_stats(const cbl_answer *a, cbl_stats *out, char **err);
cbl_status gocbl_answer_top_logprob(const cbl_answer *a, size_t i, int32_t *token, float *logprob,
                                    char **err);
cbl_status gocbl_token_to_piece(const cbl_model *m, int32_t token, char *buf, size_t cap,
                                size_t *out_len, char **err);

/* Installs (sink != 0) or removes (sink == 0) the Go log sink. */
void gocbl_log_set(uintptr_t sink);

#endif
