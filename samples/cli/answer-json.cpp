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

void write_blend_stats(json_writer& w, const cbl_stats& s) {
    w.field("mode", std::string(mode_name(s.mode)));
    w.field("ratio", s.ratio);
    w.field("ttft_ms", s.ttft_ms);
    w.field("load_ms", s.load_ms);
    w.field("select_ms", s.select_ms);
    w.field("compute_ms", s.compute_ms);
    w.field("dense_ms", s.dense_ms);
    w.field("relocate_ms", s.relocate_ms);
    w.field("queue_ms", s.queue_ms);
    w.field("tokens_total", s.prompt_tokens);
    w.field("tokens_reused", s.tokens_reused);
    w.field("tokens_recomputed", s.tokens_recomputed);
    w.field("tokens_missed", s.tokens_missed);
    w.field("bytes_loaded", s.bytes_loaded);
    w.field("tokens_remote", s.tokens_remote);
    w.field("bytes_remote", s.bytes_remote);
    w.field("decode_tokens_per_s", s.decode_tokens_per_s);
    w.field("prefill_ms", s.prefill_ms);
    w.field("load_wait_ms", s.load_wait_ms);
    w.field("chunks_hit", s.chunks_hit);
    w.field("chunks_missed", s.chunks_missed);
}

}  // namespace cacheblend::cli
