// Blended prefill (CacheBlend; docs/ARCHITECTURE.md, 'Blended prefill'). A prompt is
// [P preamble][C1]..[Ck][Q question].
// Each chunk's KV (K before RoPE, V) is precomputed once over [P][Ci] and kept in the kv_store.
// At request time cached chunks are streamed layer by layer and relocated to their positions;
// layer 0 runs in full, the check layer(s) rank reused tokens by how far their fresh KV deviates
// from the cached one, and only the top share (plus P, Q and cache misses) is recomputed in later
// layers, with an exact causal mask by absolute position. Modes share one engine so they compare
// side by side: full, prefix, reuse (r = 0) and blend (r).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/blend/selection.h"
#include "core/engine/session.h"
#include "core/kvstore/kv-store.h"

namespace cacheblend {

class layer_loader;    // core/blend/blend-loader.h
struct kv_layer_rows;  // core/blend/blend-loader.h

enum class blend_mode { full, prefix, reuse, blend };
const char* blend_mode_name(blend_mode m);
bool parse_blend_mode(const std::string& s, blend_mode* out);

// random: a seeded pseudo-random score per prompt position, the control that shows what the
// deviation-based selection buys at the same ratio (ablations only).
enum class deviation_kind { v, k, kv, random };

// The recompute ratio when none is given (the paper's 15%): the one place it is written in the
// library. The C header's static-inline cbl_x_blend_params_init repeats it (a test holds them
// equal), and the CLI reads it from there.
constexpr float k_default_recompute_ratio = 0.15f;
// A recompute ratio is a share: within [0, 1], NaN excluded. Every entry point checks with this.
inline bool ratio_in_range(float r) { return r >= 0.f && r <= 1.f; }

struct blend_params {
    blend_mode mode = blend_mode::blend;
    float ratio = k_default_recompute_ratio;  // share of reused tokens recomputed (blend mode)
    bool ratio_auto = false;         // pick r from measured load and compute rates
    float ratio_min = 0.05f, ratio_max = 0.5f;  // clamp for ratio_auto
    std::vector<int32_t> check_layers = {1};
    // Gradual filtering: ratio kept at each check layer (non-increasing, last = ratio). Empty:
    // one ratio at every check layer.
    std::vector<float> check_ratios;
    deviation_kind deviation = deviation_kind::v;
    // Which reused rows a check layer keeps (core/blend/selection.h); the ratio is its budget.
    select_policy select = select_policy::hkvd;
    kv_format format = kv_format::f16;
    bool write_back = true;          // store KV of missed chunks after the request
    // Threads reading a layer's stored chunks (core/blend/blend-loader.h); 0: one beside a CPU
    // backend, up to 8 beside a GPU.
    int32_t load_threads = 0;
    // Blend mode: use the ratio (and selection policy) `cacheblend calibrate` recorded in the store for this model
    // and format (core/blend/calibration.h); without a record, `ratio`; a record that met no
    // target: full.
    bool ratio_calibrated = false;
};

struct blend_stats {
    blend_mode mode = blend_mode::blend;  // the mode that ran
    float ratio = 0;
    double ttft_ms = 0, load_ms = 0, load_wait_ms = 0, select_ms = 0, compute_ms = 0;
    // Of compute_ms: work on every prompt row (blend: the layers before the check layer and its
    // Q/K/V projection, the cost that is not recompute), and rotating stored K into place.
    double dense_ms = 0, relocate_ms = 0;
    double decode_tokens_per_s = 0;
    int64_t tokens_total = 0, tokens_reused = 0, tokens_recomputed = 0, tokens_missed = 0;
    uint64_t bytes_loaded = 0;
    int32_t chunks_hit = 0, chunks_missed = 0;
    // Of tokens_reused / bytes_loaded: what came from the shared tier (core/kvstore/kv-tiered.h).
    int64_t tokens_remote = 0;
    uint64_t bytes_remote = 0;
    // Why a request ran as full, when it did, and what the shared KV tier did not give
    // ("; "-joined).
    std::string fallback_reason;
    std::vector<int32_t> recomputed_rows;  // prompt rows computed in the last layer (ascending)
};

struct blend_request {
    std::vector<token_id> preamble;
    std::vector<std::vector<token_id>> chunks;
    std::vector<token_id> question;  // question + template tail; the last token is sampled from
};

class blend_engine {
public:
    blend_engine(session& s, std::shared_ptr<kv_store> store, const blend_params& p = {});
    ~blend_engine();

    const blend_params& params() const { return requested_; }
    void set_params(const blend_params& p);

    // Computes and stores the chunk's KV over [preamble][chunk] unless already stored.
    // Returns true when it computed. Uses its own scratch cache; the session is untouched.
    bool precompute_chunk(const std::vector<token_id>& preamble, const std::vector<token_id>& chunk);

    // Fills the session's cache with the whole prompt (n_past = N afterwards) and returns the
    // last token's logits. Throws status::range when the prompt does not fit the context.
    const std::vector<float>& prefill(const blend_request& req, blend_stats* stats);

    // Writes back KV of chunks that missed in the last prefill (outside the TTFT path).
    void write_back_misses();

    // The chunk's store key for this model and format. A chunk of the last prefill's request
    // (or the last chunk asked for) is hashed once: later calls return the remembered key.
    chunk_key key_of(const std::vector<token_id>& preamble,
                     const std::vector<token_id>& chunk) const;
    // What a stored chunk of n_tokens must match to be used with this model and format.
    chunk_kv_meta meta_of(int32_t n_tokens) const;

private:
    struct impl;
    struct plan;         // one request's layout, lookup and schedule (core/blend/blend-plan.h)
    struct layer_state;  // the layer loop's active rows and scratch
    struct key_memo;     // the last request's chunk keys

    void resolve_calibration();  // p_ from requested_ and the store's calibration record
    // One attempt at prefill(): the driver over the steps below (core/blend/blend-prefill.cpp).
    const std::vector<float>& prefill_once(const blend_request& req,
                                           const std::vector<bool>& forced_miss, blend_stats* out);
    void remember_request(const blend_request& req);
    void add_notice(const std::string& n);  // once per request (core/kvstore/kv-tiered.h)
    const chunk_key& request_key(size_t chunk) const;
    void plan_and_lookup(const blend_request& req, const std::vector<bool>& forced_miss, plan* P,
                         blend_stats* st);
    void resolve_ratio(plan* P, blend_stats* st) const;
    void start_active(const plan& P, forward_engine& fwd, layer_state* L) const;
    void run_layer(int32_t l, const plan& P, layer_loader& loader, forward_engine& fwd,
                   layer_state* L);
    void relocate(int32_t l, const plan& P, const kv_layer_rows& cached, layer_state* L);
    void record_stats(const plan& P, const layer_state& L, const layer_loader& loader,
                      double total_ms, blend_stats* st) const;
    void update_rates(const plan& P, const layer_state& L, const layer_loader& loader,
                      const blend_stats& st);

    std::unique_ptr<impl> impl_;
    session& s_;
    std::shared_ptr<kv_store> store_;
    blend_params requested_;   // as set
    blend_params p_;           // as run: a calibrated ratio resolved
    std::string calib_note_;   // how the calibration changed the request ("" if it did not)
};

}  // namespace cacheblend
