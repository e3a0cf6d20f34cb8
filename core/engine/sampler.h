// Token sampling: repetition penalties over a window of recent tokens, then greedy, or
// temperature with top-k, top-p and min-p filtering from a seeded RNG.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace cacheblend {

struct sampler_params {
    float temperature = 0.f;  // <= 0: greedy (argmax; ties go to the lowest id)
    int32_t top_k = 40;       // <= 0: off
    float top_p = 0.95f;      // >= 1: off
    float min_p = 0.05f;      // <= 0: off
    uint64_t seed = 0;
    // Penalties (llama.cpp's penalties sampler) over the last repeat_last_n tokens of the context,
    // prompt included. A token seen c times there has its logit divided by repeat_penalty when
    // positive, multiplied when not, then lowered by c * frequency_penalty + presence_penalty.
    // They apply before greedy selection too.
    float repeat_penalty = 1.f;     // 1: off
    int32_t repeat_last_n = 64;     // 0: off; -1: the whole context
    float frequency_penalty = 0.f;  // 0: off
    float presence_penalty = 0.f;   // 0: off

    bool penalties_on() const {
        return repeat_last_n != 0 &&
               (repeat_penalty != 1.f || frequency_penalty != 0.f || presence_penalty != 0.f);
    }
};

// Returns true for tokens that are never penalized.
using token_filter = std::function<bool(token_id)>;

class sampler {
public:
    // exempt (may be empty): tokens the penalties skip. The session passes end-of-generation
    // tokens: the chat template puts one in the window before every answer, and penalizing it
    // would push the model to keep talking, the opposite of what the penalty is for.
    explicit sampler(const sampler_params& p, token_filter exempt = nullptr);

    // Adds a token to the penalty window: first the prompt's tokens, then each one generated.
    void accept(token_id t);
    // The penalties over the current window, in place (a no-op when they are off).
    void penalize(float* logits, int32_t n_vocab) const;
    // Penalizes a copy of the logits and picks the next token (it does not accept it).
    token_id sample(const float* logits, int32_t n_vocab);

private:
    sampler_params p_;
    token_filter exempt_;
    std::mt19937_64 rng_;
    std::deque<token_id> window_;                  // the last repeat_last_n accepted tokens
    std::unordered_map<token_id, int32_t> count_;  // occurrences in window_
    std::vector<float> work_;
    std::vector<std::pair<float, token_id>> cand_;
};

token_id argmax(const float* logits, int32_t n);
// The k most likely tokens with their log-probabilities (log-softmax over all n), best first.
std::vector<std::pair<token_id, float>> top_logprobs(const float* logits, int32_t n, int32_t k);

}  // namespace cacheblend
