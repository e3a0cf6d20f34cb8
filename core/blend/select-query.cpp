// query: the rows the question attends to most (ProphetKV-style relevance). At the check layer the
// question's rows, always computed, attend over the whole prompt; the attention each reused row
// receives, summed over heads and question rows (core/blend/query-scores.h), ranks the candidates
// (ties: the earlier row). No deviation is computed.
#include "core/blend/select-policies.h"
#include "core/blend/select-rank.h"

namespace cacheblend {
namespace {

class query_selector final : public token_selector {
public:
    bool needs_deviation() const override { return false; }
    bool needs_query() const override { return true; }
    std::vector<int64_t> choose(const selection_input& in) const override {
        std::vector<uint8_t> taken(in.query.size(), 0);
        std::vector<int64_t> out;
        take_top_scored(in.query, in.budget, &taken, &out);
        return out;
    }
};

}  // namespace

std::unique_ptr<token_selector> make_query_selector() { return std::make_unique<query_selector>(); }

}  // namespace cacheblend
