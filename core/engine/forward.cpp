#include "core/engine/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/util/error.h"
#include "kernels/kernel-error.h"

namespace cacheblend {

forward_engine::forward_engine(const model& m, backend& be, int32_t max_rows)
    : m_(m),
      be_(be),
      own_w_(std::make_unique<backend_weights>(m, be)),
      w_(&own_w_->get()),
      max_rows_(max_rows) {
    alloc_scratch();
}

forward_engine::forward_engine(const model& m, backend& be, const model_weights& w,
                               int32_t max_rows)
    : m_(m), be_(be), w_(&w), max_rows_(max_rows) {
    alloc_scratch();
}

forward_engine::~forward_engine() = default;

uint64_t forward_engine::scratch_bytes(const model_hparams& hp, int64_t max_rows) {
    const uint64_t r = static_cast<uint64_t>(std::max<int64_t>(max_rows, 0));
    // x, h (n_embd); q, attn (q_dim); k, v (kv_dim); gate, up (n_ff): f32 each.
    const uint64_t per_row =
        2 * static_cast<uint64_t>(hp.n_embd + hp.q_dim() + hp.kv_dim() + hp.n_ff);
    return r * (per_row * sizeof(float) + 2 * sizeof(int32_t)) +
           static_cast<uint64_t>(hp.n_vocab) * sizeof(float);
}

void forward_engine::alloc_scratch() {
    backend& be = be_;
    const int32_t max_rows = max_rows_;
    const model_hparams& hp = m_.hparams();
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
    host_pos_.resize(r);
}

void forward_engine::embed(const token_id* tokens, int64_t n) {
    upload_tokens(tokens, n);
    be_.get_rows(w_->tok_embd, ids_.as<int32_t>(), n, x(), m_.hparams().n_embd);
}

void forward_engine::upload_tokens(const token_id* tokens, int64_t n) {
    const model_hparams& hp = m_.hparams();
    if (n <= 0 || n > max_rows_) {
        throw error(status::invalid_arg, fmt("forward: %lld rows (max %d)", (long long)n, max_rows_));
    }
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= hp.n_vocab) {
            throw error(status::invalid_arg, fmt("forward: token id %d out of range [0, %d)",
                                                 tokens[i], hp.n_vocab));
        }
    }
    be_.upload(ids_.as<int32_t>(), tokens, static_cast<size_t>(n) * sizeof(int32_t));
}

void forward_engine::set_positions(const int32_t* pos, int64_t n) {
    std::memcpy(host_pos_.data(), pos, static_cast<size_t>(n) * sizeof(int32_t));
    be_.upload(pos_.as<int32_t>(), pos, static_cast<size_t>(n) * sizeof(int32_t));
}

void forward_engine::project_qkv(int layer, int64_t n) {
    const model_hparams& hp = m_.hparams();
    const layer_weights& L = w_->layers[static_cast<size_t>(layer)];
    const int64_t E = hp.n_embd;
    const matmul_out qkv[3] = {{L.wq, q_.as<float>(), hp.q_dim(), L.bq},
                               {L.wk, k(), hp.kv_dim(), L.bk},
                               {L.wv, v(), hp.kv_dim(), L.bv}};
    const pre_norm norm{L.attn_norm, hp.rms_eps, h_.as<float>(), E};
    be_.matmuls(x(), n, E, qkv, 3, &norm);  // q, k, v of rms_norm(x)
}

void forward_engine::rope_store_kv(int layer, kv_cache& cache, int64_t n) {
    const model_hparams& hp = m_.hparams();
    const int64_t KD = hp.kv_dim();
    const int32_t* dpos = pos_.as<int32_t>();
    be_.rope(k(), n, KD, hp.n_head_kv, hp.head_dim, dpos, w_->rope);
    be_.store_rows_f16(k(), n, KD, KD, dpos, cache.k(layer), cache.row_elems());
    be_.store_rows_f16(v(), n, KD, KD, dpos, cache.v(layer), cache.row_elems());
}

