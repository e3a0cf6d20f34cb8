// C ABI: the runtime (open, ingest, delete, search, documents) and search results.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>

#include "capi/src/convert.h"
#include "capi/src/guard.h"
#include "capi/src/handles.h"
#include "capi/src/params.h"
#include "core/kvstore/kv-tiered.h"
#include "core/util/error.h"
#include "core/util/file-io.h"

using cacheblend::capi::invalid;
using cacheblend::capi::read_params;
using cacheblend::capi::write_out;

namespace {

// The ingest settings shared by the text and path entry points. The progress trampoline owns
// the strings its C view points into for the duration of one callback.
cacheblend::ingest_params to_ingest(const char* fn, const cbl_ingest_params& in) {
    if (in.chunk_tokens != 0 && (in.chunk_tokens < 8 || in.chunk_tokens > (1 << 16))) {
        throw cacheblend::error(cacheblend::status::invalid_arg,
                                std::string(fn) + ": chunk_tokens must be 0 or within [8, 65536]");
    }
    if (in.max_file_bytes < 0) {
        throw cacheblend::error(cacheblend::status::invalid_arg,
                                std::string(fn) + ": max_file_bytes must be >= 0 (0 = 16 MiB)");
    }
    if (!(in.max_file_seconds >= 0)) {  // NaN too
        throw cacheblend::error(cacheblend::status::invalid_arg,
                                std::string(fn) + ": max_file_seconds must be >= 0 (0 = none)");
    }
    cacheblend::ingest_params p;
    if (in.chunk_tokens > 0) p.chunking.max_tokens = in.chunk_tokens;
    if (in.max_file_bytes > 0) p.max_document_bytes = in.max_file_bytes;
    p.max_file_seconds = in.max_file_seconds;
    if (in.collection) p.collection = in.collection;
    p.follow_symlinks = in.follow_symlinks;
    if (cbl_progress_fn cb = in.progress) {
        void* user = in.progress_user_data;
        p.progress = [cb, user](const cacheblend::ingest_progress& pr) {
            cbl_progress c{};
            c.struct_size = sizeof(c);
            c.phase = pr.phase ? pr.phase : "";
            c.done = pr.done;
            c.total = pr.total;
            c.current = pr.current.c_str();
            c.message = "";
            return cb(&c, user);
        };
    }
    return p;
}

cbl_ingest_report to_report(const cacheblend::ingest_report& r) {
    cbl_ingest_report o;
    cbl_ingest_report_init(&o);
    o.files_seen = r.files_seen;
    o.added = r.added;
    o.updated = r.updated;
    o.unchanged = r.unchanged;
    o.removed = r.removed;
    o.skipped = std::max<int64_t>(r.skipped, static_cast<int64_t>(r.skipped_files.size()));
    o.chunks_added = r.chunks_added;
    o.chunks_removed = r.chunks_removed;
    o.embedded = r.embedded;
    o.kv_computed = r.kv_computed;
    o.kv_deleted = r.kv_deleted;
    return o;
}

// An aborted ingest still tells what it committed. The guard then reports the abort itself.
void partial_report(const char* fn, const cacheblend::ingest_aborted& e, cbl_ingest_report* out) {
    if (out) write_out(fn, to_report(e.report), out);
}

// Files skipped with a reason and the ingest's notices reach the caller as progress reports of
// phase "skip" and "notice".
void report_skips(const cbl_ingest_params& in, const cacheblend::ingest_report& r) {
    if (!in.progress) return;
    auto report = [&](const char* phase, int64_t i, int64_t n, const std::string& current,
                      const std::string& message) {
        cbl_progress c{};
        c.struct_size = sizeof(c);
        c.phase = phase;
        c.done = i;
        c.total = n;
        c.current = current.c_str();
        c.message = message.c_str();
        return in.progress(&c, in.progress_user_data);
    };
    const auto n_skip = static_cast<int64_t>(r.skipped_files.size());
    for (int64_t i = 0; i < n_skip; ++i) {
        const auto& [path, why] = r.skipped_files[static_cast<size_t>(i)];
        if (!report("skip", i + 1, n_skip, path, why)) return;
    }
    const auto n_note = static_cast<int64_t>(r.notices.size());
    for (int64_t i = 0; i < n_note; ++i) {
        if (!report("notice", i + 1, n_note, "", r.notices[static_cast<size_t>(i)])) return;
    }
}

}  // namespace

