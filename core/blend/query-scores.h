// The query policies' signal (core/blend/selection.h): at a check layer, after the layer's keys
// are in the cache (rotated, every prompt row present), how much attention the question's rows
// pay each prompt row: softmax per question row and head as attention() computes it, summed over
// heads and question rows (the backend's attention_mass). The question's Q comes from the forward
// engine's buffer, rotated in a copy; the scores leave the backend through download only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine/backend.h"
#include "core/engine/forward.h"
#include "core/engine/kv-cache.h"

namespace cacheblend {

struct query_scratch {
    backend_buffer q;       // the question rows' Q, rotated
    backend_buffer scores;  // per prompt row
};

// *out[j] for prompt rows j in [0, n_keys): the attention mass the last n_question of the n_act
// rows in the forward engine's buffers (the question) pay row j at `layer`.
void question_attention(backend& be, forward_engine& fwd, kv_cache& cache, const model_hparams& hp,
                        const rope_params& rope, int32_t layer, int64_t n_act, int64_t n_question,
                        int64_t n_keys, query_scratch* s, std::vector<float>* out);

}  // namespace cacheblend
