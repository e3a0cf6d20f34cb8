// A loaded Llama-family model: hyperparameters and weight views from GGUF (weights stay in their
// GGUF types inside the mmap), the tokenizer and the chat format. Immutable after load, so one
// model is shared by any number of sessions and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/gguf.h"
#include "core/prompt/chat-template.h"
#include "core/tokenizer/tokenizer.h"
#include "kernels/ops-types.h"

namespace cacheblend {

enum class model_arch { llama, qwen2 };

struct model_hparams {
    model_arch arch = model_arch::llama;
    std::string arch_name;
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim = 0;
    int32_t n_ff = 0;
    float rms_eps = 1e-5f;
    rope_params rope;  // freq_factors points into the model when present

    int32_t kv_dim() const { return n_head_kv * head_dim; }
    int32_t q_dim() const { return n_head * head_dim; }
};

struct layer_weights {
    const float* attn_norm = nullptr;  // [n_embd]
    weight_view wq, wk, wv, wo;
    const float* bq = nullptr;         // optional biases (qwen2), nullptr when absent
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* ffn_norm = nullptr;   // [n_embd]
    weight_view w_gate, w_up, w_down;
};

struct model_load_params {
    bool vocab_only = false;  // tokenizer only (vocabulary GGUFs without tensors)
};

class model {
public:
    // Throws cacheblend::error with a message naming the file and the offending key or tensor.
    static std::shared_ptr<const model> load(const std::string& path,
                                             const model_load_params& params = {});
    ~model();

    const model_hparams& hparams() const { return hp_; }
    const tokenizer& vocab() const { return *tok_; }
    const gguf_file& file() const { return *file_; }
    const std::vector<layer_weights>& layers() const { return layers_; }
    const weight_view& tok_embd() const { return tok_embd_; }
    const weight_view& output() const { return output_; }  // == tok_embd when tied
    const float* output_norm() const { return output_norm_; }
    chat_format chat() const { return chat_; }
    bool vocab_only() const { return vocab_only_; }
    // Changes whenever weights, tokenizer or the engine's numerics change (KV store keys).
    uint64_t fingerprint() const { return fingerprint_; }
    const std::string& name() const { return name_; }

private:
    model() = default;
    std::unique_ptr<gguf_file> file_;
    std::unique_ptr<tokenizer> tok_;
    model_hparams hp_;
    std::vector<layer_weights> layers_;
    weight_view tok_embd_, output_;
    const float* output_norm_ = nullptr;
    std::vector<std::vector<float>> owned_f32_;  // norms / biases converted from f16/bf16
    chat_format chat_ = chat_format::unknown;
    bool vocab_only_ = false;
    uint64_t fingerprint_ = 0;
    std::string name_;
};

// Bumped whenever a kernel change alters computed values (invalidates stored KV).
constexpr uint32_t k_numerics_version = 2;  // 2: llama.cpp-exact AVX-512 numerics

// The file an empty model path loads: $CBL_MODEL (a path or a registry name), else the default
// model's file in the cache (core/model/model-registry.h). It may not exist.
std::string default_model_path();

// Loads the model at path, which may also be a registry name (resolve_model), or the default model
// when path is empty; a missing file is a one-line status::io error that names the path and, for a
// registry name, the fetch command and the cache folder.
std::shared_ptr<const model> load_model_or_default(const std::string& path,
                                                   const model_load_params& params = {});

}  // namespace cacheblend