extern "C" {

cbl_status cbl_runtime_open(const cbl_runtime_params* params, cbl_runtime** out_runtime) {
    if (out_runtime) *out_runtime = nullptr;
    return CBL_API_GUARD({
        if (!out_runtime) return invalid(cbl_fn, "out_runtime is required");
        cbl_runtime_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_runtime_params_init)) return s;
        cacheblend::capi::check_device(cbl_fn, p.device);
        if (p.n_threads < 0 || p.n_threads > 1024) {
            return invalid(cbl_fn, "n_threads out of [0, 1024]");
        }
        cacheblend::rag_runtime_params rp;
        if (p.model_path) rp.model_path = p.model_path;
        if (p.embedder_path) rp.embedder_path = p.embedder_path;
        if (p.data_dir) rp.data_dir = p.data_dir;
        rp.no_embedder = p.no_embedder;
        rp.kv_budget_bytes = p.kv_budget_bytes;
        rp.n_threads = p.n_threads;
        rp.must_exist = p.must_exist;
        if (p.kv_remote) rp.kv_remote = p.kv_remote;
        if (p.max_active_requests < 0 || p.max_active_requests > 4096) {
            return invalid(cbl_fn, "max_active_requests out of [0, 4096]");
        }
        if (p.max_queued_requests > 1000000) {
            return invalid(cbl_fn, "max_queued_requests above 1000000");
        }
        rp.max_active_requests = p.max_active_requests;
        rp.max_queued_requests = p.max_queued_requests;
        rp.session_memory_bytes = p.session_memory_bytes;
        if (p.device) rp.device = p.device;
        auto h = std::make_unique<cbl_runtime>();
        h->rt = cacheblend::rag_runtime::open(rp);
        *out_runtime = h.release();
        return CBL_OK;
    });
}

void cbl_runtime_free(cbl_runtime* runtime) { delete runtime; }

cbl_status cbl_runtime_model(cbl_runtime* runtime, cbl_model** out_model) {
    if (out_model) *out_model = nullptr;
    return CBL_API_GUARD({
        if (!runtime || !out_model) return invalid(cbl_fn, "runtime and out_model are required");
        // Our own reference: the handle may be freed during the call (e.g. from a progress
        // callback); the runtime must outlive the call regardless.
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        auto h = std::make_unique<cbl_model>();
        h->m = rt->llm();
        *out_model = h.release();
        return CBL_OK;
    });
}

const char* cbl_runtime_notice(const cbl_runtime* runtime) {
    return runtime ? runtime->rt->notice().c_str() : "";
}

void cbl_runtime_interrupt(cbl_runtime* runtime) {
    if (runtime) runtime->rt->interrupt();
}

cbl_status cbl_runtime_ingest_text(cbl_runtime* runtime, const char* uri, const char* text,
                                   size_t len, const cbl_ingest_params* params,
                                   cbl_ingest_report* out_report) {
    return CBL_API_GUARD({
        if (!runtime || !uri || !*uri) {
            return invalid(cbl_fn, "runtime and a non-empty uri are required");
        }
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        if (!text && len > 0) return invalid(cbl_fn, "text is NULL but len > 0");
        cbl_ingest_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_ingest_params_init)) return s;
        const cacheblend::doc_kind kind = cacheblend::capi::to_doc_kind(cbl_fn, p.format);
        cacheblend::ingest_report r;
        try {
            rt->ingest_text(uri, std::string_view(text ? text : "", len), kind,
                            p.metadata_json ? p.metadata_json : "", to_ingest(cbl_fn, p),
                            p.precompute_kv, &r);
        } catch (const cacheblend::ingest_aborted& e) {
            partial_report(cbl_fn, e, out_report);
            throw;
        }
        report_skips(p, r);
        return out_report ? write_out(cbl_fn, to_report(r), out_report) : CBL_OK;
    });
}

cbl_status cbl_runtime_ingest_path(cbl_runtime* runtime, const char* path,
                                   const cbl_ingest_params* params, cbl_ingest_report* out_report) {
    return CBL_API_GUARD({
        if (!runtime || !path || !*path) {
            return invalid(cbl_fn, "runtime and a non-empty path are required");
        }
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        cbl_ingest_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_ingest_params_init)) return s;
        if (p.metadata_json) return invalid(cbl_fn, "metadata_json applies to ingest_text only");
        // The path the caller named must be there: inside a folder an unreadable file is skipped
        // with a reason, but a mistyped top-level path would otherwise look like success.
        struct stat st {};
        if (::stat(path, &st) != 0) {
            throw cacheblend::error(cacheblend::status::io, std::string("cannot access ") + path +
                                                                ": " +
                                                                cacheblend::errno_name(errno));
        }
        cacheblend::ingest_report r;
        try {
            r = rt->ingest_paths({path}, to_ingest(cbl_fn, p), p.precompute_kv);
        } catch (const cacheblend::ingest_aborted& e) {
            partial_report(cbl_fn, e, out_report);
            throw;
        }
        report_skips(p, r);
        return out_report ? write_out(cbl_fn, to_report(r), out_report) : CBL_OK;
    });
}

