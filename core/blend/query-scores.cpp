#include "core/blend/query-scores.h"

#include <cmath>

namespace cacheblend {

void question_attention(backend& be, forward_engine& fwd, kv_cache& cache, const model_hparams& hp,
                        const rope_params& rope, int32_t layer, int64_t n_act, int64_t n_question,
                        int64_t n_keys, query_scratch* s, std::vector<float>* out) {
    const int64_t qd = hp.q_dim();
    const size_t q_bytes = static_cast<size_t>(n_question * qd) * sizeof(float);
    if (s->q.size() < q_bytes) s->q = backend_buffer(be, q_bytes);
    const size_t s_bytes = static_cast<size_t>(n_keys) * sizeof(float);
    if (s->scores.size() < s_bytes) s->scores = backend_buffer(be, s_bytes);
    // The question is the tail of the active rows; its Q is rotated in a copy, because
    // attend_and_mlp rotates the engine's own buffer later in this layer.
    const int64_t first = n_act - n_question;
    be.copy(s->q.as<float>(), fwd.q() + first * qd, q_bytes);
    const int32_t* q_pos = fwd.positions() + first;
    be.rope(s->q.as<float>(), n_question, qd, hp.n_head, hp.head_dim, q_pos, rope);
    attention_args a;
    a.q = s->q.as<float>();
    a.n_q = n_question;
    a.q_stride = qd;
    a.q_pos = q_pos;
    a.k = cache.k(layer);
    a.kv_stride = cache.row_elems();
    a.n_keys = n_keys;
    a.n_head = hp.n_head;
    a.n_kv_head = hp.n_head_kv;
    a.head_dim = hp.head_dim;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    be.attention_mass(a, s->scores.as<float>());
    out->resize(static_cast<size_t>(n_keys));
    be.download(out->data(), s->scores.as<float>(), s_bytes);
}

}  // namespace cacheblend