void forward_engine::rope_store_qkv(int layer, kv_cache& cache, int64_t n) {
    const model_hparams& hp = m_.hparams();
    rope_store_args a;
    a.q = q_.as<float>();
    a.ldq = hp.q_dim();
    a.n_head = hp.n_head;
    a.k = k();
    a.v = v();
    a.ldkv = hp.kv_dim();
    a.n_kv_head = hp.n_head_kv;
    a.head_dim = hp.head_dim;
    a.m = n;
    a.pos = pos_.as<int32_t>();
    a.rope = w_->rope;
    a.k_cache = cache.k(layer);
    a.v_cache = cache.v(layer);
    a.ld_cache = cache.row_elems();
    be_.rope_qk_store_kv(a);
}

void forward_engine::attend_and_mlp(int layer, kv_cache& cache, int64_t n, int64_t n_keys,
                                    bool visible_keys_only) {
    const model_hparams& hp = m_.hparams();
    be_.rope(q_.as<float>(), n, hp.q_dim(), hp.n_head, hp.head_dim, pos_.as<int32_t>(), w_->rope);
    attend_roped_and_mlp(layer, cache, n, n_keys, visible_keys_only);
}

void forward_engine::attend_roped_and_mlp(int layer, kv_cache& cache, int64_t n, int64_t n_keys,
                                          bool visible_keys_only) {
    const model_hparams& hp = m_.hparams();
    const layer_weights& L = w_->layers[static_cast<size_t>(layer)];
    const int64_t E = hp.n_embd, QD = hp.q_dim(), FF = hp.n_ff;
    const int32_t* dpos = pos_.as<int32_t>();
    float* q = q_.as<float>();
    float* h = h_.as<float>();
    float* attn = attn_.as<float>();
    float* gate = gate_.as<float>();
    float* up = up_.as<float>();

    attention_args aa;
    aa.q = q;
    aa.n_q = n;
    aa.q_stride = QD;
    aa.q_pos = dpos;
    aa.k = cache.k(layer);
    aa.v = cache.v(layer);
    aa.kv_stride = cache.row_elems();
    aa.n_keys = n_keys;
    aa.visible_keys_only = visible_keys_only;
    aa.n_head = hp.n_head;
    aa.n_kv_head = hp.n_head_kv;
    aa.head_dim = hp.head_dim;
    aa.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    aa.out = attn;
    aa.out_stride = QD;
    be_.attention(aa);
    be_.matmul_add(L.wo, attn, n, QD, x(), E, h);  // the residual: x += W_o attn

    const pre_norm norm{L.ffn_norm, hp.rms_eps, h, E};
    be_.matmul_swiglu(L.w_gate, L.w_up, x(), n, E, gate, FF, up, &norm);
    be_.matmul_add(L.w_down, gate, n, FF, x(), E, h);
}

void forward_engine::logits_on_backend(int64_t row) {
    const model_hparams& hp = m_.hparams();
    const int64_t E = hp.n_embd;
    float* h = h_.as<float>();
    be_.rms_norm(x() + row * E, 1, E, E, w_->output_norm, hp.rms_eps, h, E);
    be_.matmul(w_->output, h, 1, E, logits_.as<float>(), hp.n_vocab, nullptr);
}

void forward_engine::logits(int64_t row, float* out) {
    logits_on_backend(row);
    be_.download(out, logits_.as<float>(),
                 static_cast<size_t>(m_.hparams().n_vocab) * sizeof(float));
}

void forward_engine::set_decode_recording(bool on) {
    decode_record_ = on;
    decode_off_why_ = on ? "" : "turned off";
    decode_replays_ = 0;
    if (!on) decode_rec_.reset();
}

void forward_engine::decode_ops(kv_cache& cache) {
    const model_hparams& hp = m_.hparams();
    be_.get_rows(w_->tok_embd, ids_.as<int32_t>(), 1, x(), hp.n_embd);
    for (int l = 0; l < hp.n_layer; ++l) {
        project_qkv(l, 1);
        rope_store_qkv(l, cache, 1);
        // The recording serves every position: keys by position up to the cache's size, of which
        // only the row's own and those before it (written by then) are read.
        attend_roped_and_mlp(l, cache, 1, cache.n_ctx(), true);
    }
    logits_on_backend(0);
}

