#include "util/random-tokens.h"

#include <algorithm>
#include <random>

namespace cbltest {

std::vector<cacheblend::token_id> random_tokens(const cacheblend::model& m, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> pick(0, std::min(m.hparams().n_vocab, 8192) - 1);
    std::vector<cacheblend::token_id> out;
    while (static_cast<int>(out.size()) < n) {
        const cacheblend::token_id t = pick(rng);
        if (!m.vocab().is_eog(t)) out.push_back(t);
    }
    return out;
}

}  // namespace cbltest
