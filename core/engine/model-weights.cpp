#include "core/engine/model-weights.h"

#include <utility>

namespace cacheblend {

backend_weights::backend_weights(const model& m, backend& be) : be_(be) {
    const model_hparams& hp = m.hparams();
    w_.layers = m.layers();
    w_.tok_embd = m.tok_embd();
    w_.output = m.output();
    w_.output_norm = m.output_norm();
    w_.rope = hp.rope;
    if (be.host_memory()) return;  // the model's views are backend memory already

    const int64_t E = hp.n_embd;
    for (layer_weights& L : w_.layers) {
        L.attn_norm = upload_floats(L.attn_norm, E);
        L.ffn_norm = upload_floats(L.ffn_norm, E);
        L.bq = upload_floats(L.bq, L.wq.rows);
        L.bk = upload_floats(L.bk, L.wk.rows);
        L.bv = upload_floats(L.bv, L.wv.rows);
        for (weight_view* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
            *w = upload_matrix(*w);
        }
    }
    const bool tied = m.output().data == m.tok_embd().data;
    w_.tok_embd = upload_matrix(m.tok_embd());
    w_.output = tied ? w_.tok_embd : upload_matrix(m.output());
    w_.output_norm = upload_floats(m.output_norm(), E);
    w_.rope.freq_factors = upload_floats(hp.rope.freq_factors, hp.rope.n_dims / 2);
}

backend_weights::backend_weights(const model& m, std::shared_ptr<backend> be)
    : backend_weights(m, *be) {
    keep_ = std::move(be);
    keep_->synchronize();
}

const float* backend_weights::upload_floats(const float* host, int64_t n) {
    if (!host || n <= 0) return nullptr;  // an absent bias or frequency table stays absent
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    backend_buffer b(be_, bytes);
    be_.upload(b.as<void>(), host, bytes);
    uploaded_ += bytes;
    owned_.push_back(std::move(b));
    return owned_.back().as<float>();
}

weight_view backend_weights::upload_matrix(const weight_view& host) {
    weight_view w = host;
    if (!host.data) return w;
    const size_t bytes = static_cast<size_t>(host.rows) * host.row_bytes;
    backend_buffer b(be_, bytes);
    be_.upload(b.as<void>(), host.data, bytes);
    uploaded_ += bytes;
    owned_.push_back(std::move(b));
    w.data = owned_.back().as<void>();
    return w;
}

}  // namespace cacheblend
