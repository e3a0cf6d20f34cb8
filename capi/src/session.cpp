// C ABI: sessions (ask, prefill_chunks, generate, cancel) and answers.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/src/admission.h"
#include "capi/src/busy.h"
#include "capi/src/convert.h"
#include "capi/src/guard.h"
#include "capi/src/handles.h"
#include "capi/src/params.h"
#include "core/engine/backend.h"
#include "core/util/error.h"

using cacheblend::capi::busy_error;
using cacheblend::capi::busy_scope;
using cacheblend::capi::invalid;
using cacheblend::capi::read_params;
using cacheblend::capi::write_out;

namespace {

cbl_status make_session(const char* fn, std::shared_ptr<const cacheblend::model> m,
                        std::shared_ptr<cacheblend::kv_store> kv, int32_t runtime_threads,
                        const std::string& device, std::shared_ptr<cacheblend::rag_runtime> rt,
                        const cbl_session_params* params, cbl_session** out) {
    cbl_session_params p;
    if (cbl_status s = read_params(fn, params, &p, cbl_session_params_init)) return s;
    cacheblend::session_params sp;
    cacheblend::blend_params bp;
    cacheblend::capi::to_core(fn, p, *m, runtime_threads, &sp, &bp);
    sp.device = device;
    if (p.device && *p.device) {
        sp.device = cacheblend::capi::check_device(fn, p.device);  // before anything loads
    }
    // A runtime's sessions on its CPU threads share them (one pool per runtime: concurrent
    // requests take turns, never oversubscribing the cores); on its device they share the
    // weights it uploaded once. A session that asks for another thread count on the CPU, or
    // another device, gets a backend of its own.
    if (rt && sp.device == device && (sp.device != "cpu" || sp.n_threads == runtime_threads)) {
        sp.shared_compute = rt->shared_compute();
        sp.weights = rt->shared_weights();
    }
    // Every session of a runtime, on its pool or not, counts against the runtime's memory.
    if (rt) sp.memory = rt->session_memory();
    auto h = std::make_unique<cbl_session>();
    h->rt = std::move(rt);
    h->s = std::make_unique<cacheblend::rag_session>(std::move(m), std::move(kv), sp, bp);
    *out = h.release();
    return CBL_OK;
}

// Stats of a plain prefill: everything computed, nothing reused.
cbl_status prefill_done(const char* fn, cbl_session* session, double ms, cbl_stats* out) {
    session->notice.clear();
    cacheblend::blend_stats& b = session->last;
    b = cacheblend::blend_stats{};
    b.mode = cacheblend::blend_mode::full;
    b.ratio = 1.f;
    b.ttft_ms = ms;
    b.compute_ms = ms;
    b.tokens_total = static_cast<int64_t>(session->s->prompt_tokens().size());
    b.tokens_recomputed = b.tokens_total;
    if (!out) return CBL_OK;
    cbl_stats st = cacheblend::capi::to_stats(b, nullptr, session->notice);
    st.n_ctx = session->s->n_ctx();
    st.queue_ms = session->queue_ms;
    return write_out(fn, st, out);
}

std::unique_ptr<cbl_answer> make_answer(const cacheblend::generation_result& g,
                                        const cacheblend::blend_stats& b, std::string notice) {
    auto a = std::make_unique<cbl_answer>();
    a->text = g.text;
    a->tokens.assign(g.tokens.begin(), g.tokens.end());
    a->top_logprobs.assign(g.top_logprobs.begin(), g.top_logprobs.end());
    a->notice = std::move(notice);
    a->stats = cacheblend::capi::to_stats(b, &g, a->notice);
    return a;
}

}  // namespace

