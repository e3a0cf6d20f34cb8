// query+hkvd: the first half of the budget (rounded up) by the question's attention, the rest by
// deviation among the rows not yet chosen. A split, not a sum of the two scores: attention mass
// (a probability sum) and squared KV deviation have unrelated scales that change per layer and
// model, so any weighting would be a tuned constant; the split gives each signal a known share.
#include "core/blend/select-policies.h"
#include "core/blend/select-rank.h"

namespace cacheblend {
namespace {

class query_hkvd_selector final : public token_selector {
public:
    bool needs_deviation() const override { return true; }
    bool needs_query() const override { return true; }
    std::vector<int64_t> choose(const selection_input& in) const override {
        std::vector<uint8_t> taken(in.query.size(), 0);
        std::vector<int64_t> out;
        take_top_scored(in.query, (in.budget + 1) / 2, &taken, &out);
        take_top_scored(in.deviation, in.budget - static_cast<int64_t>(out.size()), &taken, &out);
        return out;
    }
};

}  // namespace

std::unique_ptr<token_selector> make_query_hkvd_selector() {
    return std::make_unique<query_hkvd_selector>();
}

}  // namespace cacheblend