cbl_status cbl_runtime_delete(cbl_runtime* runtime, const char* uri, bool* out_found) {
    if (out_found) *out_found = false;
    return CBL_API_GUARD({
        if (!runtime || !uri) return invalid(cbl_fn, "runtime and uri are required");
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        const bool found = rt->remove(uri);
        if (out_found) *out_found = found;
        return CBL_OK;
    });
}

cbl_status cbl_runtime_delete_counted(cbl_runtime* runtime, const char* uri,
                                      cbl_ingest_report* out_report) {
    return CBL_API_GUARD({
        if (!runtime || !uri || !out_report) {
            return invalid(cbl_fn, "runtime, uri and out_report are required");
        }
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        cacheblend::ingest_report r;
        rt->remove(uri, &r);
        return write_out(cbl_fn, to_report(r), out_report);
    });
}

cbl_status cbl_runtime_stats(cbl_runtime* runtime, cbl_corpus_stats* out_stats) {
    return CBL_API_GUARD({
        if (!runtime || !out_stats) return invalid(cbl_fn, "runtime and out_stats are required");
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        const cacheblend::data_dir_stats s = rt->stats();
        cbl_corpus_stats o;
        cbl_corpus_stats_init(&o);
        o.documents = s.documents;
        o.chunks = s.chunks;
        o.kv_entries = static_cast<int64_t>(s.kv_entries);
        o.kv_bytes = s.kv_bytes;
        o.vectors = s.vectors;
        o.catalog_bytes = s.catalog_bytes;
        o.index_bytes = s.index_bytes;
        o.kv_budget_bytes = s.kv_budget_bytes;
        o.disk_free_bytes = s.disk_free_bytes;
        return write_out(cbl_fn, o, out_stats);
    });
}

cbl_status cbl_runtime_check(cbl_runtime* runtime, char** out_problems) {
    if (out_problems) *out_problems = nullptr;
    return CBL_API_GUARD({
        if (!runtime || !out_problems) {
            return invalid(cbl_fn, "runtime and out_problems are required");
        }
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        const cacheblend::consistency_report r = rt->docs().check();
        if (r.problems.empty()) return CBL_OK;
        std::string all;
        for (const std::string& p : r.problems) all += p + "\n";
        *out_problems = cacheblend::capi::malloc_copy(all);
        return CBL_OK;
    });
}

cbl_status cbl_runtime_repair(cbl_runtime* runtime, const cbl_ingest_params* params,
                              char** out_report) {
    if (out_report) *out_report = nullptr;
    return CBL_API_GUARD({
        if (!runtime || !out_report) return invalid(cbl_fn, "runtime and out_report are required");
        // Our own reference: the handle may be freed from the progress callback during the call.
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        cbl_ingest_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_ingest_params_init)) return s;
        const cacheblend::repair_report r = rt->repair(to_ingest(cbl_fn, p), p.precompute_kv);
        std::string all;
        for (const std::string& line : r.repaired) all += "repaired: " + line + "\n";
        for (const std::string& line : r.not_repaired) all += "not repaired: " + line + "\n";
        for (const std::string& line : r.notes) all += "note: " + line + "\n";
        if (!all.empty()) *out_report = cacheblend::capi::malloc_copy(all);
        return CBL_OK;
    });
}

cbl_status cbl_runtime_search(cbl_runtime* runtime, const char* query,
                              const cbl_search_params* params, cbl_results** out_results) {
    if (out_results) *out_results = nullptr;
    return CBL_API_GUARD({
        if (!runtime || !query || !out_results) {
            return invalid(cbl_fn, "runtime, query and out_results are required");
        }
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        cbl_search_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_search_params_init)) return s;
        if (p.k < 0 || p.k > 10000) return invalid(cbl_fn, "k out of [0, 10000]");
        cacheblend::search_params sp;
        if (p.k > 0) sp.k = p.k;
        sp.mode = cacheblend::capi::to_search_mode(cbl_fn, p.mode);
        sp.filter = cacheblend::capi::to_filter(
            cbl_fn, p.collection, p.uri_prefix, p.metadata_keys, p.metadata_values, p.n_metadata);
        cacheblend::search_result r = rt->search(query, sp);
        auto h = std::make_unique<cbl_results>();
        h->hits = std::move(r.hits);
        h->notice = std::move(r.notice);
        h->mode = cacheblend::capi::search_code(r.mode);
        *out_results = h.release();
        return CBL_OK;
    });
}