extern "C" {

cbl_status cbl_session_create(cbl_runtime* runtime, const cbl_session_params* params,
                              cbl_session** out_session) {
    if (out_session) *out_session = nullptr;
    return CBL_API_GUARD({
        if (!runtime || !out_session) {
            return invalid(cbl_fn, "runtime and out_session are required");
        }
        const auto& rt = runtime->rt;
        return make_session(cbl_fn, rt->llm(), rt->blend_kv(), rt->n_threads(), rt->device(), rt,
                            params, out_session);
    });
}

cbl_status cbl_session_create_with(cbl_model* model, cbl_kvstore* store,
                                   const cbl_session_params* params, cbl_session** out_session) {
    if (out_session) *out_session = nullptr;
    return CBL_API_GUARD({
        if (!model || !out_session) return invalid(cbl_fn, "model and out_session are required");
        if (model->m->vocab_only()) return invalid(cbl_fn, "the model was loaded vocabulary-only");
        return make_session(cbl_fn, model->m, store ? store->kv : nullptr, 0, "cpu", nullptr,
                            params, out_session);
    });
}

void cbl_session_free(cbl_session* session) {
    if (!session) return;
    // The running call, if any, stops soon; cancel first: once k_freed is set that call may
    // delete the session at any moment.
    session->s->cancel();
    if (session->state.fetch_or(cbl_session::k_freed) & cbl_session::k_busy) return;
    delete session;
}

void cbl_session_cancel(cbl_session* session) {
    if (session) session->s->cancel();
}

cbl_status cbl_session_ask(cbl_session* session, const char* question,
                           const cbl_ask_params* params, cbl_answer** out_answer) {
    if (out_answer) *out_answer = nullptr;
    return CBL_API_GUARD({
        if (!session || !question || !out_answer) {
            return invalid(cbl_fn, "session, question and out_answer are required");
        }
        if (!session->rt) {
            return invalid(cbl_fn, "the session has no runtime (made by cbl_session_create_with): "
                                     "use cbl_session_prefill_chunks");
        }
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        cbl_ask_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_ask_params_init)) return s;
        if (p.k < 0 || p.k > 1000) return invalid(cbl_fn, "k out of [0, 1000]");
        cacheblend::ask_params ap;
        if (p.k > 0) ap.search.k = p.k;
        ap.search.mode = cacheblend::capi::to_search_mode(cbl_fn, p.search_mode);
        ap.search.filter = cacheblend::capi::to_filter(
            cbl_fn, p.collection, p.uri_prefix, p.metadata_keys, p.metadata_values, p.n_metadata);
        // ap.gen holds ask's defaults (greedy with a repeat penalty): 0 fields keep them.
        cacheblend::capi::apply_generation(cbl_fn, cacheblend::capi::generation_of(p), &ap.gen);
        ap.compare_full = p.compare_full;
        if (p.top_logprobs < 0) return invalid(cbl_fn, "top_logprobs must be >= 0");
        ap.gen.top_logprobs = p.top_logprobs;
        cacheblend::ask_result r =
            session->rt->ask(*session->s, question, ap,
                             cacheblend::capi::to_token_callback(p.on_token, p.user_data));
        auto a = make_answer(r.gen, r.blend, std::move(r.notice));
        a->citations = std::move(r.citations);
        a->stats.search_ms = r.search_ms;
        a->stats.queue_ms = session->queue_ms;
        a->stats.store_ms = r.store_ms;
        a->stats.search_mode = cacheblend::capi::search_code(r.searched);
        a->stats.n_ctx = session->s->n_ctx();
        a->stats.full_ttft_ms = r.full_ttft_ms;
        a->stats.chunks_used = static_cast<int32_t>(a->citations.size());
        a->stats.chunks_dropped = r.chunks_dropped;
        *out_answer = a.release();
        return CBL_OK;
    });
}

cbl_status cbl_session_prefill_chunks(cbl_session* session, const char* const* chunks,
                                      const size_t* lens, size_t n_chunks, const char* question,
                                      cbl_stats* out_stats) {
    return CBL_API_GUARD({
        if (!session || !question || (!chunks && n_chunks > 0)) {
            return invalid(cbl_fn, "session, chunks and question are required");
        }
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        std::vector<std::string> texts;
        texts.reserve(n_chunks);
        for (size_t i = 0; i < n_chunks; ++i) {
            if (!chunks[i]) return invalid(cbl_fn, cacheblend::fmt("chunk %zu is NULL", i));
            texts.emplace_back(chunks[i], lens ? lens[i] : std::strlen(chunks[i]));
        }
        const cacheblend::blend_stats st = session->s->prefill_chunks(texts, question);
        session->notice = st.fallback_reason;
        session->last = st;
        if (!out_stats) return CBL_OK;
        cbl_stats out = cacheblend::capi::to_stats(st, nullptr, session->notice);
        out.queue_ms = session->queue_ms;
        return write_out(cbl_fn, out, out_stats);
    });
}

cbl_status cbl_session_prefill_text(cbl_session* session, const char* text, size_t len,
                                    const cbl_prompt_params* params, cbl_stats* out_stats) {
    return CBL_API_GUARD({
        if (!session || (!text && len > 0)) return invalid(cbl_fn, "session and text are required");
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        cbl_prompt_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_prompt_params_init)) return s;
        if (p.system && !p.chat) return invalid(cbl_fn, "system applies to chat prompts only");
        const double ms = session->s->prefill_text(std::string(text ? text : "", len), p.chat,
                                                   p.system ? p.system : "", p.parse_special);
        return prefill_done(cbl_fn, session, ms, out_stats);
    });
}

cbl_status cbl_session_prefill_tokens(cbl_session* session, const int32_t* tokens, size_t n,
                                      cbl_stats* out_stats) {
    return CBL_API_GUARD({
        if (!session || (!tokens && n > 0)) {
            return invalid(cbl_fn, "session and tokens are required");
        }
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        const double ms = session->s->prefill_tokens(std::vector<cacheblend::token_id>(tokens, tokens + n));
        return prefill_done(cbl_fn, session, ms, out_stats);
    });
}

