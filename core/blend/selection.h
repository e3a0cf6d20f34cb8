// Token selection as a policy (issue 15): which reused rows of which chunks a check layer keeps
// computed. The blend engine gathers the signals a policy asks for (core/blend/blend-select.h) and
// the policy only chooses, so each one is a small pure function testable on a constructed case.
//   hkvd        the rows whose fresh KV deviates most from the stored one (CacheBlend; the default)
//   sink        the first tokens of every reused chunk (EPIC/LegoLink: the repeated attention sinks);
//               it reads no signal, so the engine chooses before layer 0 and runs no layer on
//               every prompt row (blend-plan.h, select_early)
//   sink+hkvd   a small fixed sink per chunk, the rest of the budget by deviation
//   query       the rows the question's rows attend to most at the check layer (ProphetKV-style)
//   query+hkvd  half the budget by the question's attention, the other half by deviation
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cacheblend {

enum class select_policy { hkvd, sink, sink_hkvd, query, query_hkvd };

// Every policy in the order of the names table (the CLI and C API list them from here).
const std::vector<select_policy>& select_policies();
const char* select_policy_name(select_policy p);
bool parse_select_policy(const std::string& s, select_policy* out);
// "hkvd, sink, sink+hkvd, query, query+hkvd": for messages naming the valid ones.
std::string select_policy_names();

// Rows each reused chunk always keeps under sink+hkvd: StreamingLLM's four sink tokens.
constexpr int64_t k_sink_hkvd_sinks = 4;

// What a check layer knows about its candidates (the reused rows still computed there, in
// ascending prompt order). Per candidate i:
struct selection_input {
    std::vector<int32_t> chunk;     // which reused chunk (0 = the first hit chunk of the prompt)
    std::vector<int32_t> offset;    // position within that chunk (0 = its first token)
    std::vector<float> deviation;   // KV deviation at this layer; filled when needs_deviation()
    std::vector<float> query;       // attention the question pays it; filled when needs_query()
    int64_t budget = 0;             // how many to choose: ceil(ratio * |R|), at most the candidates
};

class token_selector {
public:
    virtual ~token_selector() = default;
    // Which signals choose() reads: the engine computes only those (a sink policy pays for none).
    virtual bool needs_deviation() const = 0;
    virtual bool needs_query() const = 0;
    // `in.budget` distinct indices into the candidates, in any order.
    virtual std::vector<int64_t> choose(const selection_input& in) const = 0;
};

std::unique_ptr<token_selector> make_token_selector(select_policy p);

}  // namespace cacheblend
