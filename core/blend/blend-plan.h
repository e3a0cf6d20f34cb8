// What the steps of one blended prefill share: the request's plan, the layer loop's state, the
// chunk-key memo and the engine's state across requests (core/blend/blend-prefill.cpp runs the
// steps, core/blend/blend.cpp the public face). Internal to core/blend/blend*.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/blend/blend-loader.h"
#include "core/blend/blend-select.h"
#include "core/blend/blend.h"
#include "core/blend/device-layers.h"
#include "core/blend/query-scores.h"
#include "core/blend/selection.h"
#include "core/engine/forward.h"
#include "core/engine/host-staging.h"
#include "core/engine/kv-cache.h"
#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/kv-store.h"
#include "kernels/memory.h"

namespace cacheblend {

// One request's layout, lookup and layer schedule, written by plan_and_lookup and resolve_ratio
// and read by every later step.
struct blend_engine::plan {
    std::vector<token_id> tokens;      // the prompt: [P][C1]..[Ck][Q]
    std::vector<int64_t> chunk_start;  // first prompt row of each chunk
    int64_t n = 0;                     // prompt rows (N)
    int64_t n_question = 0;            // the last rows: the question (always computed)

    std::vector<std::unique_ptr<chunk_kv_reader>> readers;  // one per hit chunk
    std::vector<chunk_kv_reader*> hit_readers;
    std::vector<size_t> hit_chunks;     // request index of each hit chunk
    std::vector<int64_t> hit_offset;    // first row of each hit chunk within R
    std::vector<int32_t> reused_index;  // prompt row -> index in R, -1 if computed
    std::vector<int32_t> reused_rows;   // R: prompt rows whose KV comes from the store
    int64_t n_reused() const { return static_cast<int64_t>(reused_rows.size()); }
    double lookup_ms = 0;

    bool blending = false;             // blend mode with something to blend
    // Blending under a policy that reads no signal of the computation (sink): it chooses once,
    // before layer 0, at the last check layer's ratio, so no layer runs on every prompt row
    // (the dense pass that deviation and query scores need) and the loader streams from layer 0.
    bool select_early = false;
    std::vector<float> check_ratio;    // share of R kept at each check layer
    std::vector<int32_t> load_layers;  // layers the loader streams, ascending
};

// The layer loop's state: which rows are computed at the current layer, and scratch kept across
// layers so they allocate once per request.
struct blend_engine::layer_state {
    std::vector<int32_t> active;     // prompt rows computed at this layer, ascending
    std::vector<int32_t> keep;       // indices into active that a check layer keeps
    std::vector<uint8_t> is_active;  // per prompt row
    std::vector<int32_t> gpos;       // relocate: target rows
    aligned_array<float> gk;         // relocate: gathered cached K rows, f32 or f16 (host backend)
    aligned_array<uint16_t> gv;      // relocate: gathered cached V (host backend)
    std::vector<int32_t> gidx;       // relocate: rows of R to gather
    std::unique_ptr<device_layers> dev;  // stored layers on a device backend (else null)
    std::unique_ptr<token_selector> selector;  // the request's policy
    std::vector<int64_t> cand;                 // a check layer's candidates (indices into active)
    selection_input sel_in;                    // what the policy reads about them
    std::vector<float> row_query;              // question attention per prompt row
    double wait_ms = 0, select_ms = 0;
    double dense_ms = 0;     // steps run on every prompt row
    double relocate_ms = 0;  // stored K rotated and copied into the cache
};

// Thrown inside one prefill attempt when a stored chunk turns out corrupt while streaming;
// prefill() drops the chunk and runs the request again with it as a miss.
struct blend_chunk_failure {
    size_t chunk = 0;    // request index
    bool remove = true;  // the stored value is bad (not a network failure of the shared tier)
    std::string notice;  // what the request is told ("" for a local file found corrupt)
};

// Chunk keys with the tokens they hash: one request's (so a chunk's SHA-256 key is computed once
// per request, by the lookup or the first later use, and reused by retries, write-back and the
// callers' key_of) or the last key asked for outside a request (ingest asks twice per chunk).
struct blend_engine::key_memo {
    struct entry {
        std::vector<token_id> chunk;
        std::optional<chunk_key> key;  // computed on first use
    };
    kv_format format = kv_format::f16;
    std::vector<token_id> preamble;
    std::vector<entry> chunks;

    // The entry of `chunk` after `preamble` in `fmt`; nullptr if none.
    entry* find(kv_format fmt, const std::vector<token_id>& pre,
                const std::vector<token_id>& chunk) {
        if (fmt != format || pre != preamble) return nullptr;
        for (entry& e : chunks) {
            if (e.chunk == chunk) return &e;
        }
        return nullptr;
    }
};

// The engine's state kept across requests.
struct blend_engine::impl {
    // Precompute's scratch cache, sized to the longest [preamble][chunk] seen: the session's own
    // cache holds the request's prompt while misses are written back, before generation.
    std::unique_ptr<kv_cache> pre_cache;
    std::vector<float> logits;
    std::vector<size_t> pending;  // request chunks that missed, to write back
    std::vector<std::string> notices;  // this request's shared-tier notices (once each)
    key_memo request, other;      // chunk keys (see key_memo)
    // Rates measured on earlier requests, for ratio=auto (EMA).
    double load_bytes_per_ms = 0, row_layer_ms = 0;
    // Memory kept across requests: the loader's slots (the session backend's host memory), and
    // on a device backend their device copies and the relocation's gathered rows.
    loader_memory load_mem;
    device_layer_memory dev_mem;
    backend_buffer gk_d, gv_d;
    // Backend scratch of the layer loop (on a GPU, allocations that would otherwise be made and
    // freed, each free a device-wide wait, on every request): the relocation's row indices and
    // targets, the check layer's selection, the question's attention.
    host_staging gidx_b, gpos_b;
    select_scratch sel;
    query_scratch query;
};

}  // namespace cacheblend
