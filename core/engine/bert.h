// BERT encoder on a compute backend (sentence embedders: all-MiniLM-L6-v2 class), loaded from the
// GGUF written by scripts/convert-embedder.py (llama.cpp's BERT tensor names). Sequences are
// packed back to back (no padding): the matmuls see every token of the batch as one matrix and
// attention runs per sequence, which is what a padded batch with an attention mask computes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/engine/backend.h"
#include "core/model/gguf.h"

namespace cacheblend {

struct bert_hparams {
    int32_t n_vocab = 0;
    int32_t n_ctx = 0;         // position embeddings
    int32_t n_embd = 0;
    int32_t n_ff = 0;
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_token_types = 0;
    float eps = 1e-12f;
};

class bert_model {
public:
    // Validates hyper-parameters and every tensor's type and shape. Keeps `file` alive (weights
    // are views into its mapping). Throws cacheblend::error (status::format).
    explicit bert_model(std::shared_ptr<const gguf_file> file);
    ~bert_model();

    const bert_hparams& hparams() const;

    // Runs the encoder over `seqs` (token ids with [CLS]/[SEP] already added, each 1..n_ctx long,
    // token type 0) and writes the mean of each sequence's last hidden states to
    // out[s * n_embd ..]; L2-normalized when `normalize`. Not thread-safe (scratch buffers).
    // The ops run on `be` (its thread pool); the weights and scratch are host memory, so `be`
    // must be a host-memory backend (the CPU): status::unsupported otherwise.
    void encode_mean(backend& be, const std::vector<std::vector<int32_t>>& seqs, float* out,
                     bool normalize);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace cacheblend
