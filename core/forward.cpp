#include "core/forward.h"

#include <cmath>

#include "core/error.h"

namespace cacheblend {

forward_engine::forward_engine(const model& m, backend& be, int32_t max_rows)
    : m_(m), be_(be), max_rows_(max_rows) {
    const model_hparams& hp = m.hparams();
    if (max_rows <= 0) throw error(status::invalid_arg, "forward: max_rows must be positive");
    const size_t r = static_cast<size_t>(max_rows);
    const size_t f = sizeof(float);
    x_ = backend_buffer(be, r * hp.n_embd * f);
    h_ = backend_buffer(be, r * hp.n_embd * f);
    q_ = backend_buffer(be, r * hp.q_dim() * f);
    k_ = backend_buffer(be, r * hp.kv_dim() * f);
    v_ = backend_buffer(be, r * hp.kv_dim() * f);
    attn_ = backend_buffer(be, r * hp.q_dim() * f);
    gate_ = backend_buffer(be, r * hp.n_ff * f);
    up_ = backend_buffer(be, r * hp.n_ff * f);
    ids_ = backend_buffer(be, r * sizeof(int32_t));
    pos_ = backend_buffer(be, r * sizeof(int32_t));
    logits_ = backend_buffer(be, static_cast<size_t>(hp.n_vocab) * f);
}

void forward_engine::run(kv_cache& cache, const token_id* tokens, const int32_t* pos, int64_t n,
                         int64_t n_keys, float* logits) {
    const model_hparams& hp = m_.hparams();
    if (n <= 0 || n > max_rows_) {
        throw error(status::invalid_arg, fmt("forward: %lld rows (max %d)", (long long)n, max_rows_));
    }
    if (n_keys > cache.n_ctx()) {
        throw error(status::range, fmt("forward: %lld keys exceed the context of %d",
                                       (long long)n_keys, cache.n_ctx()));
    }
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= hp.n_vocab) {
            throw error(status::invalid_arg, fmt("forward: token id %d out of range [0, %d)",
                                                 tokens[i], hp.n_vocab));
        }
        if (pos[i] < 0 || pos[i] >= n_keys) {
            throw error(status::invalid_arg, fmt("forward: position %d outside [0, %lld)", pos[i],
                                                 (long long)n_keys));
        }
    }
    be_.upload(ids_.as<int32_t>(), tokens, static_cast<size_t>(n) * sizeof(int32_t));
    be_.upload(pos_.as<int32_t>(), pos, static_cast<size_t>(n) * sizeof(int32_t));

    const int64_t E = hp.n_embd, QD = hp.q_dim(), KD = hp.kv_dim(), FF = hp.n_ff;
    float* x = x_.as<float>();
    float* h = h_.as<float>();
    float* q = q_.as<float>();
    float* k = k_.as<float>();
    float* v = v_.as<float>();
    float* attn = attn_.as<float>();
    float* gate = gate_.as<float>();
    float* up = up_.as<float>();
    const int32_t* dpos = pos_.as<int32_t>();

    be_.get_rows(m_.tok_embd(), ids_.as<int32_t>(), n, x, E);

    attention_args aa;
    aa.q = q;
    aa.n_q = n;
    aa.q_stride = QD;
    aa.q_pos = dpos;
    aa.kv_stride = KD;
    aa.n_keys = n_keys;
    aa.n_head = hp.n_head;
    aa.n_kv_head = hp.n_head_kv;
    aa.head_dim = hp.head_dim;
    aa.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    aa.out = attn;
    aa.out_stride = QD;

    for (int l = 0; l < hp.n_layer; ++l) {
        const layer_weights& L = m_.layers()[static_cast<size_t>(l)];
        be_.rms_norm(x, n, E, E, L.attn_norm, hp.rms_eps, h, E);
        be_.matmul(L.wq, h, n, E, q, QD, L.bq);
        be_.matmul(L.wk, h, n, E, k, KD, L.bk);
        be_.matmul(L.wv, h, n, E, v, KD, L.bv);
        be_.rope(q, n, QD, hp.n_head, hp.head_dim, dpos, hp.rope);
        be_.rope(k, n, KD, hp.n_head_kv, hp.head_dim, dpos, hp.rope);
        be_.store_rows_f16(k, n, KD, KD, dpos, cache.k(l), cache.row_elems());
        be_.store_rows_f16(v, n, KD, KD, dpos, cache.v(l), cache.row_elems());
        aa.k = cache.k(l);
        aa.v = cache.v(l);
        be_.attention(aa);
        be_.matmul(L.wo, attn, n, QD, h, E, nullptr);
        be_.add_rows(x, h, n, E, E);

        be_.rms_norm(x, n, E, E, L.ffn_norm, hp.rms_eps, h, E);
        be_.matmul(L.w_gate, h, n, E, gate, FF, nullptr);
        be_.matmul(L.w_up, h, n, E, up, FF, nullptr);
        be_.swiglu(gate, up, n, FF, FF, gate);
        be_.matmul(L.w_down, gate, n, FF, h, E, nullptr);
        be_.add_rows(x, h, n, E, E);
    }

    if (logits) {
        const float* last = x + (n - 1) * E;
        be_.rms_norm(last, 1, E, E, m_.output_norm(), hp.rms_eps, h, E);
        be_.matmul(m_.output(), h, 1, E, logits_.as<float>(), hp.n_vocab, nullptr);
        be_.download(logits, logits_.as<float>(), static_cast<size_t>(hp.n_vocab) * sizeof(float));
    }
}

}  // namespace cacheblend
