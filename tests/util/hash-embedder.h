// A deterministic test-only embedder: hashed bag of lower-cased words (FNV-1a into dim buckets,
// L2-normalized). Texts sharing words get similar vectors, which is all retrieval tests need
// until the BERT embedder is available.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "retrieval/embedder.h"

namespace cbltest {

class hash_embedder : public cacheblend::embedder {
public:
    explicit hash_embedder(int32_t dim = 64, std::string id = "test-hash-bow")
        : dim_(dim), id_(std::move(id)) {}
    int32_t dim() const override { return dim_; }
    std::string id() const override { return id_ + "-" + std::to_string(dim_); }
    void embed(const std::vector<std::string>& texts, std::vector<float>& out) override {
        out.assign(texts.size() * static_cast<size_t>(dim_), 0.0f);
        for (size_t t = 0; t < texts.size(); ++t) {
            float* v = out.data() + t * static_cast<size_t>(dim_);
            uint32_t h = 2166136261u;
            bool in_word = false;
            const auto flush = [&] {
                if (in_word) v[h % static_cast<uint32_t>(dim_)] += 1.0f;
                h = 2166136261u;
                in_word = false;
            };
            for (char c : texts[t]) {
                if (std::isalnum(static_cast<unsigned char>(c))) {
                    h = (h ^ static_cast<uint8_t>(std::tolower(static_cast<unsigned char>(c)))) *
                        16777619u;
                    in_word = true;
                } else {
                    flush();
                }
            }
            flush();
            double s = 0;
            for (int32_t i = 0; i < dim_; ++i) s += v[i] * v[i];
            if (s == 0) v[0] = 1.0f;  // empty text: any unit vector
            const float inv = s > 0 ? static_cast<float>(1.0 / std::sqrt(s)) : 1.0f;
            for (int32_t i = 0; i < dim_; ++i) v[i] *= inv;
        }
        ++calls;
    }
    int calls = 0;

private:
    int32_t dim_;
    std::string id_;
};

// A whitespace "tokenizer" for chunker tests: one token per word (id = word length).
inline std::vector<int32_t> word_tokens(std::string_view s) {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        const size_t b = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i > b) out.push_back(static_cast<int32_t>(i - b));
    }
    return out;
}

}  // namespace cbltest
