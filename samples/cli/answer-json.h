// The answer fields that `generate`, `ask` and `blend` print alike (docs/ARCHITECTURE.md,
// 'Command-line tool'): `tokens` (generated ids), `top_logprobs` (first position: {id, text,
// logprob}) and the blend stats, read through the C ABI.
#pragma once

#include "cacheblend.h"
#include "json-writer.h"

namespace cacheblend::cli {

void write_answer_tokens(json_writer& w, const cbl_answer* answer);
// Token texts keep special tokens visible, so a likely end-of-turn shows as "<|im_end|>".
void write_answer_top_logprobs(json_writer& w, const cbl_answer* answer, const cbl_model* model);
// The `stats` object's fixed fields (ask, blend, eval), in their order.
void write_blend_stats(json_writer& w, const cbl_stats& s);

}  // namespace cacheblend::cli
