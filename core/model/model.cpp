#include "core/model/model.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/model/model-registry.h"
#include "core/util/error.h"
#include "kernels/fp16.h"

namespace cacheblend {
namespace {

int32_t require_int(const gguf_file& f, const std::string& key) {
    auto v = f.get_int(key);
    if (!v) throw error(status::format, fmt("model: %s: missing key '%s'", f.path().c_str(), key.c_str()));
    if (*v <= 0 || *v > (1 << 30)) {
        throw error(status::format, fmt("model: %s: key '%s' = %lld out of range", f.path().c_str(),
                                        key.c_str(), static_cast<long long>(*v)));
    }
    return static_cast<int32_t>(*v);
}

int32_t optional_int(const gguf_file& f, const std::string& key, int32_t def) {
    return f.has(key) ? require_int(f, key) : def;
}

}  // namespace

std::shared_ptr<const model> load_model_or_default(const std::string& path,
                                                   const model_load_params& params) {
    const model_ref ref = resolve_model(path);
    const std::string& p = ref.path;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
        const int e = errno;
        if (e == ENOENT) throw error(status::io, missing_model_message(ref));
        throw error(status::io, "cannot access model file " + p + ": " + std::strerror(e));
    }
    if (S_ISDIR(st.st_mode)) throw error(status::io, p + " is a directory, not a GGUF file");
    return model::load(p, params);
}

std::string default_model_path() { return resolve_model("").path; }

model::~model() = default;

