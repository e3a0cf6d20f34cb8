#include "answer-json.h"

#include "capi-util.h"

namespace cacheblend::cli {

void write_answer_tokens(json_writer& w, const cbl_answer* answer) {
    size_t n = 0;
    const int32_t* tokens = cbl_answer_tokens(answer, &n);
    w.key("tokens").begin_array();
    for (size_t i = 0; i < n; ++i) w.value(tokens[i]);
    w.end_array();
}

void write_answer_top_logprobs(json_writer& w, const cbl_answer* answer, const cbl_model* model) {
    w.key("top_logprobs").begin_array();
    for (size_t i = 0; i < cbl_answer_n_top_logprobs(answer); ++i) {
        int32_t id = 0;
        float lp = 0;
        check(cbl_answer_top_logprob(answer, i, &id, &lp));
        w.begin_object();
        w.field("id", id);
        w.field("text", token_text(model, id));
        w.field("logprob", lp);
        w.end_object();
    }
    w.end_array();
}

}  // namespace cacheblend::cli