int32_t cbl_results_mode(const cbl_results* results) { return results ? results->mode : 0; }

size_t cbl_results_count(const cbl_results* results) { return results ? results->hits.size() : 0; }

cbl_status cbl_results_hit(const cbl_results* results, size_t i, cbl_hit* out_hit) {
    return CBL_API_GUARD({
        if (!results || !out_hit) return invalid(cbl_fn, "results and out_hit are required");
        if (i >= results->hits.size()) {
            return cacheblend::capi::set_error(
                CBL_RANGE, cacheblend::fmt("cbl_results_hit: index %zu of %zu hits", i, results->hits.size()));
        }
        return write_out(cbl_fn, cacheblend::capi::to_hit(results->hits[i]), out_hit);
    });
}

const char* cbl_results_notice(const cbl_results* results) {
    return results ? results->notice.c_str() : "";
}

void cbl_results_free(cbl_results* results) { delete results; }

cbl_status cbl_runtime_documents(cbl_runtime* runtime, const cbl_search_params* filter,
                                 cbl_documents** out_documents) {
    if (out_documents) *out_documents = nullptr;
    return CBL_API_GUARD({
        if (!runtime || !out_documents) {
            return invalid(cbl_fn, "runtime and out_documents are required");
        }
        const std::shared_ptr<cacheblend::rag_runtime> rt = runtime->rt;
        cbl_search_params p;
        if (cbl_status s = read_params(cbl_fn, filter, &p, cbl_search_params_init)) return s;
        const cacheblend::search_filter f = cacheblend::capi::to_filter(
            cbl_fn, p.collection, p.uri_prefix, p.metadata_keys, p.metadata_values, p.n_metadata);
        auto h = std::make_unique<cbl_documents>();
        h->docs = rt->documents(f);
        *out_documents = h.release();
        return CBL_OK;
    });
}

size_t cbl_documents_count(const cbl_documents* documents) {
    return documents ? documents->docs.size() : 0;
}

cbl_status cbl_documents_get(const cbl_documents* documents, size_t i,
                             cbl_document_info* out_info) {
    return CBL_API_GUARD({
        if (!documents || !out_info) return invalid(cbl_fn, "documents and out_info are required");
        if (i >= documents->docs.size()) {
            return cacheblend::capi::set_error(
                CBL_RANGE, std::string(cbl_fn) + cacheblend::fmt(": index %zu of %zu documents", i,
                                                                 documents->docs.size()));
        }
        const cacheblend::document_info& d = documents->docs[i];
        cbl_document_info o;
        cbl_document_info_init(&o);
        o.uri = d.uri.c_str();
        o.kind = d.kind.c_str();
        o.collection = d.collection.c_str();
        o.metadata_json = d.metadata.c_str();
        o.n_chunks = d.n_chunks;
        o.n_kv_chunks = d.n_kv_chunks;
        o.source_bytes = d.size;
        o.mtime_ns = d.mtime_ns;
        o.ingested_at = d.ingested_at;
        o.kv_bytes = d.kv_bytes;
        return write_out(cbl_fn, o, out_info);
    });
}

void cbl_documents_free(cbl_documents* documents) { delete documents; }

cbl_status cbl_kvstore_open(const char* dir, const cbl_kvstore_params* params,
                            cbl_kvstore** out_store) {
    if (out_store) *out_store = nullptr;
    return CBL_API_GUARD({
        if (!dir || !*dir || !out_store) return invalid(cbl_fn, "dir and out_store are required");
        cbl_kvstore_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_kvstore_params_init)) return s;
        cacheblend::kv_store_params kp;
        kp.dir = dir;
        kp.budget_bytes = p.budget_bytes;
        kp.direct_io = p.direct_io;
        auto h = std::make_unique<cbl_kvstore>();
        h->kv = cacheblend::with_shared_tier(cacheblend::kv_store::open(kp),
                                             p.kv_remote ? p.kv_remote : "");
        *out_store = h.release();
        return CBL_OK;
    });
}

void cbl_kvstore_free(cbl_kvstore* store) { delete store; }

}  // extern "C"
