#include "runtime/rag-runtime.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "core/prompt/rag-prompt.h"
#include "core/util/error.h"
#include "core/util/file-io.h"
#include "core/util/xdg-dirs.h"
#include "retrieval/embedder.h"

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

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

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

void append_notice(std::string* to, const std::string& what) {
    if (what.empty()) return;
    if (!to->empty()) *to += "; ";
    *to += what;
}

}  // namespace

std::string default_data_dir() { return xdg_data_dir(); }

std::shared_ptr<rag_runtime> rag_runtime::open(const rag_runtime_params& p) {
    std::shared_ptr<rag_runtime> rt(new rag_runtime());
    rt->dir_ = p.data_dir.empty() ? default_data_dir() : p.data_dir;
    if (p.must_exist) require_data_dir(rt->dir_);
    rt->n_threads_ = p.n_threads > 0 ? p.n_threads : default_thread_count();
    check_device(p.device);  // before loading anything: a wrong device fails fast
    rt->device_ = p.device.empty() ? "cpu" : p.device;
    rt->host_ = open_backend("cpu", rt->n_threads_);
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
    cp.kv = rt->kv_;
    cp.kv_owned = true;  // DIR/kv belongs to this data dir alone
    rt->docs_ = corpus::open(rt->dir_, std::move(cp));
    return rt;
}

rag_runtime::~rag_runtime() = default;