bool forward_engine::decode_recorded(kv_cache& cache, token_id t, int32_t pos, float* out) {
    // What the recording names besides this engine's own buffers: the cache's rows and size.
    // Compared in place: this runs once per token.
    const int n_layer = m_.hparams().n_layer;
    const void* size_tag = reinterpret_cast<const void*>(static_cast<intptr_t>(cache.n_ctx()));
    bool same = decode_cache_.size() == 2 * static_cast<size_t>(n_layer) + 1 &&
                decode_cache_.back() == size_tag;
    for (int l = 0; same && l < n_layer; ++l) {
        same = decode_cache_[2 * size_t(l)] == cache.k(l) &&
               decode_cache_[2 * size_t(l) + 1] == cache.v(l);
    }
    if (!same) {
        decode_rec_.reset();
        decode_cache_.clear();
        for (int l = 0; l < n_layer; ++l) {
            decode_cache_.push_back(cache.k(l));
            decode_cache_.push_back(cache.v(l));
        }
        decode_cache_.push_back(size_tag);
        decode_warm_ = false;
    }
    if (!decode_warm_) {
        // This step runs op by op, the next one records: by then every kernel the step launches
        // has been loaded (CUDA loads modules lazily, which a capture may refuse) and every
        // buffer its ops use exists.
        decode_warm_ = true;
        return false;
    }
    if (!decode_rec_) {
        try {
            decode_rec_ = be_.record([&] { decode_ops(cache); });
        } catch (const error& e) {  // an op that cannot be recorded: run them one by one
            decode_off_why_ = e.what();
        } catch (const kernel_error& e) {  // the same from a backend without the adapter
            decode_off_why_ = e.what();
        }
        if (!decode_rec_) {
            if (decode_off_why_.empty()) decode_off_why_ = "the backend does not record";
            decode_record_ = false;
            return false;
        }
    }
    upload_tokens(&t, 1);
    set_positions(&pos, 1);
    decode_rec_->replay();
    be_.download(out, logits_.as<float>(),
                 static_cast<size_t>(m_.hparams().n_vocab) * sizeof(float));
    ++decode_replays_;
    return true;
}

void forward_engine::compact_rows(const int32_t* keep, int64_t m) {
    // One gather per buffer into a free one and one copy back, not a copy per moved row: on a GPU
    // every copy is a launch, and a blended prefill moves hundreds of rows. h and attn are free
    // between the check layer's projections and its attention. k and v are not moved: they were
    // stored into the cache before the check, and the next layer projects them anew.
    const model_hparams& hp = m_.hparams();
    if (m <= 0) return;
    be_.upload(ids_.as<int32_t>(), keep, static_cast<size_t>(m) * sizeof(int32_t));
    const int32_t* idx = ids_.as<int32_t>();
    auto move_rows = [&](float* base, int64_t width, float* tmp) {
        const size_t row = static_cast<size_t>(width) * sizeof(float);
        be_.gather_rows(base, row, idx, m, row, tmp, row);
        be_.copy(base, tmp, static_cast<size_t>(m) * row);
    };
    move_rows(x(), hp.n_embd, h_.as<float>());
    move_rows(q_.as<float>(), hp.q_dim(), attn_.as<float>());
    for (int64_t i = 0; i < m; ++i) host_pos_[static_cast<size_t>(i)] = host_pos_[static_cast<size_t>(keep[i])];
    be_.upload(pos_.as<int32_t>(), host_pos_.data(), static_cast<size_t>(m) * sizeof(int32_t));
}

void forward_engine::run(kv_cache& cache, const token_id* tokens, const int32_t* pos, int64_t n,
                         int64_t n_keys, float* out_logits, const kv_observer& observer) {
    const model_hparams& hp = m_.hparams();
    if (n_keys > cache.n_ctx()) {
        throw error(status::range, fmt("forward: %lld keys exceed the context of %d",
                                       (long long)n_keys, cache.n_ctx()));
    }
    for (int64_t i = 0; i < n; ++i) {
        if (pos[i] < 0 || pos[i] >= n_keys) {
            throw error(status::invalid_arg, fmt("forward: position %d outside [0, %lld)", pos[i],
                                                 (long long)n_keys));
        }
    }
    if (n == 1 && out_logits && !observer && decode_record_ &&
        decode_recorded(cache, tokens[0], pos[0], out_logits)) {
        return;
    }
    embed(tokens, n);
    set_positions(pos, n);
    for (int l = 0; l < hp.n_layer; ++l) {
        project_qkv(l, n);
        if (observer) observer(l, k(), v(), n);
        rope_store_qkv(l, cache, n);
        attend_roped_and_mlp(l, cache, n, n_keys);
    }
    if (out_logits) logits(n - 1, out_logits);
}

}  // namespace cacheblend
