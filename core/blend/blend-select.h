// The select step of a blended prefill: at a check layer, gather what the selection policy reads
// about the reused rows still computed (chunk, position in the chunk, and when the policy asks for
// it, how far their fresh KV deviates from the stored one: the backend's kv_deviation), let the
// policy choose (core/blend/selection.h), and keep those rows with every row not reused.
#pragma once

#include <cstdint>
#include <vector>

#include "core/blend/blend.h"
#include "core/blend/selection.h"
#include "core/engine/backend.h"
#include "core/engine/host-staging.h"
#include "kernels/memory.h"

namespace cacheblend {

struct select_args {
    const std::vector<int32_t>* active = nullptr;        // rows computed at this layer, ascending
    const std::vector<int32_t>* reused_index = nullptr;  // prompt row -> row in R, -1 if none
    const std::vector<int64_t>* hit_offset = nullptr;    // first row in R of each hit chunk
    const float* fresh_k = nullptr;                      // forward buffers, [active][kv_dim]
    const float* fresh_v = nullptr;
    // The stored layer, [R][kv_dim]: the loader's slot on a host backend, its device copy
    // (core/blend/device-layers.h) on a device backend. K in f32 or f16 (as stored).
    const void* cached_k = nullptr;
    dtype cached_k_type = dtype::f32;
    const uint16_t* cached_v = nullptr;
    int64_t kv_dim = 0;
    int64_t n_reused = 0;  // |R|: the share counts against all reused rows
    float ratio = 0;       // share of R kept at this check layer
    int32_t layer = 0;
    deviation_kind deviation = deviation_kind::v;
};

// Kept across check layers and requests, so they allocate once.
struct select_scratch {
    aligned_array<float> fresh, dev;  // host backend: the candidates' rows gathered; deviation
    aligned_array<uint16_t> cached;
    // Device backend: the candidates' rows (fresh, and R's) gathered on the device; f32 K
    // converted to f16 there; the deviation comes back to `dev`.
    std::vector<int32_t> fresh_rows, cached_rows, iota;
    host_staging fresh_rows_b, cached_rows_b, iota_b, dev_b;
    backend_buffer fresh_d, cached_d, k32_d;
};

// Before the layer's K is rotated: *cand = the indices into *active of the reused rows (the
// candidates); *in = their chunk and offset, the budget ceil(ratio * |R|) (at most the
// candidates) and, when sel reads it, their deviation.
void select_prepare(backend& be, const select_args& a, const token_selector& sel,
                    select_scratch* s, std::vector<int64_t>* cand, selection_input* in);

// *keep = the indices into *active that stay computed after this layer: every row not reused,
// and the candidates sel chooses from in, ascending.
void select_finish(const select_args& a, const token_selector& sel, const selection_input& in,
                   const std::vector<int64_t>& cand, std::vector<int32_t>* keep);

}  // namespace cacheblend