std::shared_ptr<const model> model::load(const std::string& path, const model_load_params& params) {
    std::shared_ptr<model> m(new model());
    m->file_ = gguf_file::open(path);
    const gguf_file& f = *m->file_;
    m->tok_ = tokenizer::from_gguf(f);
    m->name_ = f.get_string("general.name").value_or("");
    m->vocab_only_ = params.vocab_only;
    if (auto t = f.get_string("tokenizer.chat_template")) m->chat_ = detect_chat_format(*t);
    if (params.vocab_only) return m;

    model_hparams& hp = m->hp_;
    auto arch = f.get_string("general.architecture");
    if (!arch) throw error(status::format, fmt("model: %s: missing general.architecture", path.c_str()));
    hp.arch_name = *arch;
    if (*arch == "llama") {
        hp.arch = model_arch::llama;
    } else if (*arch == "qwen2") {
        hp.arch = model_arch::qwen2;
    } else {
        throw error(status::unsupported,
                    fmt("model: %s: architecture '%s' is not supported (llama, qwen2)", path.c_str(),
                        arch->c_str()));
    }
    const std::string a = *arch + ".";
    hp.n_ctx_train = require_int(f, a + "context_length");
    hp.n_embd = require_int(f, a + "embedding_length");
    hp.n_layer = require_int(f, a + "block_count");
    hp.n_ff = require_int(f, a + "feed_forward_length");
    hp.n_head = require_int(f, a + "attention.head_count");
    hp.n_head_kv = optional_int(f, a + "attention.head_count_kv", hp.n_head);
    if (hp.n_embd % hp.n_head != 0 || hp.n_head % hp.n_head_kv != 0) {
        throw error(status::format, fmt("model: %s: inconsistent heads (n_embd %d, n_head %d, n_head_kv %d)",
                                        path.c_str(), hp.n_embd, hp.n_head, hp.n_head_kv));
    }
    hp.head_dim = optional_int(f, a + "attention.key_length", hp.n_embd / hp.n_head);
    if (optional_int(f, a + "attention.value_length", hp.head_dim) != hp.head_dim || hp.head_dim % 2) {
        throw error(status::unsupported, fmt("model: %s: key/value head sizes differ or are odd", path.c_str()));
    }
    hp.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(
        hp.arch == model_arch::qwen2 ? 1e-6 : -1.0));
    if (!(hp.rms_eps > 0.f && hp.rms_eps < 1.f)) {
        throw error(status::format, fmt("model: %s: missing or bad rms epsilon", path.c_str()));
    }
    hp.rope.style = hp.arch == model_arch::llama ? rope_style::norm : rope_style::neox;
    hp.rope.n_dims = optional_int(f, a + "rope.dimension_count", hp.head_dim);
    if (hp.rope.n_dims != hp.head_dim) {
        throw error(status::unsupported, fmt("model: %s: partial rotary dims (%d of %d) unsupported",
                                             path.c_str(), hp.rope.n_dims, hp.head_dim));
    }
    hp.rope.freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
    const std::string scaling = f.get_string(a + "rope.scaling.type").value_or("none");
    double factor = f.get_float(a + "rope.scaling.factor").value_or(
        f.get_float(a + "rope.scale_linear").value_or(0.0));
    if (scaling == "linear" || scaling == "none") {
        hp.rope.freq_scale = factor > 0.0 ? static_cast<float>(1.0 / factor) : 1.f;
        if (scaling == "none") hp.rope.freq_scale = 1.f;
    } else {
        // YaRN / longrope change attention scaling in ways relocation must model; refuse clearly.
        throw error(status::unsupported, fmt("model: %s: rope scaling '%s' is not supported",
                                             path.c_str(), scaling.c_str()));
    }

    auto tensor = [&](const std::string& name, bool required) -> const gguf_tensor* {
        const gguf_tensor* t = f.find_tensor(name);
        if (!t && required) {
            throw error(status::format, fmt("model: %s: missing tensor '%s'", path.c_str(), name.c_str()));
        }
        return t;
    };
    auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) -> weight_view {
        const gguf_tensor* t = tensor(name, true);
        if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows) {
            throw error(status::format,
                        fmt("model: %s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]",
                            path.c_str(), name.c_str(), (long long)t->ne[0], (long long)t->ne[1],
                            (long long)cols, (long long)rows));
        }
        if (t->type == dtype::q8_1 || t->type == dtype::q8_k) {
            throw error(status::unsupported, fmt("model: %s: tensor '%s' has activation-only type %s",
                                                 path.c_str(), name.c_str(), dtype_name(t->type)));
        }
        weight_view w;
        w.type = t->type;
        w.data = t->data;
        w.rows = rows;
        w.cols = cols;
        w.row_bytes = dtype_row_bytes(t->type, cols);
        return w;
    };
    // Norm weights and biases as f32 vectors: used in place when F32, converted otherwise.
    auto vector = [&](const std::string& name, int64_t n, bool required) -> const float* {
        const gguf_tensor* t = tensor(name, required);
        if (!t) return nullptr;
        if (t->n_elements() != n || t->ne[0] != n) {
            throw error(status::format, fmt("model: %s: tensor '%s' has %lld elements, expected %lld",
                                            path.c_str(), name.c_str(), (long long)t->n_elements(),
                                            (long long)n));
        }
        if (t->type == dtype::f32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
            return reinterpret_cast<const float*>(t->data);
        }
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            switch (t->type) {
                case dtype::f32: std::memcpy(&v[i], t->data + 4 * i, 4); break;
                case dtype::f16: std::memcpy(&h, t->data + 2 * i, 2); v[i] = fp16_to_fp32(h); break;
                case dtype::bf16: std::memcpy(&h, t->data + 2 * i, 2); v[i] = bf16_to_fp32(h); break;
                default:
                    throw error(status::unsupported, fmt("model: %s: vector '%s' has type %s",
                                                         path.c_str(), name.c_str(), dtype_name(t->type)));
            }
        }
        m->owned_f32_.push_back(std::move(v));
        return m->owned_f32_.back().data();
    };

    const gguf_tensor* emb = tensor("token_embd.weight", true);
    hp.n_vocab = static_cast<int32_t>(emb->ne[1]);
    if (hp.n_vocab != m->tok_->n_vocab()) {
        throw error(status::format, fmt("model: %s: token_embd has %d rows but the vocabulary %d tokens",
                                        path.c_str(), hp.n_vocab, m->tok_->n_vocab()));
    }
    m->tok_embd_ = matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
    m->output_ = f.find_tensor("output.weight") ? matrix("output.weight", hp.n_embd, hp.n_vocab)
                                                 : m->tok_embd_;
    m->output_norm_ = vector("output_norm.weight", hp.n_embd, true);
    if (const gguf_tensor* rf = f.find_tensor("rope_freqs.weight")) {
        hp.rope.freq_factors = vector("rope_freqs.weight", hp.rope.n_dims / 2, true);
        (void)rf;
    }

    const bool qkv_bias = hp.arch == model_arch::qwen2;
    m->layers_.resize(static_cast<size_t>(hp.n_layer));
    for (int l = 0; l < hp.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        layer_weights& L = m->layers_[static_cast<size_t>(l)];
        L.attn_norm = vector(p + "attn_norm.weight", hp.n_embd, true);
        L.wq = matrix(p + "attn_q.weight", hp.n_embd, hp.q_dim());
        L.wk = matrix(p + "attn_k.weight", hp.n_embd, hp.kv_dim());
        L.wv = matrix(p + "attn_v.weight", hp.n_embd, hp.kv_dim());
        L.wo = matrix(p + "attn_output.weight", hp.q_dim(), hp.n_embd);
        L.bq = vector(p + "attn_q.bias", hp.q_dim(), qkv_bias);
        L.bk = vector(p + "attn_k.bias", hp.kv_dim(), qkv_bias);
        L.bv = vector(p + "attn_v.bias", hp.kv_dim(), qkv_bias);
        if (f.find_tensor(p + "attn_output.bias")) {
            throw error(status::unsupported, fmt("model: %s: attn_output bias unsupported", path.c_str()));
        }
        L.ffn_norm = vector(p + "ffn_norm.weight", hp.n_embd, true);
        L.w_gate = matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
        L.w_up = matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff);
        L.w_down = matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    }

    // Fingerprint: file content hash mixed with the numerics version and the arch shape.
    uint64_t h = f.content_hash() ^ (0x9e3779b97f4a7c15ULL * (k_numerics_version + 1));
    h ^= (static_cast<uint64_t>(hp.n_layer) << 32) ^ static_cast<uint64_t>(hp.kv_dim());
    m->fingerprint_ = h;
    return m;
}

}  // namespace cacheblend
