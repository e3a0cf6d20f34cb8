#include "runtime/rag-runtime.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "core/kvstore/kv-tiered.h"
#include "core/prompt/rag-prompt.h"
#include "core/util/error.h"
#include "core/util/file-io.h"
#include "core/util/xdg-dirs.h"
#include "retrieval/embedder.h"
#include "runtime/rag-session.h"

namespace cacheblend {
namespace {

bool is_regular_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Creates each missing component of dir with mode 0700.
void make_dirs(const std::string& dir) {
    for (size_t i = 1; i <= dir.size(); ++i) {
        if (i < dir.size() && dir[i] != '/') continue;
        const std::string part = dir.substr(0, i);
        if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
            throw error(status::io_write, "cannot create " + part + ": " + errno_name(errno));
        }
    }
}

// What kv_store_params::budget_bytes = 0 means (core/kvstore/kv-store.h), for reporting the budget.
constexpr uint64_t k_default_kv_budget = uint64_t(8) << 30;

uint64_t file_bytes(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size)
                                                                  : 0;
}

// A mistyped --data must not become a new empty data directory: a read-only open wants the
// catalog there (checked before the model loads, so the mistake is reported at once).
void require_data_dir(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        throw error(status::io, "no data directory at " + dir + " (" + errno_name(errno) + ")");
    }
    if (!S_ISDIR(st.st_mode)) throw error(status::io, "no data directory at " + dir + " (not a folder)");
    if (::stat(corpus_catalog_path(dir).c_str(), &st) != 0) {
        throw error(status::io, "no data directory at " + dir + " (no catalog.db in it: " +
                                    errno_name(errno) + ")");
    }
}

}  // namespace

std::string default_data_dir() { return xdg_data_dir(); }

std::shared_ptr<rag_runtime> rag_runtime::open(const rag_runtime_params& p) {
    std::shared_ptr<rag_runtime> rt(new rag_runtime());
    rt->dir_ = p.data_dir.empty() ? default_data_dir() : p.data_dir;
    if (p.must_exist) require_data_dir(rt->dir_);
    rt->n_threads_ = p.n_threads > 0 ? p.n_threads : default_thread_count();
    rt->device_ = check_device(p.device);  // before loading anything: a wrong device fails fast
    rt->host_ = open_backend("cpu", rt->n_threads_);
    // A device is opened now, so one this machine cannot use fails here, before any loading.
    rt->compute_ = rt->device_ == "cpu" ? rt->host_ : open_backend(rt->device_, rt->n_threads_);
    rt->gate_ =
        std::make_unique<request_gate>(p.max_active_requests > 0 ? p.max_active_requests
                                                                 : k_default_max_active_requests,
                                       p.max_queued_requests > 0   ? p.max_queued_requests
                                       : p.max_queued_requests < 0 ? 0
                                                                   : k_default_max_queued_requests);
    rt->memory_ = std::make_shared<memory_budget>(p.session_memory_bytes);
    rt->llm_ = load_model_or_default(p.model_path);
    if (rt->llm_->vocab_only()) {
        throw error(status::invalid_arg, "runtime: the model file has no weights (vocabulary only)");
    }

    corpus_params cp;
    cp.encode = tokenizer_encoder(rt->llm_->vocab());
    cp.tokenizer_id = rt->llm_->name() + fmt(":%016llx", static_cast<unsigned long long>(
                                                              rt->llm_->fingerprint()));
    if (p.no_embedder) {
        rt->notice_ = "no embedder requested: BM25 only, dense search disabled";
    } else if (!p.embedder_path.empty()) {
        cp.emb = load_bert_embedder(p.embedder_path, rt->host_);  // explicit: must load
    } else if (const std::string path = default_embedder_path(); is_regular_file(path)) {
        cp.emb = load_bert_embedder(path, rt->host_);
    } else {
        rt->notice_ = "embedder not found at " + path +
                      " (set CBL_EMBED_MODEL): BM25 only, dense search disabled";
    }

    make_dirs(rt->dir_);
    kv_store_params kp;
    kp.dir = rt->dir_ + "/kv";
    kp.budget_bytes = p.kv_budget_bytes;
    rt->kv_budget_bytes_ = p.kv_budget_bytes ? p.kv_budget_bytes : k_default_kv_budget;
    rt->kv_ = kv_store::open(kp);
    rt->blend_kv_ = with_shared_tier(rt->kv_, p.kv_remote);
    cp.kv = rt->kv_;     // removing a document here must not delete what other machines share
    cp.kv_owned = true;  // DIR/kv belongs to this data dir alone
    rt->docs_ = corpus::open(rt->dir_, std::move(cp));
    return rt;
}

rag_runtime::~rag_runtime() = default;

std::shared_ptr<const backend_weights> rag_runtime::shared_weights() {
    if (compute_->host_memory()) return nullptr;
    std::lock_guard<std::mutex> lock(weights_mu_);
    if (!weights_) weights_ = std::make_shared<const backend_weights>(*llm_, compute_);
    return weights_;
}

