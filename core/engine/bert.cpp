#include "core/engine/bert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/util/error.h"
#include "kernels/fp16.h"

namespace cacheblend {

namespace {

struct bert_layer {
    weight_view q, k, v, o, up, down;
    const float *bq, *bk, *bv, *bo, *bup, *bdown;
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
};

}  // namespace

struct bert_model::impl {
    std::shared_ptr<const gguf_file> file;
    bert_hparams hp;
    weight_view tok_embd, pos_embd;
    std::vector<float> type0;  // token type 0 embedding row
    const float *embd_ln_w = nullptr, *embd_ln_b = nullptr;
    std::vector<bert_layer> layers;
    // f32 copies of f16 vectors (moving a vector keeps its buffer, so pointers stay valid).
    std::vector<std::vector<float>> converted;

    // Scratch, grown to the largest batch seen. type_rows: type0 repeated once per row, so the
    // backend's add_rows adds it (the same float additions as a per-row loop).
    std::vector<float> x, q, k, v, att, tmp, ff, type_rows;
    std::vector<int32_t> ids, pos, seq_start;

    void pack(const std::vector<std::vector<int32_t>>& seqs);
    void grow(int64_t T);
    void embed(backend& be, int64_t T);
    void run_layer(backend& be, const bert_layer& L, const encoder_attention_args& aa, int64_t T);
    void mean_pool(int n_seq, float* out, bool normalize) const;
};

bert_model::bert_model(std::shared_ptr<const gguf_file> file) : impl_(std::make_unique<impl>()) {
    impl& m = *impl_;
    m.file = std::move(file);
    const gguf_file& f = *m.file;
    const std::string& path = f.path();
    auto fail = [&](const std::string& what) {
        return error(status::format, fmt("bert: %s: %s", path.c_str(), what.c_str()));
    };
    if (f.get_string("general.architecture").value_or("") != "bert") {
        throw fail("general.architecture is not 'bert'");
    }
    auto hp_int = [&](const char* key, int64_t lo, int64_t hi) -> int32_t {
        auto v = f.get_int(key);
        if (!v) throw fail(std::string("missing ") + key);
        if (*v < lo || *v > hi) throw fail(fmt("%s = %lld out of range", key, (long long)*v));
        return int32_t(*v);
    };
    bert_hparams& hp = m.hp;
    hp.n_ctx = hp_int("bert.context_length", 2, 1 << 16);
    hp.n_embd = hp_int("bert.embedding_length", 1, 1 << 16);
    hp.n_ff = hp_int("bert.feed_forward_length", 1, 1 << 18);
    hp.n_layer = hp_int("bert.block_count", 1, 1024);
    hp.n_head = hp_int("bert.attention.head_count", 1, 1024);
    hp.eps = float(f.get_float("bert.attention.layer_norm_epsilon").value_or(1e-12));
    if (hp.n_embd % hp.n_head != 0) throw fail("embedding_length is not a multiple of head_count");
    if (f.get_bool("bert.attention.causal").value_or(false)) throw fail("causal BERT unsupported");

    auto tensor = [&](const std::string& name) -> const gguf_tensor& {
        const gguf_tensor* t = f.find_tensor(name);
        if (!t) throw fail("missing tensor '" + name + "'");
        return *t;
    };
    auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) -> weight_view {
        const gguf_tensor& t = tensor(name);
        if (t.n_dims != 2 || t.ne[0] != cols || (rows >= 0 && t.ne[1] != rows)) {
            throw fail(fmt("tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]",
                           name.c_str(), (long long)t.ne[0], (long long)t.ne[1], (long long)cols,
                           (long long)rows));
        }
        const dtype_traits* tr = dtype_info(t.type);
        if (!tr || t.type == dtype::q8_1 || t.type == dtype::q8_k || cols % tr->block_elems != 0) {
            throw fail(fmt("tensor '%s' has unsupported type %s", name.c_str(),
                           dtype_name(t.type)));
        }
        weight_view w;
        w.type = t.type;
        w.data = t.data;
        w.rows = t.ne[1];
        w.cols = cols;
        w.row_bytes = dtype_row_bytes(t.type, cols);
        return w;
    };
    // A 1-D tensor of n floats, or the first row of a 2-D one when rows_ok.
    auto vec = [&](const std::string& name, int64_t n, bool rows_ok = false) -> const float* {
        const gguf_tensor& t = tensor(name);
        if (t.ne[0] != n || (!rows_ok && t.n_elements() != n)) {
            throw fail(fmt("tensor '%s' has %lld elements, expected %lld", name.c_str(),
                           (long long)t.n_elements(), (long long)n));
        }
        if (t.type == dtype::f32) return reinterpret_cast<const float*>(t.data);
        if (t.type != dtype::f16) throw fail("tensor '" + name + "' must be f32 or f16");
        std::vector<float> c(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, t.data + 2 * i, 2);
            c[size_t(i)] = fp16_to_fp32(h);
        }
        m.converted.push_back(std::move(c));
        return m.converted.back().data();
    };

    const int64_t E = hp.n_embd, F = hp.n_ff;
    m.tok_embd = matrix("token_embd.weight", E, -1);
    hp.n_vocab = int32_t(std::min<int64_t>(m.tok_embd.rows, INT32_MAX));
    m.pos_embd = matrix("position_embd.weight", E, -1);
    if (m.pos_embd.rows < hp.n_ctx) throw fail("position_embd has fewer rows than context_length");
    const gguf_tensor& types = tensor("token_types.weight");
    if (types.ne[0] != E || types.n_dims > 2) throw fail("token_types.weight has a bad shape");
    hp.n_token_types = int32_t(types.ne[1]);
    const float* types_data = vec("token_types.weight", E, true);
    m.type0.assign(types_data, types_data + E);
    m.embd_ln_w = vec("token_embd_norm.weight", E);
    m.embd_ln_b = vec("token_embd_norm.bias", E);
    for (int l = 0; l < hp.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        bert_layer L;
        L.q = matrix(b + "attn_q.weight", E, E);
        L.k = matrix(b + "attn_k.weight", E, E);
        L.v = matrix(b + "attn_v.weight", E, E);
        L.o = matrix(b + "attn_output.weight", E, E);
        L.up = matrix(b + "ffn_up.weight", E, F);
        L.down = matrix(b + "ffn_down.weight", F, E);
        L.bq = vec(b + "attn_q.bias", E);
        L.bk = vec(b + "attn_k.bias", E);
        L.bv = vec(b + "attn_v.bias", E);
        L.bo = vec(b + "attn_output.bias", E);
        L.bup = vec(b + "ffn_up.bias", F);
        L.bdown = vec(b + "ffn_down.bias", E);
        L.ln1_w = vec(b + "attn_output_norm.weight", E);
        L.ln1_b = vec(b + "attn_output_norm.bias", E);
        L.ln2_w = vec(b + "layer_output_norm.weight", E);
        L.ln2_b = vec(b + "layer_output_norm.bias", E);
        m.layers.push_back(L);
    }
}

