#include "core/engine/kv-cache.h"

#include "core/util/error.h"

namespace cacheblend {

kv_cache::kv_cache(backend& be, const model_hparams& hp, int32_t n_ctx)
    : n_ctx_(n_ctx), row_elems_(hp.kv_dim()) {
    if (n_ctx <= 0) throw error(status::invalid_arg, fmt("kv_cache: bad context size %d", n_ctx));
    const size_t layer_bytes = static_cast<size_t>(n_ctx) * static_cast<size_t>(row_elems_) * 2;
    k_.reserve(static_cast<size_t>(hp.n_layer));
    v_.reserve(static_cast<size_t>(hp.n_layer));
    for (int l = 0; l < hp.n_layer; ++l) {
        k_.emplace_back(be, layer_bytes);
        v_.emplace_back(be, layer_bytes);
    }
}

size_t kv_cache::bytes() const {
    size_t b = 0;
    for (const auto& x : k_) b += x.size();
    for (const auto& x : v_) b += x.size();
    return b;
}

}  // namespace cacheblend