std::vector<document_info> rag_runtime::documents(const search_filter& f) {
    return docs_->cat().list_documents(f);
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
        p.precompute_kv = [this](const chunk_info& ch) {
            std::lock_guard<std::mutex> lock(precompute_mu_);
            if (!precompute_engine_) {
                session_params sp;
                sp.n_threads = n_threads_;
                sp.device = device_;
                sp.n_ctx = std::min(llm_->hparams().n_ctx_train, 8192);
                precompute_session_ = std::make_unique<session>(llm_, sp);
                precompute_engine_ = std::make_unique<blend_engine>(*precompute_session_, kv_);
            }
            const blend_request req = build_blend_request(*llm_, default_rag_prompt({ch.text}, "?"));
            precompute_engine_->precompute_chunk(req.preamble, req.chunks[0]);
            return precompute_engine_->key_of(req.preamble, req.chunks[0]).hex();
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

rag_session::rag_session(std::shared_ptr<const model> m, std::shared_ptr<kv_store> kv,
                         const session_params& sp, const blend_params& bp)
    : model_(std::move(m)), kv_(std::move(kv)), sess_(model_, sp), bp_(bp) {
    if (kv_) engine_ = std::make_unique<blend_engine>(sess_, kv_, bp_);
}

void rag_session::set_params(const blend_params& bp) {
    if (engine_) engine_->set_params(bp);
    bp_ = bp;
}

blend_engine& rag_session::engine() {
    if (!engine_) {
        throw error(status::invalid_arg, "this session has no KV store: only plain prefills "
                                         "(prefill_text, prefill_tokens) are possible");
    }
    return *engine_;
}

rag_session::~rag_session() = default;

ask_result rag_session::ask(rag_runtime& rt, const std::string& question, const ask_params& p,
                            const token_callback& on_token) {
    sess_.clear_cancel();
    pending_ = false;
    if (blank(question)) throw error(status::invalid_arg, "ask: the question is empty");
    if (rt.llm().get() != model_.get()) {
        throw error(status::invalid_arg, "ask: the session was made for another model");
    }
    ask_result out;

    // Retrieve; chunks of whitespace cannot be prompt pieces (they have no tokens).
    const auto t_search = clock_type::now();
    search_result found = rt.search(question, p.search);
    out.search_ms = ms_between(t_search, clock_type::now());
    out.searched = found.mode;
    append_notice(&out.notice, found.notice);
    std::vector<search_hit> hits;
    for (search_hit& h : found.hits) {
        if (!blank(h.text)) hits.push_back(std::move(h));
    }
    if (hits.empty()) {
        throw error(status::invalid_arg,
                    "ask: no chunk of " + rt.data_dir() + " matches the question" +
                        (p.search.filter.empty() ? std::string(" (ingest documents first)")
                                                 : std::string(" within the filter (collection, "
                                                               "uri prefix, metadata)")));
    }
    sess_.throw_if_cancelled();

    // Assemble within the context, keeping room to answer: drop the lowest-ranked chunks first.
    const int64_t n_ctx = sess_.n_ctx();
    const int64_t gen_room = std::min<int64_t>(std::max(p.gen.max_tokens, 0), n_ctx / 4);
    std::vector<std::string> passages;
    for (const search_hit& h : hits) passages.push_back(h.text);
    blend_request req = build_blend_request(*model_, default_rag_prompt(passages, question));
    int64_t n_prompt = request_tokens(req);
    while (n_prompt + gen_room > n_ctx && passages.size() > 1) {
        passages.pop_back();
        hits.pop_back();
        ++out.chunks_dropped;
        req = build_blend_request(*model_, default_rag_prompt(passages, question));
        n_prompt = request_tokens(req);
    }
    if (n_prompt > n_ctx) {
        throw error(status::range,
                    fmt("ask: the question and the best chunk (%lld tokens) do not fit the "
                        "context of %lld tokens: ask a shorter question, make the session's "
                        "context larger or ingest with smaller chunks",
                        static_cast<long long>(n_prompt), static_cast<long long>(n_ctx)));
    }
    out.prompt_tokens = n_prompt;
    out.citations = std::move(hits);

    generation_params gp = p.gen;
    gp.top_logprobs = std::min(gp.top_logprobs, model_->hparams().n_vocab);
    const auto t_request = clock_type::now();
    const std::vector<float>& logits = engine().prefill(req, &out.blend);
    const std::vector<token_id> prompt = request_prompt(req);
    out.gen = sess_.generate_after_prefill(logits, prompt, gp, on_token, t_request);
    if (out.gen.stop_reason == generation_stop::cancelled) throw error(status::aborted, "ask: cancelled");
    append_notice(&out.notice, out.blend.fallback_reason);

    // Store what this request computed from scratch and record every chunk's key in the catalog,
    // so the next request finds it and removing its document deletes its KV.
    const auto t_store = clock_type::now();
    engine().write_back_misses();
    for (size_t i = 0; i < req.chunks.size(); ++i) {
        engine().precompute_chunk(req.preamble, req.chunks[i]);
        rt.docs().cat().set_kv_key(out.citations[i].chunk_id,
                                   engine().key_of(req.preamble, req.chunks[i]).hex());
    }
    out.store_ms = ms_between(t_store, clock_type::now());

    if (p.compare_full) {
        // The same prompt in full mode is the speed-up's baseline; only its first token is timed.
        // It samples with the same settings, seed and penalty window as the answer did.
        const blend_params saved = bp_;
        blend_params fp = saved;
        fp.mode = blend_mode::full;
        engine().set_params(fp);
        try {
            generation_params fgp = gp;
            fgp.max_tokens = 1;
            fgp.top_logprobs = 0;
            blend_stats fst;
            const auto t_full = clock_type::now();
            const std::vector<float>& fl = engine().prefill(req, &fst);
            out.full_ttft_ms =
                sess_.generate_after_prefill(fl, prompt, fgp, nullptr, t_full).stats.ttft_ms;
        } catch (...) {
            engine().set_params(saved);
            throw;
        }
        engine().set_params(saved);
    }
    return out;
}

blend_stats rag_session::prefill_chunks(const std::vector<std::string>& chunks,
                                        const std::string& question) {
    sess_.clear_cancel();
    pending_ = false;
    engine();  // a store is needed
    if (chunks.empty()) throw error(status::invalid_arg, "prefill_chunks: no chunks");
    if (blank(question)) throw error(status::invalid_arg, "prefill_chunks: the question is empty");
    for (size_t i = 0; i < chunks.size(); ++i) {
        if (blank(chunks[i])) {
            throw error(status::invalid_arg, fmt("prefill_chunks: chunk %zu has no text", i));
        }
    }
    return prefill_prompt(default_rag_prompt(chunks, question));
}

blend_stats rag_session::prefill_prompt(const rag_prompt_text& text) {
    sess_.clear_cancel();
    pending_ = false;
    if (text.chunks.empty()) throw error(status::invalid_arg, "prefill: no chunks");
    const blend_request req = build_blend_request(*model_, text);
    prompt_ = request_prompt(req);
    blend_stats st;
    const std::vector<float>& logits = engine().prefill(req, &st);
    pending_logits_ = logits;
    pending_prefill_ms_ = st.ttft_ms;
    engine().write_back_misses();
    pending_ = true;
    return st;
}

int64_t rag_session::precompute_prompt(const rag_prompt_text& text) {
    sess_.clear_cancel();
    const blend_request req = build_blend_request(*model_, text);
    int64_t computed = 0;
    for (const auto& c : req.chunks) {
        sess_.throw_if_cancelled();
        if (engine().precompute_chunk(req.preamble, c)) ++computed;
    }
    return computed;
}

double rag_session::prefill_tokens(const std::vector<token_id>& tokens) {
    sess_.clear_cancel();
    pending_ = false;
    if (tokens.empty()) throw error(status::invalid_arg, "prefill: the prompt has no tokens");
    const int32_t n_vocab = model_->hparams().n_vocab;
    for (token_id t : tokens) {
        if (t < 0 || t >= n_vocab) {
            throw error(status::invalid_arg, fmt("prefill: token %d out of [0, %d)", t, n_vocab));
        }
    }
    prompt_ = tokens;
    sess_.reset();
    const auto t0 = clock_type::now();
    pending_logits_ = sess_.prefill(tokens);
    pending_prefill_ms_ = ms_between(t0, clock_type::now());
    pending_ = true;
    return pending_prefill_ms_;
}

double rag_session::prefill_text(const std::string& text, bool chat, const std::string& system,
                                 bool parse_special) {
    const tokenizer& vocab = model_->vocab();
    if (!chat) return prefill_tokens(vocab.encode(text, true, parse_special));
    std::vector<chat_message> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", text});
    return prefill_tokens(vocab.encode(render_chat(rag_chat_format(*model_), msgs, true), true, true));
}

generation_result rag_session::generate(const generation_params& gp,
                                        const token_callback& on_token) {
    if (!pending_) {
        throw error(status::misuse, "generate: call prefill_chunks first (once per prefill)");
    }
    pending_ = false;
    sess_.clear_cancel();
    // TTFT counts the prefill, not the time the caller spent between the two calls.
    const auto t_request =
        clock_type::now() - std::chrono::duration_cast<clock_type::duration>(
                                std::chrono::duration<double, std::milli>(pending_prefill_ms_));
    generation_params p = gp;
    p.top_logprobs = std::min(p.top_logprobs, model_->hparams().n_vocab);
    generation_result r =
        sess_.generate_after_prefill(pending_logits_, prompt_, p, on_token, t_request);
    if (r.stop_reason == generation_stop::cancelled) throw error(status::aborted, "generate: cancelled");
    return r;
}

}  // namespace cacheblend
