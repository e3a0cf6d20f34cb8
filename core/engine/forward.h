// The transformer forward pass. run() computes a batch of token rows through every layer (prefill
// micro-batches, decode). The step functions expose the same layer in pieces, so the blending
// engine can schedule rows per layer: project Q/K/V, swap in cached K/V, shrink the row set at
// check layers, then attend and run the MLP for the rows that remain.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/engine/backend.h"
#include "core/engine/kv-cache.h"
#include "core/engine/model-weights.h"
#include "core/model/model.h"

namespace cacheblend {

// Called after a layer's Q/K/V projection with K before RoPE and V (f32 rows, stride kv_dim):
// the chunk precompute captures what the KV store keeps.
using kv_observer = std::function<void(int layer, const float* k, const float* v, int64_t n)>;

class forward_engine {
public:
    // max_rows: the largest batch one call may pass (scratch is sized for it). `w` is the model's
    // weights on `be` (a session shares its own); without it the engine makes its own copy.
    forward_engine(const model& m, backend& be, const model_weights& w, int32_t max_rows);
    forward_engine(const model& m, backend& be, int32_t max_rows);
    ~forward_engine();

    // What the scratch of an engine for max_rows rows allocates (alloc_scratch's buffers), so a
    // session can reserve it against its runtime's memory budget before allocating.
    static uint64_t scratch_bytes(const model_hparams& hp, int64_t max_rows);

    // Runs all layers for rows (tokens[i] at pos[i]); attention sees keys [0, n_keys) causally
    // by position. Writes K/V of these rows into `cache`. When logits != nullptr, writes the
    // n_vocab logits of the last row (host memory).
    void run(kv_cache& cache, const token_id* tokens, const int32_t* pos, int64_t n,
             int64_t n_keys, float* logits, const kv_observer& observer = nullptr);

    // ---- steps (rows are the first n rows of the scratch buffers) ----
    void embed(const token_id* tokens, int64_t n);  // validates ids; x = embeddings
    void set_positions(const int32_t* pos, int64_t n);
    void project_qkv(int layer, int64_t n);          // q, k, v (pre-RoPE) from x
    // RoPE on k; stores k, v of the rows into the cache at their positions.
    void rope_store_kv(int layer, kv_cache& cache, int64_t n);
    // RoPE on q; attention over cached keys [0, n_keys); output projection, residual, MLP.
    void attend_and_mlp(int layer, kv_cache& cache, int64_t n, int64_t n_keys);
    void logits(int64_t row, float* out);            // final norm + output head of one row
    // Keeps rows keep[0..m) (ascending) of x, q and the positions, in that order; k and v are
    // left as they are (rope_store_kv has stored them; the next project_qkv overwrites them).
    void compact_rows(const int32_t* keep, int64_t m);

    float* x() { return x_.as<float>(); }
    float* q() { return q_.as<float>(); }  // before RoPE until attend_and_mlp, stride q_dim
    float* k() { return k_.as<float>(); }
    float* v() { return v_.as<float>(); }
    const int32_t* positions() const { return pos_.as<int32_t>(); }
    int32_t max_rows() const { return max_rows_; }

private:
    void alloc_scratch();

    const model& m_;
    backend& be_;
    std::unique_ptr<backend_weights> own_w_;  // only without a shared model_weights
    const model_weights* w_;
    int32_t max_rows_;
    backend_buffer x_, h_, q_, k_, v_, attn_, gate_, up_, ids_, pos_, logits_;
    std::vector<int32_t> host_pos_;
};

}  // namespace cacheblend
