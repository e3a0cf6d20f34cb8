// Greedy generation through the C ABI, for tests that compare what sessions answer.
#pragma once

#include <cstdint>
#include <vector>

#include "cacheblend.h"

namespace cbltest {

// The token ids of exactly max_tokens greedy tokens (past end-of-generation) after the session's
// last prefill. A failing call records a test failure and gives no tokens.
std::vector<int32_t> greedy_tokens(cbl_session* s, int32_t max_tokens);

}  // namespace cbltest
