// One request at a time over a model and a chunk KV store: the session's blended prefill, its
// generation and the write-back of what it computed (docs/ARCHITECTURE.md, 'Ask path'). It knows
// nothing of retrieval: rag_runtime::ask assembles the prompt and hands it to answer().
//
// Thread safety: one call at a time; cancel() may come from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/blend/blend.h"
#include "core/engine/session.h"
#include "core/kvstore/kv-store.h"
#include "core/model/model.h"
#include "core/prompt/rag-prompt.h"

namespace cacheblend {

// What rag_session::answer returns besides the generated text.
struct blended_answer {
    generation_result gen;
    blend_stats blend;
    std::vector<std::string> chunk_keys;  // the store key of each request chunk, in order
    double store_ms = 0;                  // writing back the misses
    double full_ttft_ms = 0;              // with compare_full
};

class rag_session {
public:
    // kv may be null: such a session serves plain prefills (prefill_text / prefill_tokens) only.
    rag_session(std::shared_ptr<const model> m, std::shared_ptr<kv_store> kv,
                const session_params& sp, const blend_params& bp);
    ~rag_session();

    const model& get_model() const { return *model_; }
    int32_t n_ctx() const { return sess_.n_ctx(); }
    const blend_params& params() const { return bp_; }
    void set_params(const blend_params& bp);

    // Begins a request: clears an earlier cancel and any prefill still waiting for generate().
    void begin_request();
    void throw_if_cancelled() const { sess_.throw_if_cancelled(); }
    // A request's prompt, already assembled: blended prefill, generation, then the misses written
    // back (outside the TTFT path) and every chunk's store key returned for the catalog. With
    // compare_full, the same prompt again in full mode, timed to its first token, for the
    // speed-up's baseline. Throws error(status::aborted) when cancelled.
    blended_answer answer(const blend_request& req, const generation_params& gp,
                          const token_callback& on_token, bool compare_full);

    // [P][chunks][Q] in the default RAG format; the logits wait for generate(). Misses are written
    // back before returning (outside the timed prefill).
    blend_stats prefill_chunks(const std::vector<std::string>& chunks, const std::string& question);
    // The same for any prompt layout (rag-prompt.h): the experimental C API's prefill.
    blend_stats prefill_prompt(const rag_prompt_text& text);
    // Stores the KV of each of the prompt's chunks that the store lacks; returns how many.
    int64_t precompute_prompt(const rag_prompt_text& text);
    // Stores the KV of one chunk after the preamble unless the store has it; returns its store
    // key either way. Throws status::range when they exceed the session's context.
    chunk_key precompute_chunk(const std::vector<token_id>& preamble,
                               const std::vector<token_id>& chunk);
    // Plain prefill of a whole prompt (no chunk reuse): the logits wait for generate().
    // Returns the prefill time in ms.
    double prefill_tokens(const std::vector<token_id>& tokens);
    // The text tokenized like llama.cpp (BOS/EOS as the GGUF says, special text parsed only when
    // asked), or rendered as one user message (after `system`, when given) in the model's chat
    // template; then prefill_tokens.
    double prefill_text(const std::string& text, bool chat, const std::string& system,
                        bool parse_special);
    // The prompt of the last prefill (any kind).
    const std::vector<token_id>& prompt_tokens() const { return prompt_; }
    // Next-token logits of the last prefill (kept after generate()); empty before any.
    const std::vector<float>& last_logits() const { return pending_logits_; }

    // Once per prefill_* (status::misuse otherwise).
    generation_result generate(const generation_params& gp, const token_callback& on_token);

    void cancel() { sess_.cancel(); }
    bool cancelled() const { return sess_.cancelled(); }
    void clear_cancel() { sess_.clear_cancel(); }

private:
    blend_engine& engine();  // throws status::invalid_arg without a store
    double full_ttft(const blend_request& req, const std::vector<token_id>& prompt,
                     const generation_params& gp);

    std::shared_ptr<const model> model_;
    std::shared_ptr<kv_store> kv_;
    session sess_;
    blend_params bp_;
    std::unique_ptr<blend_engine> engine_;  // null without a KV store (plain prefill only)
    std::vector<token_id> prompt_;
    std::vector<float> pending_logits_;  // of the last prefill_*, until generate()
    bool pending_ = false;
    double pending_prefill_ms_ = 0;
};

}  // namespace cacheblend
