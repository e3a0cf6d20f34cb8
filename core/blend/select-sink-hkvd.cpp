// sink+hkvd: every reused chunk keeps its first k_sink_hkvd_sinks rows (the sinks, as in sink),
// and the rest of the budget goes by deviation (as in hkvd). A budget smaller than the sinks is
// spread over the chunks as sink does.
#include "core/blend/select-policies.h"
#include "core/blend/select-rank.h"

namespace cacheblend {
namespace {

class sink_hkvd_selector final : public token_selector {
public:
    bool needs_deviation() const override { return true; }
    bool needs_query() const override { return false; }
    std::vector<int64_t> choose(const selection_input& in) const override {
        std::vector<uint8_t> taken(in.chunk.size(), 0);
        std::vector<int64_t> out;
        take_sinks(in, in.budget, k_sink_hkvd_sinks, &taken, &out);
        take_top_scored(in.deviation, in.budget - static_cast<int64_t>(out.size()), &taken, &out);
        return out;
    }
};

}  // namespace

std::unique_ptr<token_selector> make_sink_hkvd_selector() {
    return std::make_unique<sink_hkvd_selector>();
}

}  // namespace cacheblend
