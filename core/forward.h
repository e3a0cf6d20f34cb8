// The transformer forward pass over a set of token rows at given absolute positions, writing
// their K/V into a kv_cache and returning logits for the last row. Used by prefill (rows are a
// contiguous run, processed in micro-batches) and decode (one row).
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/kv-cache.h"
#include "core/model.h"

namespace cacheblend {

class forward_engine {
public:
    // max_rows: the largest batch one run() call may pass (scratch is sized for it).
    forward_engine(const model& m, backend& be, int32_t max_rows);

    // Runs all layers for rows (tokens[i] at pos[i]); attention sees keys [0, n_keys) causally
    // by position. Writes K/V of these rows into `cache`. When logits != nullptr, writes the
    // n_vocab logits of the last row (host memory).
    void run(kv_cache& cache, const token_id* tokens, const int32_t* pos, int64_t n,
             int64_t n_keys, float* logits);

    int32_t max_rows() const { return max_rows_; }

private:
    const model& m_;
    backend& be_;
    int32_t max_rows_;
    backend_buffer x_, h_, q_, k_, v_, attn_, gate_, up_, ids_, pos_, logits_;
};

}  // namespace cacheblend
