// hkvd: CacheBlend's selection, the rows whose KV deviates most at the check layer (ties: the
// earlier row). The reference every other policy is measured against.
#include "core/blend/select-policies.h"
#include "core/blend/select-rank.h"

namespace cacheblend {
namespace {

class hkvd_selector final : public token_selector {
public:
    bool needs_deviation() const override { return true; }
    bool needs_query() const override { return false; }
    std::vector<int64_t> choose(const selection_input& in) const override {
        std::vector<uint8_t> taken(in.deviation.size(), 0);
        std::vector<int64_t> out;
        take_top_scored(in.deviation, in.budget, &taken, &out);
        return out;
    }
};

}  // namespace

std::unique_ptr<token_selector> make_hkvd_selector() { return std::make_unique<hkvd_selector>(); }

}  // namespace cacheblend
