/* C shims for the Go binding: see shim.h. */
#include <string.h>

#include "shim.h"
#include "_cgo_export.h"

/* A malloc'd copy of this thread's last error message (NULL only when out of memory). */
static char *gocbl_copy_error(void) {
    const char *msg = cbl_last_error();
    size_t n = strlen(msg);
    char *copy = (char *)malloc(n + 1);
    if (copy) memcpy(copy, msg, n + 1);
    return copy;
}

/* Returns s, capturing the message in *err when s is a failure. */
static cbl_status gocbl_ret(cbl_status s, char **err) {
    if (s != CBL_OK && err) *err = gocbl_copy_error();
    return s;
}

/* ---- callbacks into Go (callbacks.go) ---- */
static bool gocbl_on_token(const char *piece, size_t len, int32_t token, void *user_data) {
    return goCblOnToken((char *)piece, len, token, (uintptr_t)user_data) != 0;
}

static bool gocbl_on_progress(const cbl_progress *p, void *user_data) {
    return goCblOnProgress((char *)p->phase, p->done, p->total, (char *)p->current,
                           (char *)p->message, (uintptr_t)user_data) != 0;
}

static void gocbl_on_log(cbl_log_level level, const char *message, void *user_data) {
    goCblOnLog((int)level, (char *)message, (uintptr_t)user_data);
}

/* ---- runtime ---- */
cbl_status gocbl_runtime_open(const gocbl_runtime_opts* o, cbl_runtime** out, char** err) {
    cbl_runtime_params p;
    cbl_runtime_params_init(&p);
    p.model_path = o->model_path;
    p.embedder_path = o->embedder_path;
    p.data_dir = o->data_dir;
    p.kv_budget_bytes = o->kv_budget_bytes;
    p.n_threads = o->n_threads;
    p.device = o->device;
    p.no_embedder = o->no_embedder;
    p.must_exist = o->must_exist;
    p.kv_remote = o->kv_remote;
    p.max_active_requests = o->max_active_requests;
    p.max_queued_requests = o->max_queued_requests;
    p.session_memory_bytes = o->session_memory_bytes;
    return gocbl_ret(cbl_runtime_open(&p, out), err);
}

cbl_status gocbl_runtime_model(cbl_runtime *rt, cbl_model **out, char **err) {
    return gocbl_ret(cbl_runtime_model(rt, out), err);
}

static void gocbl_fill_ingest(cbl_ingest_params *p, const gocbl_ingest_opts *o, uintptr_t sink) {
    cbl_ingest_params_init(p);
    if (o) {
        p->collection = o->collection;
        p->metadata_json = o->metadata_json;
        p->format = o->format;
        p->chunk_tokens = o->chunk_tokens;
        p->precompute_kv = o->precompute_kv;
        p->follow_symlinks = o->follow_symlinks;
        p->max_file_bytes = o->max_file_bytes;
        p->max_file_seconds = o->max_file_seconds;
    }
    if (sink) {
        p->progress = gocbl_on_progress;
        p->progress_user_data = (void *)sink;
    }
}

cbl_status gocbl_ingest_text(cbl_runtime *rt, const char *uri, const char *text, size_t len,
                             const gocbl_ingest_opts *o, uintptr_t sink, cbl_ingest_report *rep,
                             char **err) {
    cbl_ingest_params p;
    gocbl_fill_ingest(&p, o, sink);
    cbl_ingest_report_init(rep);
    return gocbl_ret(cbl_runtime_ingest_text(rt, uri, text, len, &p, rep), err);
}

cbl_status gocbl_ingest_path(cbl_runtime *rt, const char *path, const gocbl_ingest_opts *o,
                             uintptr_t sink, cbl_ingest_report *rep, char **err) {
    cbl_ingest_params p;
    gocbl_fill_ingest(&p, o, sink);
    cbl_ingest_report_init(rep);
    return gocbl_ret(cbl_runtime_ingest_path(rt, path, &p, rep), err);
}

cbl_status gocbl_delete(cbl_runtime *rt, const char *uri, bool *found, char **err) {
    return gocbl_ret(cbl_runtime_delete(rt, uri, found), err);
}

cbl_status gocbl_delete_counted(cbl_runtime *rt, const char *uri, cbl_ingest_report *rep,
                                char **err) {
    cbl_ingest_report_init(rep);
    return gocbl_ret(cbl_runtime_delete_counted(rt, uri, rep), err);
}