bert_model::~bert_model() = default;

const bert_hparams& bert_model::hparams() const { return impl_->hp; }

// Token ids back to back, their positions within their sequence, and where each sequence starts.
void bert_model::impl::pack(const std::vector<std::vector<int32_t>>& seqs) {
    ids.clear();
    pos.clear();
    seq_start.assign(1, 0);
    for (const auto& s : seqs) {
        if (s.empty() || int64_t(s.size()) > hp.n_ctx) {
            throw error(status::invalid_arg, fmt("bert: sequence of %zu tokens (1..%d allowed)",
                                                 s.size(), hp.n_ctx));
        }
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] < 0 || s[i] >= hp.n_vocab) {
                throw error(status::invalid_arg, fmt("bert: token id %d out of range", s[i]));
            }
            ids.push_back(s[i]);
            pos.push_back(int32_t(i));
        }
        seq_start.push_back(int32_t(ids.size()));
    }
}

void bert_model::impl::grow(int64_t T) {
    const int64_t E = hp.n_embd;
    auto grow_to = [](std::vector<float>& v, int64_t n) {
        if (int64_t(v.size()) < n) v.resize(size_t(n));
    };
    for (std::vector<float>* b : {&x, &q, &k, &v, &att, &tmp}) grow_to(*b, T * E);
    grow_to(ff, T * hp.n_ff);
    const int64_t have = int64_t(type_rows.size()) / E;
    if (have < T) {
        type_rows.resize(size_t(T * E));
        for (int64_t i = have; i < T; ++i) {
            std::copy(type0.begin(), type0.end(), type_rows.begin() + i * E);
        }
    }
}

