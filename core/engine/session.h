// One request's state: a backend, a working KV cache and the forward engine over a shared model.
// A session serves one call at a time; models are shared between sessions.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/backend.h"
#include "core/engine/forward.h"
#include "core/engine/kv-cache.h"
#include "core/engine/memory-budget.h"
#include "core/engine/model-weights.h"
#include "core/engine/sampler.h"
#include "core/model/model.h"

namespace cacheblend {

struct session_params {
    int32_t n_ctx = 0;      // 0: min(model's training context, 8192)
    int32_t n_threads = 0;  // 0: default_thread_count()
    int32_t n_batch = 512;  // prefill micro-batch rows
    std::string device;     // the backend's device from the registry: "cpu" (empty), "cuda:0"
    // When set (and it can share), the session runs on a sibling of this backend, on its
    // threads, instead of opening a backend of its own: a runtime's sessions take turns on one
    // thread pool (device and n_threads are then the shared backend's).
    std::shared_ptr<backend> shared_compute;
    // With shared_compute: the model's weights uploaded once on it, read by this session on its
    // sibling (a device runtime's sessions share one copy in GPU memory). Null, or when the
    // backend cannot share: the session uploads its own (the CPU uploads nothing: its weights
    // are the model's mapping).
    std::shared_ptr<const backend_weights> weights;
    // When set, the session's working KV cache and its forward engine's scratch are reserved
    // against this budget before they are allocated (a runtime's sessions share one); a session
    // that would exceed it fails with status::nomem, at creation or when its engine grows.
    std::shared_ptr<memory_budget> memory;
};

struct generation_params {
    int32_t max_tokens = 128;
    sampler_params sampling;
    int32_t top_logprobs = 0;  // k alternatives recorded for the first generated position
    bool ignore_eog = false;   // keep going past end-of-generation tokens (benchmarks)
};

struct generation_stats {
    int32_t prompt_tokens = 0;
    int32_t generated_tokens = 0;
    double prefill_ms = 0;
    double decode_ms = 0;  // all tokens after the first
    double ttft_ms = 0;    // prefill + first sampling
    double prefill_tokens_per_s = 0;
    double decode_tokens_per_s = 0;
};

// Why generation stopped: none ran, an end-of-generation token, max_tokens, a full context, the
// token callback returned false, or cancel(). The C API maps it to CBL_STOP_* (capi/src/convert.cpp).
enum class generation_stop { none, eog, length, context, callback, cancelled };
// "none", "eog", "length", "context", "callback", "cancelled".
const char* generation_stop_name(generation_stop r);

struct generation_result {
    std::vector<token_id> tokens;  // generated ids (no prompt, no stop token)
    std::string text;
    std::vector<std::pair<token_id, float>> top_logprobs;
    generation_stop stop_reason = generation_stop::none;
    generation_stats stats;
};

// Returns false to stop generation.
using token_callback = std::function<bool(token_id id, const std::string& piece)>;

int32_t default_thread_count();

class session {
public:
    session(std::shared_ptr<const model> m, const session_params& p = {});
    ~session();

    void reset();  // forget the context
    int32_t n_past() const { return cache_->n_filled; }
    int32_t n_ctx() const { return cache_->n_ctx(); }
    const model& get_model() const { return *model_; }
    backend& get_backend() { return *backend_; }
    // The model's weights on this session's backend (forward engines of the session share them).
    const model_weights& weights() const { return weights_->get(); }
    kv_cache& cache() { return *cache_; }
    // The session's one forward engine, with scratch for at least min_rows rows. It grows (never
    // shrinks) when asked for more: a blended prefill runs every prompt row of a layer at once and
    // a chunk precompute runs [preamble][chunk] as one batch, so the engine ends up sized to the
    // largest such prompt while decode and micro-batched prefill use the first rows of it.
    forward_engine& engine(int64_t min_rows);
    const session_params& params() const { return params_; }

    // Appends tokens at positions n_past.. and returns the logits of the last one.
    const std::vector<float>& prefill(const std::vector<token_id>& tokens);
    // Appends one token and returns its logits.
    const std::vector<float>& decode(token_id t);

    // Prefills the prompt (after reset) and samples until EOG, max_tokens or a full context.
    generation_result generate(const std::vector<token_id>& prompt, const generation_params& p,
                               const token_callback& on_token = nullptr);

    // Samples from `logits` (the last prompt token's, after any prefill that left the context
    // filled, e.g. a blended one) and decodes on. `context` is the prompt in the cache (the
    // repetition penalties' window starts in it, as llama.cpp's does). t_request marks the
    // request start for TTFT.
    generation_result generate_after_prefill(const std::vector<float>& logits,
                                             const std::vector<token_id>& context,
                                             const generation_params& p,
                                             const token_callback& on_token,
                                             std::chrono::steady_clock::time_point t_request);

    // Cancellation (from any thread): prefill and blended prefill throw error(status::aborted)
    // between layers or micro-batches, generation stops with generation_stop::cancelled. The flag
    // holds until clear_cancel(), which a request calls when it starts.
    void cancel() { cancel_.store(true); }
    void clear_cancel() { cancel_.store(false); }
    bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
    void throw_if_cancelled() const;

    // Bytes of a working KV cache of n_ctx rows (K and V, f16, every layer).
    static uint64_t cache_bytes(const model_hparams& hp, int32_t n_ctx);

private:
    // Sets the reservation to the cache plus an engine of engine_bytes; throws status::nomem.
    void reserve_memory(uint64_t engine_bytes, const char* what);

    std::shared_ptr<const model> model_;
    session_params params_;
    // The cache's and the engine's bytes on params_.memory (declared first: released last).
    memory_budget::reservation memory_;
    std::unique_ptr<backend> backend_;
    std::shared_ptr<const backend_weights> weights_;
    std::unique_ptr<kv_cache> cache_;
    std::unique_ptr<forward_engine> fwd_;
    std::vector<float> logits_;
    std::vector<int32_t> pos_;
    std::atomic<bool> cancel_{false};
};

}  // namespace cacheblend
