#include "core/engine/session.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/util/error.h"

namespace cacheblend {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* generation_stop_name(generation_stop r) {
    switch (r) {
        case generation_stop::none: return "none";
        case generation_stop::eog: return "eog";
        case generation_stop::length: return "length";
        case generation_stop::context: return "context";
        case generation_stop::callback: return "callback";
        case generation_stop::cancelled: return "cancelled";
    }
    return "unknown";
}

int32_t default_thread_count() {
    const unsigned hc = std::thread::hardware_concurrency();
    return static_cast<int32_t>(std::clamp(hc == 0 ? 4u : hc, 1u, 16u));
}

session::session(std::shared_ptr<const model> m, const session_params& p)
    : model_(std::move(m)), params_(p) {
    if (!model_ || model_->vocab_only()) {
        throw error(status::invalid_arg, "session: needs a model with weights");
    }
    const model_hparams& hp = model_->hparams();
    if (params_.n_ctx <= 0) params_.n_ctx = std::min(hp.n_ctx_train, 8192);
    if (params_.n_threads <= 0) params_.n_threads = default_thread_count();
    if (params_.n_batch <= 0) params_.n_batch = 512;
    params_.n_batch = std::min(params_.n_batch, params_.n_ctx);
    if (params_.shared_compute) backend_ = params_.shared_compute->sibling();
    if (backend_ && params_.weights) weights_ = params_.weights;  // on the sibling's device
    if (backend_) {
        params_.n_threads = backend_->n_threads();
        params_.device = backend_->name();
    } else {
        backend_ = open_backend(params_.device, params_.n_threads);
    }
    if (params_.memory) {
        memory_ = memory_budget::claim(params_.memory);
        reserve_memory(forward_engine::scratch_bytes(hp, params_.n_batch), "a new session");
    }
    if (!weights_) weights_ = std::make_shared<backend_weights>(*model_, *backend_);
    cache_ = std::make_unique<kv_cache>(*backend_, hp, params_.n_ctx);
    fwd_ = std::make_unique<forward_engine>(*model_, *backend_, weights_->get(), params_.n_batch);
    logits_.resize(static_cast<size_t>(hp.n_vocab));
}

session::~session() = default;

void session::reset() { cache_->n_filled = 0; }

forward_engine& session::engine(int64_t min_rows) {
    if (min_rows > fwd_->max_rows()) {
        if (min_rows > params_.n_ctx) {
            throw error(status::range, fmt("session: %lld rows exceed the context of %d",
                                           (long long)min_rows, params_.n_ctx));
        }
        reserve_memory(forward_engine::scratch_bytes(model_->hparams(), min_rows),
                       fmt("a prefill of %lld rows", (long long)min_rows).c_str());
        fwd_.reset();  // free the old scratch before the larger one is allocated
        fwd_ = std::make_unique<forward_engine>(*model_, *backend_, weights_->get(),
                                                static_cast<int32_t>(min_rows));
    }
    return *fwd_;
}

uint64_t session::cache_bytes(const model_hparams& hp, int32_t n_ctx) {
    return 2 * static_cast<uint64_t>(hp.n_layer) * static_cast<uint64_t>(n_ctx) *
           static_cast<uint64_t>(hp.kv_dim()) * sizeof(uint16_t);
}

void session::reserve_memory(uint64_t engine_bytes, const char* what) {
    if (!params_.memory) return;
    const uint64_t cache = cache_bytes(model_->hparams(), params_.n_ctx);
    memory_.resize(cache + engine_bytes,
                   fmt("%s (KV cache of %d tokens and scratch)", what, params_.n_ctx).c_str());
}

void session::throw_if_cancelled() const {
    if (cancelled()) throw error(status::aborted, "session: cancelled");
}

const std::vector<float>& session::prefill(const std::vector<token_id>& tokens) {
    if (tokens.empty()) throw error(status::invalid_arg, "session: empty prompt");
    const int64_t start = cache_->n_filled;
    if (start + static_cast<int64_t>(tokens.size()) > cache_->n_ctx()) {
        throw error(status::range, fmt("session: %zu tokens after %lld do not fit the context of %d",
                                       tokens.size(), (long long)start, cache_->n_ctx()));
    }
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int64_t b = 0; b < n; b += params_.n_batch) {
        throw_if_cancelled();
        const int64_t nb = std::min<int64_t>(params_.n_batch, n - b);
        pos_.resize(static_cast<size_t>(nb));
        for (int64_t i = 0; i < nb; ++i) pos_[static_cast<size_t>(i)] = static_cast<int32_t>(start + b + i);
        const bool last = b + nb == n;
        engine(nb).run(*cache_, tokens.data() + b, pos_.data(), nb, start + b + nb,
                       last ? logits_.data() : nullptr);
        cache_->n_filled = static_cast<int32_t>(start + b + nb);
    }
    return logits_;
}