std::vector<document_info> rag_runtime::documents(const search_filter& f) {
    std::vector<document_info> docs = docs_->cat().list_documents(f);
    // KV bytes: the store index's size of each distinct key a document's chunks refer to. A key
    // two documents share (identical chunks) counts in both; a key whose file was evicted, in
    // neither.
    const std::unordered_map<std::string, uint64_t> sizes = kv_->bytes_by_key();
    std::unordered_map<int64_t, int64_t> by_doc;
    for (const auto& [doc_id, key] : docs_->cat().document_kv_keys()) {
        if (const auto it = sizes.find(key); it != sizes.end()) {
            by_doc[doc_id] += static_cast<int64_t>(it->second);
        }
    }
    for (document_info& d : docs) {
        if (const auto it = by_doc.find(d.id); it != by_doc.end()) d.kv_bytes = it->second;
    }
    return docs;
}

data_dir_stats rag_runtime::stats() {
    data_dir_stats s;
    s.documents = docs_->cat().count_documents();
    s.chunks = docs_->cat().count_chunks();
    if (const auto index = docs_->index()) s.vectors = index->size();
    const std::string cat = corpus_catalog_path(dir_);
    s.catalog_bytes = file_bytes(cat) + file_bytes(cat + "-wal");
    s.index_bytes = file_bytes(corpus_index_path(dir_));
    const kv_store_stats kv = kv_->stats();
    s.kv_entries = kv.entries;
    s.kv_bytes = kv.bytes;
    s.kv_budget_bytes = kv_budget_bytes_;
    struct statvfs vfs {};
    if (::statvfs(dir_.c_str(), &vfs) == 0) {
        s.disk_free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    }
    return s;
}

ingest_params rag_runtime::wrap(ingest_params p, bool precompute_kv) {
    // An interrupt() after this point aborts the call at its next progress report.
    const uint64_t epoch = interrupt_epoch_.load();
    auto user = std::move(p.progress);
    p.progress = [this, epoch, user = std::move(user)](const ingest_progress& pr) {
        // Its own message: no callback returned false, and users read "interrupted".
        if (interrupt_epoch_.load() != epoch) {
            throw error(status::aborted, "ingest: interrupted (cbl_runtime_interrupt)");
        }
        return !user || user(pr);
    };
    if (precompute_kv) {
        // One session per ingest call, made at the first chunk that needs KV and freed with the
        // call's parameters, with a context just big enough for the chunks it has seen: its KV
        // cache and scratch count against the session budget only while an ingest computes, and
        // only as much as a chunk needs (a whole-context session would hold hundreds of MB).
        // Ingests run their chunks one at a time, so the session needs no lock.
        auto pre = std::make_shared<std::unique_ptr<rag_session>>();
        p.precompute_kv = [this, pre](const chunk_info& ch) {
            // The question is a placeholder: a chunk's KV depends only on what precedes it.
            const blend_request req =
                build_blend_request(*llm_, default_rag_prompt({ch.text}, "?"));
            const int64_t need = static_cast<int64_t>(req.preamble.size() + req.chunks[0].size());
            if (!*pre || (*pre)->n_ctx() < need) {
                pre->reset();  // its memory goes back before the bigger one reserves
                session_params sp;
                sp.n_threads = n_threads_;
                sp.device = device_;
                sp.shared_compute = shared_compute();
                sp.weights = shared_weights();
                sp.memory = memory_;
                // Rounded up so chunks of similar length share one session; a chunk past the
                // model's context gets precompute's range error.
                const int64_t limit = std::min(llm_->hparams().n_ctx_train, 8192);
                sp.n_ctx = static_cast<int32_t>(std::min(limit, (need + 255) / 256 * 256));
                *pre = std::make_unique<rag_session>(llm_, blend_kv_, sp, blend_params{});
            }
            return (*pre)->precompute_chunk(req.preamble, req.chunks[0]).hex();
        };
    }
    return p;
}

ingest_report rag_runtime::ingest_paths(const std::vector<std::string>& paths, ingest_params p,
                                        bool precompute_kv) {
    return docs_->ingest_paths(paths, wrap(std::move(p), precompute_kv));
}

bool rag_runtime::ingest_text(const std::string& uri, std::string_view text, doc_kind kind,
                              const std::string& metadata_json, ingest_params p,
                              bool precompute_kv, ingest_report* report) {
    return docs_->ingest_text(uri, text, kind, metadata_json, wrap(std::move(p), precompute_kv),
                              report);
}

repair_report rag_runtime::repair(ingest_params p, bool precompute_kv) {
    return docs_->repair(wrap(std::move(p), precompute_kv));
}

bool rag_runtime::remove(const std::string& uri, ingest_report* report) {
    return docs_->remove(uri, report);
}

search_result rag_runtime::search(const std::string& query, const search_params& p) const {
    return docs_->search(query, p);
}

}  // namespace cacheblend
