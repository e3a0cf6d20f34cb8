// Token sampling: greedy, or temperature with top-k, top-p and min-p filtering from a seeded RNG.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/tokenizer.h"

namespace cacheblend {

struct sampler_params {
    float temperature = 0.f;  // <= 0: greedy (argmax; ties go to the lowest id)
    int32_t top_k = 40;       // <= 0: off
    float top_p = 0.95f;      // >= 1: off
    float min_p = 0.05f;      // <= 0: off
    uint64_t seed = 0;
};

class sampler {
public:
    explicit sampler(const sampler_params& p);
    token_id sample(const float* logits, int32_t n_vocab);

private:
    sampler_params p_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, token_id>> cand_;
};

token_id argmax(const float* logits, int32_t n);
// The k most likely tokens with their log-probabilities (log-softmax over all n), best first.
std::vector<std::pair<token_id, float>> top_logprobs(const float* logits, int32_t n, int32_t k);

}  // namespace cacheblend