const std::vector<float>& session::decode(token_id t) {
    if (cache_->n_filled >= cache_->n_ctx()) {
        throw error(status::range, fmt("session: context of %d tokens is full", cache_->n_ctx()));
    }
    const int32_t p = cache_->n_filled;
    engine(1).run(*cache_, &t, &p, 1, p + 1, logits_.data());
    cache_->n_filled = p + 1;
    return logits_;
}

generation_result session::generate(const std::vector<token_id>& prompt,
                                    const generation_params& gp, const token_callback& on_token) {
    reset();
    clear_cancel();
    const auto t0 = std::chrono::steady_clock::now();
    prefill(prompt);
    return generate_after_prefill(logits_, prompt, gp, on_token, t0);
}

generation_result session::generate_after_prefill(const std::vector<float>& logits,
                                                  const std::vector<token_id>& context,
                                                  const generation_params& gp,
                                                  const token_callback& on_token,
                                                  std::chrono::steady_clock::time_point t0) {
    generation_result res;
    const tokenizer& vocab = model_->vocab();
    const int32_t n_vocab = model_->hparams().n_vocab;
    if (static_cast<int32_t>(logits.size()) != n_vocab) {
        throw error(status::invalid_arg, "session: logits do not match the vocabulary");
    }
    res.stats.prompt_tokens = cache_->n_filled;
    res.stats.prefill_ms = ms_since(t0);

    sampler smp(gp.sampling, [&vocab](token_id t) { return vocab.is_eog(t); });
    // A prompt longer than the window only contributes its tail.
    const int32_t last_n = gp.sampling.repeat_last_n;
    const size_t window = last_n > 0 ? static_cast<size_t>(last_n) : context.size();
    const size_t skip = context.size() > window ? context.size() - window : 0;
    for (size_t i = skip; i < context.size(); ++i) smp.accept(context[i]);
    if (gp.top_logprobs > 0) res.top_logprobs = top_logprobs(logits.data(), n_vocab, gp.top_logprobs);
    token_id tok = smp.sample(logits.data(), n_vocab);
    res.stats.ttft_ms = ms_since(t0);

    const auto t1 = std::chrono::steady_clock::now();
    res.stop_reason = generation_stop::length;
    int32_t n_dec = 0;
    for (int32_t i = 0; i < gp.max_tokens; ++i) {
        if (!gp.ignore_eog && vocab.is_eog(tok)) { res.stop_reason = generation_stop::eog; break; }
        res.tokens.push_back(tok);
        const std::string piece = vocab.token_to_piece(tok);
        res.text += piece;
        if (on_token && !on_token(tok, piece)) { res.stop_reason = generation_stop::callback; break; }
        if (cancel_.load()) { res.stop_reason = generation_stop::cancelled; break; }
        if (i + 1 == gp.max_tokens) break;
        if (cache_->n_filled >= cache_->n_ctx()) { res.stop_reason = generation_stop::context; break; }
        decode(tok);
        smp.accept(tok);
        ++n_dec;
        tok = smp.sample(logits_.data(), n_vocab);
    }
    res.stats.decode_ms = ms_since(t1);
    res.stats.generated_tokens = static_cast<int32_t>(res.tokens.size());
    if (res.stats.prefill_ms > 0) {
        res.stats.prefill_tokens_per_s = 1000.0 * res.stats.prompt_tokens / res.stats.prefill_ms;
    }
    // Decode speed counts the single-token forward passes (sampling included).
    if (n_dec > 0 && res.stats.decode_ms > 0) {
        res.stats.decode_tokens_per_s = 1000.0 * n_dec / res.stats.decode_ms;
    }
    return res;
}

}  // namespace cacheblend
