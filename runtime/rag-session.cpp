#include "runtime/rag-session.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/prompt/chat-template.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

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
        throw error(status::invalid_arg,
                    "this session has no KV store: only plain prefills "
                    "(prefill_text, prefill_tokens) are possible");
    }
    return *engine_;
}

rag_session::~rag_session() = default;

void rag_session::begin_request() {
    sess_.clear_cancel();
    pending_ = false;
}

blended_answer rag_session::answer(const blend_request& req, const generation_params& gp_in,
                                   const token_callback& on_token, bool compare_full) {
    blended_answer out;
    generation_params gp = gp_in;
    gp.top_logprobs = std::min(gp.top_logprobs, model_->hparams().n_vocab);
    const auto t_request = clock_type::now();
    const std::vector<float>& logits = engine().prefill(req, &out.blend);
    const std::vector<token_id> prompt = request_prompt(req);
    out.gen = sess_.generate_after_prefill(logits, prompt, gp, on_token, t_request);
    if (out.gen.stop_reason == generation_stop::cancelled)
        throw error(status::aborted, "ask: cancelled");

    // Store what this request computed from scratch (outside the TTFT path) and return every
    // chunk's key, so the caller can record it and the next request finds the chunk.
    const auto t_store = clock_type::now();
    engine().write_back_misses();
    for (const auto& chunk : req.chunks) {
        engine().precompute_chunk(req.preamble, chunk);
        out.chunk_keys.push_back(engine().key_of(req.preamble, chunk).hex());
    }
    out.store_ms = ms_between(t_store, clock_type::now());
    if (compare_full) out.full_ttft_ms = full_ttft(req, prompt, gp);
    return out;
}

// The same prompt in full mode is the speed-up's baseline; only its first token is timed. It
// samples with the same settings, seed and penalty window as the answer did.
double rag_session::full_ttft(const blend_request& req, const std::vector<token_id>& prompt,
                              const generation_params& gp) {
    const blend_params saved = bp_;
    blend_params fp = saved;
    fp.mode = blend_mode::full;
    engine().set_params(fp);
    double ttft = 0;
    try {
        generation_params fgp = gp;
        fgp.max_tokens = 1;
        fgp.top_logprobs = 0;
        blend_stats fst;
        const auto t_full = clock_type::now();
        const std::vector<float>& fl = engine().prefill(req, &fst);
        ttft = sess_.generate_after_prefill(fl, prompt, fgp, nullptr, t_full).stats.ttft_ms;
    } catch (...) {
        engine().set_params(saved);
        throw;
    }
    engine().set_params(saved);
    return ttft;
}

blend_stats rag_session::prefill_chunks(const std::vector<std::string>& chunks,
                                        const std::string& question) {
    sess_.clear_cancel();
    pending_ = false;
    engine();  // a store is needed
    if (chunks.empty()) throw error(status::invalid_arg, "prefill_chunks: no chunks");
    if (is_blank(question))
        throw error(status::invalid_arg, "prefill_chunks: the question is empty");
    for (size_t i = 0; i < chunks.size(); ++i) {
        if (is_blank(chunks[i])) {
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

chunk_key rag_session::precompute_chunk(const std::vector<token_id>& preamble,
                                        const std::vector<token_id>& chunk) {
    engine().precompute_chunk(preamble, chunk);
    return engine().key_of(preamble, chunk);
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
    return prefill_tokens(
        vocab.encode(render_chat(rag_chat_format(*model_), msgs, true), true, true));
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
    if (r.stop_reason == generation_stop::cancelled)
        throw error(status::aborted, "generate: cancelled");
    return r;
}

}  // namespace cacheblend
