// Sentence embedder interface used by retrieval: text -> L2-normalized float vector. The default
// implementation runs a BERT-family model (all-MiniLM-L6-v2 class) on our own engine
// (retrieval/embedder-bert.cpp); applications may also pass their own vectors instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/backend.h"

namespace cacheblend {

class embedder {
public:
    virtual ~embedder() = default;
    virtual int32_t dim() const = 0;
    // A stable identifier of the model and pooling (stored in the catalog: vectors from another
    // embedder are never mixed into one index).
    virtual std::string id() const = 0;
    // One normalized vector per text, written to out[i * dim() .. (i+1) * dim()).
    // Texts longer than the encoder's window are embedded in windows and pooled.
    virtual void embed(const std::vector<std::string>& texts, std::vector<float>& out) = 0;
};

// ${CBL_EMBED_MODEL} or ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models/<default embedder file>
std::string default_embedder_path();

// Loads the BERT embedder from a GGUF converted by scripts/convert-embedder.py; it runs on a CPU
// backend of its own with n_threads (0: default_thread_count()).
std::unique_ptr<embedder> load_bert_embedder(const std::string& path, int32_t n_threads = 0);
// The same on a given host-memory backend (the runtime's), shared with its owner: the embedder
// runs one batch at a time on it.
std::unique_ptr<embedder> load_bert_embedder(const std::string& path, std::shared_ptr<backend> be);

}  // namespace cacheblend
