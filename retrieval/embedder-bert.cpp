// The default embedder: a BERT sentence encoder (all-MiniLM-L6-v2) on our kernels.
//
// Long texts. sentence-transformers truncates all-MiniLM-L6-v2 input to max_seq_length = 256
// tokens ([CLS] + 254 word pieces + [SEP]); we embed every part of a longer text instead. A text of
// n > W = 254 pieces is cut into k = ceil((n - O) / (W - O)) windows of exactly W pieces with
// overlap O = 32, their starts spread evenly (start_i = floor(i * (n - W) / (k - 1)), so every
// overlap is >= O and the last window ends at the text's end). Each window gets its own
// [CLS]/[SEP] and is embedded like a short text (mean pooling, L2 normalization); the text's
// vector is the average of the window vectors weighted by their piece counts, renormalized.
// scripts/gen-embedder-fixtures.py applies the same rule to the reference model.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <mutex>

#include "core/engine/bert.h"
#include "core/engine/session.h"
#include "core/model/gguf.h"
#include "core/model/model-registry.h"
#include "core/tokenizer/wordpiece.h"
#include "core/util/error.h"
#include "retrieval/embedder.h"

namespace cacheblend {

namespace {

constexpr int32_t k_window_overlap = 32;
constexpr int64_t k_max_batch_tokens = 4096;  // bounds the scratch (FFN: tokens x n_ff floats)
constexpr const char* k_default_file = "all-MiniLM-L6-v2-f16.gguf";

class bert_embedder final : public embedder {
public:
    bert_embedder(const std::string& path, std::shared_ptr<backend> be)
        : file_(gguf_file::open(path)),
          tok_(wordpiece_tokenizer::from_gguf(*file_)),
          model_(file_),
          be_(std::move(be)) {
        const bert_hparams& hp = model_.hparams();
        if (file_->get_string("cacheblend.embedder.pooling").value_or("mean") != "mean") {
            throw error(status::unsupported, fmt("embedder: %s: only mean pooling is supported",
                                                 path.c_str()));
        }
        normalize_ = file_->get_bool("cacheblend.embedder.normalize").value_or(true);
        const int64_t max_seq = file_->get_int("cacheblend.embedder.max_seq_length")
                                    .value_or(hp.n_ctx);
        if (max_seq < 2 * k_window_overlap + 2 || max_seq > hp.n_ctx) {
            throw error(status::format, fmt("embedder: %s: max_seq_length %lld out of range",
                                            path.c_str(), (long long)max_seq));
        }
        if (tok_.n_vocab() > hp.n_vocab) {
            throw error(status::format, fmt("embedder: %s: vocabulary larger than token_embd",
                                            path.c_str()));
        }
        window_ = int32_t(max_seq) - 2;
        char hash[17];
        snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)file_->content_hash());
        id_ = fmt("bert:%s:%s%s:w%d-o%d:%s",
                  file_->get_string("general.name").value_or("unnamed").c_str(), "mean",
                  normalize_ ? "-norm" : "", window_, k_window_overlap, hash);
    }

    int32_t dim() const override { return model_.hparams().n_embd; }
    std::string id() const override { return id_; }

    void embed(const std::vector<std::string>& texts, std::vector<float>& out) override {
        const int64_t E = dim();
        out.assign(texts.size() * size_t(E), 0.f);
        struct piece_of {
            size_t text;
            float weight;
        };
        std::vector<std::vector<int32_t>> batch;
        std::vector<piece_of> owners;
        int64_t batch_tokens = 0;
        std::vector<float> vecs;
        std::vector<double> weight(texts.size(), 0.0);

        std::lock_guard<std::mutex> lock(mu_);
        auto flush = [&] {
            if (batch.empty()) return;
            vecs.resize(batch.size() * size_t(E));
            model_.encode_mean(*be_, batch, vecs.data(), normalize_);
            for (size_t i = 0; i < batch.size(); ++i) {
                float* o = out.data() + owners[i].text * size_t(E);
                const float* v = vecs.data() + i * size_t(E);
                for (int64_t j = 0; j < E; ++j) o[j] += owners[i].weight * v[j];
            }
            batch.clear();
            owners.clear();
            batch_tokens = 0;
        };
        std::vector<int32_t> pieces;
        for (size_t t = 0; t < texts.size(); ++t) {
            pieces.clear();
            tok_.encode(texts[t], pieces);
            const int64_t n = int64_t(pieces.size());
            const int64_t W = window_, O = k_window_overlap;
            const int64_t k = n <= W ? 1 : (n - O + (W - O) - 1) / (W - O);
            for (int64_t i = 0; i < k; ++i) {
                const int64_t start = k == 1 ? 0 : i * (n - W) / (k - 1);
                const int64_t len = std::min(W, n - start);
                std::vector<int32_t> seq;
                seq.reserve(size_t(len) + 2);
                seq.push_back(tok_.cls_id());
                seq.insert(seq.end(), pieces.begin() + start, pieces.begin() + start + len);
                seq.push_back(tok_.sep_id());
                if (batch_tokens + int64_t(seq.size()) > k_max_batch_tokens) flush();
                batch_tokens += int64_t(seq.size());
                batch.push_back(std::move(seq));
                owners.push_back({t, float(std::max<int64_t>(len, 1))});
                weight[t] += owners.back().weight;
            }
        }
        flush();
        // Weighted mean of the window vectors, renormalized (one window: its own vector).
        for (size_t t = 0; t < texts.size(); ++t) {
            float* o = out.data() + t * size_t(E);
            double norm = 0;
            for (int64_t j = 0; j < E; ++j) norm += double(o[j]) * o[j];
            const double scale = normalize_ ? 1.0 / std::max(std::sqrt(norm), 1e-12)
                                            : 1.0 / std::max(weight[t], 1e-12);
            for (int64_t j = 0; j < E; ++j) o[j] = float(o[j] * scale);
        }
    }

private:
    std::shared_ptr<const gguf_file> file_;
    wordpiece_tokenizer tok_;
    bert_model model_;
    std::shared_ptr<backend> be_;  // the runtime's CPU backend (its thread pool), or our own
    std::mutex mu_;                // one batch at a time on be_ and model_'s scratch
    bool normalize_ = true;
    int32_t window_ = 254;
    std::string id_;
};

}  // namespace

std::string default_embedder_path() {
    if (const char* m = std::getenv("CBL_EMBED_MODEL"); m && *m) return m;
    return model_cache_dir() + "/" + k_default_file;
}

std::unique_ptr<embedder> load_bert_embedder(const std::string& path, int32_t n_threads) {
    return load_bert_embedder(path,
                              std::shared_ptr<backend>(
                                  open_backend("cpu", n_threads > 0 ? n_threads
                                                                    : default_thread_count())));
}

std::unique_ptr<embedder> load_bert_embedder(const std::string& path, std::shared_ptr<backend> be) {
    if (!be) throw error(status::invalid_arg, "embedder: no backend");
    return std::make_unique<bert_embedder>(path, std::move(be));
}

}  // namespace cacheblend
