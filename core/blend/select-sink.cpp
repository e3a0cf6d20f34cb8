// sink: the first tokens of every reused chunk (EPIC/LegoLink). Each chunk was encoded alone after
// the preamble, so its first tokens soak up attention as sinks that the blended prompt does not
// need there; recomputing them in context is where the error concentrates. The budget spreads
// evenly: k = budget / chunks rows per chunk, the remainder one more row to each earlier chunk, and
// a chunk shorter than its share leaves the rest to the others. No deviation is computed.
#include "core/blend/select-policies.h"
#include "core/blend/select-rank.h"

namespace cacheblend {
namespace {

class sink_selector final : public token_selector {
public:
    bool needs_deviation() const override { return false; }
    bool needs_query() const override { return false; }
    std::vector<int64_t> choose(const selection_input& in) const override {
        std::vector<uint8_t> taken(in.chunk.size(), 0);
        std::vector<int64_t> out;
        take_sinks(in, in.budget, -1, &taken, &out);
        return out;
    }
};

}  // namespace

std::unique_ptr<token_selector> make_sink_selector() { return std::make_unique<sink_selector>(); }

}  // namespace cacheblend