cbl_status gocbl_runtime_stats(cbl_runtime *rt, cbl_corpus_stats *out, char **err) {
    cbl_corpus_stats_init(out);
    return gocbl_ret(cbl_runtime_stats(rt, out), err);
}

/* *problems is NULL or a string for cbl_free. */
cbl_status gocbl_runtime_check(cbl_runtime *rt, char **problems, char **err) {
    return gocbl_ret(cbl_runtime_check(rt, problems), err);
}

/* *report is NULL (nothing to do) or a string for cbl_free. */
cbl_status gocbl_runtime_repair(cbl_runtime *rt, bool precompute_kv, char **report, char **err) {
    cbl_ingest_params p;
    cbl_ingest_params_init(&p);
    p.precompute_kv = precompute_kv;
    return gocbl_ret(cbl_runtime_repair(rt, &p, report), err);
}

cbl_status gocbl_search(cbl_runtime *rt, const char *query, const gocbl_search_opts *o,
                        cbl_results **out, char **err) {
    cbl_search_params p;
    cbl_search_params_init(&p);
    p.k = o->k;
    p.mode = o->mode;
    p.collection = o->collection;
    p.uri_prefix = o->uri_prefix;
    p.metadata_keys = o->metadata_keys;
    p.metadata_values = o->metadata_values;
    p.n_metadata = o->n_metadata;
    return gocbl_ret(cbl_runtime_search(rt, query, &p, out), err);
}

cbl_status gocbl_results_hit(const cbl_results *res, size_t i, cbl_hit *out, char **err) {
    cbl_hit_init(out);
    return gocbl_ret(cbl_results_hit(res, i, out), err);
}

cbl_status gocbl_documents(cbl_runtime *rt, const gocbl_search_opts *o, cbl_documents **out,
                           char **err) {
    cbl_search_params p;
    cbl_search_params_init(&p);
    p.collection = o->collection;
    p.uri_prefix = o->uri_prefix;
    p.metadata_keys = o->metadata_keys;
    p.metadata_values = o->metadata_values;
    p.n_metadata = o->n_metadata;
    return gocbl_ret(cbl_runtime_documents(rt, &p, out), err);
}

cbl_status gocbl_documents_get(const cbl_documents *docs, size_t i, cbl_document_info *out,
                               char **err) {
    cbl_document_info_init(out);
    return gocbl_ret(cbl_documents_get(docs, i, out), err);
}

/* ---- models and KV stores ---- */
cbl_status gocbl_model_load(const char *path, bool vocab_only, cbl_model **out, char **err) {
    cbl_model_params p;
    cbl_model_params_init(&p);
    p.vocab_only = vocab_only;
    return gocbl_ret(cbl_model_load(path, &p, out), err);
}

cbl_status gocbl_tokenize(const cbl_model *m, const char *text, size_t len, bool add_special,
                          bool parse_special, int32_t *ids, size_t cap, size_t *out_n, char **err) {
    return gocbl_ret(cbl_tokenize(m, text, len, add_special, parse_special, ids, cap, out_n), err);
}

cbl_status gocbl_kvstore_open(const char *dir, uint64_t budget_bytes, bool direct_io,
                              cbl_kvstore **out, char **err) {
    cbl_kvstore_params p;
    cbl_kvstore_params_init(&p);
    p.budget_bytes = budget_bytes;
    p.direct_io = direct_io;
    return gocbl_ret(cbl_kvstore_open(dir, &p, out), err);
}

/* ---- sessions ---- */
static void gocbl_fill_session(cbl_session_params *p, const gocbl_session_opts *o) {
    cbl_session_params_init(p);
    p->n_threads = o->n_threads;
    p->n_ctx = o->n_ctx;
    p->mode = o->mode;
    p->recompute_ratio = o->recompute_ratio;
    p->auto_ratio = o->auto_ratio;
    p->kv_format = o->kv_format;
    p->device = o->device;
}

cbl_status gocbl_session_create(cbl_runtime *rt, const gocbl_session_opts *o, cbl_session **out,
                                char **err) {
    cbl_session_params p;
    gocbl_fill_session(&p, o);
    return gocbl_ret(cbl_session_create(rt, &p, out), err);
}

cbl_status gocbl_session_create_with(cbl_model *m, cbl_kvstore *kv, const gocbl_session_opts *o,
                                     cbl_session **out, char **err) {
    cbl_session_params p;
    gocbl_fill_session(&p, o);
    return gocbl_ret(cbl_session_create_with(m, kv, &p, out), err);
}

