// The transformer forward pass. run() computes a batch of token rows through every layer (prefill
// micro-batches, decode). The step functions expose the same layer in pieces, so the blending
// engine can schedule rows per layer: project Q/K/V, swap in cached K/V, shrink the row set at
// check layers, then attend and run the MLP for the rows that remain.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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
    //
    // A decode step (one row, logits, no observer) on a backend that records (backend::record:
    // CUDA graphs) is recorded once per cache, at the second step, and replayed from then on:
    // the same kernels, so the same bits, with one launch instead of hundreds.
    void run(kv_cache& cache, const token_id* tokens, const int32_t* pos, int64_t n,
             int64_t n_keys, float* logits, const kv_observer& observer = nullptr);

    // On by default; off: every decode step calls its ops one by one (benchmarks compare both).
    void set_decode_recording(bool on);
    // Decode steps replayed from a recording (since the engine was made or recording last
    // turned on or off), and why decode runs op by op when it does ("" while it may record).
    int64_t decode_replays() const { return decode_replays_; }
    const std::string& decode_recording_off() const { return decode_off_why_; }

    // ---- steps (rows are the first n rows of the scratch buffers) ----
    void embed(const token_id* tokens, int64_t n);  // validates ids; x = embeddings
    void upload_tokens(const token_id* tokens, int64_t n);  // validates ids; embed's first half
    void set_positions(const int32_t* pos, int64_t n);
    void project_qkv(int layer, int64_t n);          // q, k, v (pre-RoPE) from x
    // RoPE on k; stores k, v of the rows into the cache at their positions.
    void rope_store_kv(int layer, kv_cache& cache, int64_t n);
    // rope_store_kv and attend_and_mlp's RoPE on q as one op (backend::rope_qk_store_kv); then
    // attend_roped_and_mlp, not attend_and_mlp.
    void rope_store_qkv(int layer, kv_cache& cache, int64_t n);
    // RoPE on q; attention over cached keys [0, n_keys); output projection, residual, MLP.
    // visible_keys_only: keys past the rows' positions may be unwritten (attention_args).
    void attend_and_mlp(int layer, kv_cache& cache, int64_t n, int64_t n_keys,
                        bool visible_keys_only = false);
    // attend_and_mlp for q already rotated (rope_store_qkv).
    void attend_roped_and_mlp(int layer, kv_cache& cache, int64_t n, int64_t n_keys,
                              bool visible_keys_only = false);
    void logits(int64_t row, float* out);            // final norm + output head of one row
    // Keeps rows keep[0..m) (ascending) of x, q and the positions, in that order; k and v are
    // left as they are (rope_store_kv has stored them; the next project_qkv overwrites them).
    void compact_rows(const int32_t* keep, int64_t m);

    float* x() { return x_.as<float>(); }
    // Stride q_dim; before RoPE until attend_and_mlp or rope_store_qkv.
    float* q() { return q_.as<float>(); }
    float* k() { return k_.as<float>(); }
    float* v() { return v_.as<float>(); }
    const int32_t* positions() const { return pos_.as<int32_t>(); }
    int32_t max_rows() const { return max_rows_; }

private:
    void alloc_scratch();
    void logits_on_backend(int64_t row);  // logits' ops: into logits_, not downloaded
    // The decode step's ops after its uploads: every layer for the row at pos_, attending to
    // the cache's every row by position, and the logits.
    void decode_ops(kv_cache& cache);
    // One decode step from the recording for `cache` (made here when due); false when the
    // caller must run the step op by op.
    bool decode_recorded(kv_cache& cache, token_id t, int32_t pos, float* logits);

    const model& m_;
    backend& be_;
    std::unique_ptr<backend_weights> own_w_;  // only without a shared model_weights
    const model_weights* w_;
    int32_t max_rows_;
    backend_buffer x_, h_, q_, k_, v_, attn_, gate_, up_, ids_, pos_, logits_;
    std::vector<int32_t> host_pos_;

    // Decode recording. The recording names the cache's rows (decode_cache_ says which); the
    // step before recording runs op by op, so every kernel it launches is loaded and every
    // buffer its ops use exists before a capture.
    std::unique_ptr<recorded_ops> decode_rec_;
    std::vector<const void*> decode_cache_;
    bool decode_warm_ = false;  // a step on decode_cache_ has run op by op
    bool decode_record_ = true;
    std::string decode_off_why_;
    int64_t decode_replays_ = 0;
};

}  // namespace cacheblend
