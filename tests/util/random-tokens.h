// Token ids drawn from a model's vocabulary with a fixed seed, for benchmarks and tests that need
// a prompt of a given length but not a text (the GPU model test, cbl-engine-bench).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model.h"

namespace cbltest {

// n ids uniform over the first min(n_vocab, 8192) tokens (ordinary pieces in every vocabulary we
// load), end-of-generation tokens skipped so that no prompt ends a sequence early.
std::vector<cacheblend::token_id> random_tokens(const cacheblend::model& m, int n, uint32_t seed);

}  // namespace cbltest
