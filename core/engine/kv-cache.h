// A request's working KV cache: per layer, K (after RoPE) and V as f16 rows indexed by absolute
// position, so the blending engine can overwrite any scattered rows and attention can mask by
// position. Chunk KV on disk keeps K before RoPE; relocation rotates it into these rows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine/backend.h"
#include "core/model/model.h"

namespace cacheblend {

class kv_cache {
public:
    kv_cache(backend& be, const model_hparams& hp, int32_t n_ctx);

    uint16_t* k(int layer) { return k_[static_cast<size_t>(layer)].as<uint16_t>(); }
    uint16_t* v(int layer) { return v_[static_cast<size_t>(layer)].as<uint16_t>(); }
    int32_t n_ctx() const { return n_ctx_; }
    int64_t row_elems() const { return row_elems_; }  // n_head_kv * head_dim
    int32_t n_layer() const { return static_cast<int32_t>(k_.size()); }
    size_t bytes() const;

    // Rows [0, n_filled) hold valid K/V (a contiguous prefix; blending fills holes itself).
    int32_t n_filled = 0;

private:
    std::vector<backend_buffer> k_, v_;
    int32_t n_ctx_ = 0;
    int64_t row_elems_ = 0;
};

}  // namespace cacheblend