const int32_t* cbl_session_prompt_tokens(const cbl_session* session, size_t* out_n) {
    const std::vector<cacheblend::token_id>* p = session ? &session->s->prompt_tokens() : nullptr;
    if (out_n) *out_n = p ? p->size() : 0;
    return p && !p->empty() ? p->data() : nullptr;
}

cbl_status cbl_session_generate(cbl_session* session, const cbl_generate_params* params,
                                cbl_answer** out_answer) {
    if (out_answer) *out_answer = nullptr;
    return CBL_API_GUARD({
        if (!session || !out_answer) return invalid(cbl_fn, "session and out_answer are required");
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        cbl_generate_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_generate_params_init)) return s;
        cacheblend::generation_params gp;
        cacheblend::capi::apply_generation(cbl_fn, cacheblend::capi::generation_of(p), &gp);
        if (p.top_logprobs < 0) return invalid(cbl_fn, "top_logprobs must be >= 0");
        gp.top_logprobs = p.top_logprobs;
        gp.ignore_eog = p.ignore_eog;
        const cacheblend::generation_result g =
            session->s->generate(gp, cacheblend::capi::to_token_callback(p.on_token, p.user_data));
        auto a = make_answer(g, session->last, session->notice);
        a->stats.prompt_tokens = g.stats.prompt_tokens;
        a->stats.queue_ms = session->queue_ms;
        a->stats.n_ctx = session->s->n_ctx();
        *out_answer = a.release();
        return CBL_OK;
    });
}

const char* cbl_answer_text(const cbl_answer* answer) { return answer ? answer->text.c_str() : ""; }

size_t cbl_answer_n_citations(const cbl_answer* answer) {
    return answer ? answer->citations.size() : 0;
}

cbl_status cbl_answer_citation(const cbl_answer* answer, size_t i, cbl_hit* out_hit) {
    return CBL_API_GUARD({
        if (!answer || !out_hit) return invalid(cbl_fn, "answer and out_hit are required");
        if (i >= answer->citations.size()) {
            return cacheblend::capi::set_error(
                CBL_RANGE, cacheblend::fmt("cbl_answer_citation: index %zu of %zu citations", i,
                                           answer->citations.size()));
        }
        return write_out(cbl_fn, cacheblend::capi::to_hit(answer->citations[i]), out_hit);
    });
}

cbl_status cbl_answer_stats(const cbl_answer* answer, cbl_stats* out_stats) {
    return CBL_API_GUARD({
        if (!answer || !out_stats) return invalid(cbl_fn, "answer and out_stats are required");
        return write_out(cbl_fn, answer->stats, out_stats);
    });
}

const int32_t* cbl_answer_tokens(const cbl_answer* answer, size_t* out_n) {
    if (out_n) *out_n = answer ? answer->tokens.size() : 0;
    return answer && !answer->tokens.empty() ? answer->tokens.data() : nullptr;
}

size_t cbl_answer_n_top_logprobs(const cbl_answer* answer) {
    return answer ? answer->top_logprobs.size() : 0;
}

cbl_status cbl_answer_top_logprob(const cbl_answer* answer, size_t i, int32_t* out_token,
                                  float* out_logprob) {
    return CBL_API_GUARD({
        if (!answer || !out_token || !out_logprob) {
            return invalid(cbl_fn, "answer, out_token and out_logprob are required");
        }
        if (i >= answer->top_logprobs.size()) {
            return cacheblend::capi::set_error(
                CBL_RANGE, cacheblend::fmt("cbl_answer_top_logprob: index %zu of %zu", i,
                                           answer->top_logprobs.size()));
        }
        *out_token = answer->top_logprobs[i].first;
        *out_logprob = answer->top_logprobs[i].second;
        return CBL_OK;
    });
}

void cbl_answer_free(cbl_answer* answer) { delete answer; }

namespace {

// The devices of the built backends on this machine, listed once: they do not change while the
// process runs, and the names must stay valid (static strings for the caller).
const std::vector<std::string>& devices() noexcept {
    static const std::vector<std::string> list = [] {
        try {
            return cacheblend::backend_devices();
        } catch (...) {
            return std::vector<std::string>{"cpu"};  // listing failed: the CPU is always there
        }
    }();
    return list;
}

}  // namespace

int32_t cbl_device_count(void) { return static_cast<int32_t>(devices().size()); }

const char* cbl_device_name(int32_t i) {
    if (i < 0 || static_cast<size_t>(i) >= devices().size()) return nullptr;
    return devices()[static_cast<size_t>(i)].c_str();
}

}  // extern "C"