// Embeddings: word + position + token type 0, then LayerNorm.
void bert_model::impl::embed(backend& be, int64_t T) {
    const int64_t E = hp.n_embd;
    be.get_rows(tok_embd, ids.data(), T, x.data(), E);
    be.get_rows(pos_embd, pos.data(), T, tmp.data(), E);
    be.add_rows(x.data(), tmp.data(), T, E, E);
    be.add_rows(x.data(), type_rows.data(), T, E, E);
    be.layer_norm(x.data(), T, E, E, embd_ln_w, embd_ln_b, hp.eps, x.data(), E);
}

void bert_model::impl::run_layer(backend& be, const bert_layer& L, const encoder_attention_args& aa,
                                 int64_t T) {
    const int64_t E = hp.n_embd, F = hp.n_ff;
    float* h = x.data();
    float* t = tmp.data();
    be.matmul(L.q, h, T, E, q.data(), E, L.bq);
    be.matmul(L.k, h, T, E, k.data(), E, L.bk);
    be.matmul(L.v, h, T, E, v.data(), E, L.bv);
    be.encoder_attention(aa);
    be.matmul(L.o, att.data(), T, E, t, E, L.bo);
    be.add_rows(t, h, T, E, E);
    be.layer_norm(t, T, E, E, L.ln1_w, L.ln1_b, hp.eps, h, E);
    be.matmul(L.up, h, T, E, ff.data(), F, L.bup);
    be.gelu_erf(ff.data(), T, F, F);
    be.matmul(L.down, ff.data(), T, F, t, E, L.bdown);
    be.add_rows(t, h, T, E, E);
    be.layer_norm(t, T, E, E, L.ln2_w, L.ln2_b, hp.eps, h, E);
}

// Mean pooling over every token of the sequence ([CLS] and [SEP] included, as the attention
// mask covers them), then L2 normalization. A few additions per element of x: no thread pool.
void bert_model::impl::mean_pool(int n_seq, float* out, bool normalize) const {
    const int64_t E = hp.n_embd;
    std::vector<double> acc(static_cast<size_t>(E));
    for (int64_t s = 0; s < n_seq; ++s) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const int64_t r0 = seq_start[size_t(s)], r1 = seq_start[size_t(s) + 1];
        for (int64_t r = r0; r < r1; ++r) {
            for (int64_t j = 0; j < E; ++j) acc[size_t(j)] += x[size_t(r * E + j)];
        }
        double norm = 0;
        for (int64_t j = 0; j < E; ++j) {
            acc[size_t(j)] /= double(r1 - r0);
            norm += acc[size_t(j)] * acc[size_t(j)];
        }
        // torch.nn.functional.normalize's eps keeps an all-zero vector at zero.
        const double inv = normalize ? 1.0 / std::max(std::sqrt(norm), 1e-12) : 1.0;
        for (int64_t j = 0; j < E; ++j) out[s * E + j] = float(acc[size_t(j)] * inv);
    }
}

void bert_model::encode_mean(backend& be, const std::vector<std::vector<int32_t>>& seqs, float* out,
                             bool normalize) {
    if (!be.host_memory()) {
        throw error(status::unsupported, fmt("bert: backend '%s': the encoder's weights and "
                                             "scratch are host memory (use the cpu backend)",
                                             be.name()));
    }
    impl& m = *impl_;
    const int n_seq = int(seqs.size());
    if (n_seq == 0) return;
    m.pack(seqs);
    const int64_t T = int64_t(m.ids.size());
    m.grow(T);
    m.embed(be, T);

    const int64_t E = m.hp.n_embd;
    encoder_attention_args aa;
    aa.q = m.q.data();
    aa.k = m.k.data();
    aa.v = m.v.data();
    aa.q_stride = aa.kv_stride = aa.out_stride = E;
    aa.seq_start = m.seq_start.data();
    aa.n_seq = n_seq;
    aa.n_head = m.hp.n_head;
    aa.head_dim = int(E / m.hp.n_head);
    aa.scale = 1.f / std::sqrt(float(aa.head_dim));
    aa.out = m.att.data();
    for (const bert_layer& L : m.layers) m.run_layer(be, L, aa, T);
    m.mean_pool(n_seq, out, normalize);
}

}  // namespace cacheblend