cbl_status gocbl_session_ask(cbl_session *s, const char *question, const gocbl_ask_opts *o,
                             uintptr_t sink, cbl_answer **out, char **err) {
    cbl_ask_params p;
    cbl_ask_params_init(&p);
    p.k = o->k;
    p.search_mode = o->search_mode;
    p.collection = o->collection;
    p.uri_prefix = o->uri_prefix;
    p.max_tokens = o->max_tokens;
    p.temperature = o->temperature;
    p.seed = o->seed;
    p.compare_full = o->compare_full;
    p.top_logprobs = o->top_logprobs;
    p.metadata_keys = o->metadata_keys;
    p.metadata_values = o->metadata_values;
    p.n_metadata = o->n_metadata;
    p.top_k = o->top_k;
    p.top_p = o->top_p;
    p.min_p = o->min_p;
    p.repeat_penalty = o->repeat_penalty;
    p.repeat_last_n = o->repeat_last_n;
    p.frequency_penalty = o->frequency_penalty;
    p.presence_penalty = o->presence_penalty;
    if (sink) {
        p.on_token = gocbl_on_token;
        p.user_data = (void *)sink;
    }
    return gocbl_ret(cbl_session_ask(s, question, &p, out), err);
}

cbl_status gocbl_session_prefill_chunks(cbl_session *s, const char *const *chunks,
                                        const size_t *lens, size_t n, const char *question,
                                        cbl_stats *out_stats, char **err) {
    cbl_stats_init(out_stats);
    return gocbl_ret(cbl_session_prefill_chunks(s, chunks, lens, n, question, out_stats), err);
}

cbl_status gocbl_session_prefill_text(cbl_session *s, const char *text, size_t len, bool chat,
                                      const char *system, bool parse_special, cbl_stats *out_stats,
                                      char **err) {
    cbl_prompt_params p;
    cbl_prompt_params_init(&p);
    p.chat = chat;
    p.system = system;
    p.parse_special = parse_special;
    cbl_stats_init(out_stats);
    return gocbl_ret(cbl_session_prefill_text(s, text, len, &p, out_stats), err);
}

cbl_status gocbl_session_prefill_tokens(cbl_session *s, const int32_t *tokens, size_t n,
                                        cbl_stats *out_stats, char **err) {
    cbl_stats_init(out_stats);
    return gocbl_ret(cbl_session_prefill_tokens(s, tokens, n, out_stats), err);
}

cbl_status gocbl_session_generate(cbl_session *s, const gocbl_generate_opts *o, uintptr_t sink,
                                  cbl_answer **out, char **err) {
    cbl_generate_params p;
    cbl_generate_params_init(&p);
    p.max_tokens = o->max_tokens;
    p.temperature = o->temperature;
    p.seed = o->seed;
    p.top_logprobs = o->top_logprobs;
    p.ignore_eog = o->ignore_eog;
    p.top_k = o->top_k;
    p.top_p = o->top_p;
    p.min_p = o->min_p;
    p.repeat_penalty = o->repeat_penalty;
    p.repeat_last_n = o->repeat_last_n;
    p.frequency_penalty = o->frequency_penalty;
    p.presence_penalty = o->presence_penalty;
    if (sink) {
        p.on_token = gocbl_on_token;
        p.user_data = (void *)sink;
    }
    return gocbl_ret(cbl_session_generate(s, &p, out), err);
}

/* ---- answers ---- */
cbl_status gocbl_answer_citation(const cbl_answer *a, size_t i, cbl_hit *out, char **err) {
    cbl_hit_init(out);
    return gocbl_ret(cbl_answer_citation(a, i, out), err);
}

cbl_status gocbl_answer_stats(const cbl_answer *a, cbl_stats *out, char **err) {
    cbl_stats_init(out);
    return gocbl_ret(cbl_answer_stats(a, out), err);
}

cbl_status gocbl_answer_top_logprob(const cbl_answer *a, size_t i, int32_t *token, float *logprob,
                                    char **err) {
    return gocbl_ret(cbl_answer_top_logprob(a, i, token, logprob), err);
}

cbl_status gocbl_token_to_piece(const cbl_model *m, int32_t token, char *buf, size_t cap,
                                size_t *out_len, char **err) {
    return gocbl_ret(cbl_token_to_piece(m, token, buf, cap, out_len), err);
}

/* ---- logging ---- */
void gocbl_log_set(uintptr_t sink) {
    if (sink) {
        cbl_log_set(gocbl_on_log, (void *)sink);
    } else {
        cbl_log_set(NULL, NULL);
    }
}
