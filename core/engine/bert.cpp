#include "core/engine/bert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/util/error.h"
#include "kernels/cpu/encoder-ops.h"
#include "kernels/cpu/fp16.h"

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

    // Scratch, grown to the largest batch seen.
    std::vector<float> x, q, k, v, att, tmp, ff;
    std::vector<int32_t> ids, pos, seq_start;
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

void bert_model::encode_mean(thread_pool& pool, const std::vector<std::vector<int32_t>>& seqs,
                             float* out, bool normalize) {
    impl& m = *impl_;
    const bert_hparams& hp = m.hp;
    const int64_t E = hp.n_embd, F = hp.n_ff;
    const int n_seq = int(seqs.size());
    if (n_seq == 0) return;

    m.ids.clear();
    m.pos.clear();
    m.seq_start.assign(1, 0);
    for (const auto& s : seqs) {
        if (s.empty() || int64_t(s.size()) > hp.n_ctx) {
            throw error(status::invalid_arg, fmt("bert: sequence of %zu tokens (1..%d allowed)",
                                                 s.size(), hp.n_ctx));
        }
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] < 0 || s[i] >= hp.n_vocab) {
                throw error(status::invalid_arg, fmt("bert: token id %d out of range", s[i]));
            }
            m.ids.push_back(s[i]);
            m.pos.push_back(int32_t(i));
        }
        m.seq_start.push_back(int32_t(m.ids.size()));
    }
    const int64_t T = int64_t(m.ids.size());
    auto grow = [](std::vector<float>& v, int64_t n) {
        if (int64_t(v.size()) < n) v.resize(size_t(n));
    };
    grow(m.x, T * E);
    grow(m.q, T * E);
    grow(m.k, T * E);
    grow(m.v, T * E);
    grow(m.att, T * E);
    grow(m.tmp, T * E);
    grow(m.ff, T * F);
    float *x = m.x.data(), *tmp = m.tmp.data();

    // Embeddings: word + position + token type 0, then LayerNorm.
    get_rows(pool, m.tok_embd, m.ids.data(), T, x, E);
    get_rows(pool, m.pos_embd, m.pos.data(), T, tmp, E);
    add_rows(pool, x, tmp, T, E, E);
    pool.parallel_for(T, 64, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            for (int64_t j = 0; j < E; ++j) x[i * E + j] += m.type0[size_t(j)];
        }
    });
    layer_norm(pool, x, T, E, E, m.embd_ln_w, m.embd_ln_b, hp.eps, x, E);

    encoder_attention_args aa;
    aa.q = m.q.data();
    aa.k = m.k.data();
    aa.v = m.v.data();
    aa.q_stride = aa.kv_stride = aa.out_stride = E;
    aa.seq_start = m.seq_start.data();
    aa.n_seq = n_seq;
    aa.n_head = hp.n_head;
    aa.head_dim = int(E / hp.n_head);
    aa.scale = 1.f / std::sqrt(float(aa.head_dim));
    aa.out = m.att.data();
    for (const bert_layer& L : m.layers) {
        matmul(pool, L.q, x, T, E, m.q.data(), E, L.bq);
        matmul(pool, L.k, x, T, E, m.k.data(), E, L.bk);
        matmul(pool, L.v, x, T, E, m.v.data(), E, L.bv);
        encoder_attention(pool, aa);
        matmul(pool, L.o, m.att.data(), T, E, tmp, E, L.bo);
        add_rows(pool, tmp, x, T, E, E);
        layer_norm(pool, tmp, T, E, E, L.ln1_w, L.ln1_b, hp.eps, x, E);
        matmul(pool, L.up, x, T, E, m.ff.data(), F, L.bup);
        gelu_erf(pool, m.ff.data(), T, F, F);
        matmul(pool, L.down, m.ff.data(), T, F, tmp, E, L.bdown);
        add_rows(pool, tmp, x, T, E, E);
        layer_norm(pool, tmp, T, E, E, L.ln2_w, L.ln2_b, hp.eps, x, E);
    }

    // Mean pooling over every token of the sequence ([CLS] and [SEP] included, as the attention
    // mask covers them), then L2 normalization.
    pool.parallel_for(n_seq, 1, [&](int64_t b, int64_t e) {
        std::vector<double> acc(static_cast<size_t>(E));
        for (int64_t s = b; s < e; ++s) {
            std::fill(acc.begin(), acc.end(), 0.0);
            const int64_t r0 = m.seq_start[size_t(s)], r1 = m.seq_start[size_t(s) + 1];
            for (int64_t r = r0; r < r1; ++r) {
                for (int64_t j = 0; j < E; ++j) acc[size_t(j)] += x[r * E + j];
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
    });
}

}  // namespace cacheblend
