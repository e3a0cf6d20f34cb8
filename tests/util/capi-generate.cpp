#include "util/capi-generate.h"

#include <gtest/gtest.h>

namespace cbltest {

std::vector<int32_t> greedy_tokens(cbl_session* s, int32_t max_tokens) {
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = max_tokens;
    gp.ignore_eog = true;
    cbl_answer* a = nullptr;
    EXPECT_EQ(cbl_session_generate(s, &gp, &a), CBL_OK) << cbl_last_error();
    size_t n = 0;
    const int32_t* ids = a ? cbl_answer_tokens(a, &n) : nullptr;
    std::vector<int32_t> out(ids, ids + n);
    cbl_answer_free(a);
    return out;
}

}  // namespace cbltest
