// The default embedder against the reference (tests/data/embedder-fixtures.json, written by
// scripts/gen-embedder-fixtures.py with sentence-transformers): word-piece ids identical and
// cosine >= 0.999 per text, long texts included (windowed on both sides by the same rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/model/gguf.h"
#include "core/tokenizer/wordpiece.h"
#include "retrieval/embedder.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using namespace cacheblend;

const cbltest::json& fixtures() {
    static const cbltest::json j =
        cbltest::load_json_file(std::string(CBL_TEST_DATA_DIR) + "/embedder-fixtures.json");
    return j;
}

std::vector<std::string> fixture_texts() {
    std::vector<std::string> t;
    for (const auto& e : fixtures()["texts"].arr) t.push_back(e["text"].str);
    return t;
}

double cosine(const float* a, const std::vector<double>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        ab += a[i] * b[i];
        aa += double(a[i]) * a[i];
        bb += b[i] * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

TEST(Embedder, TokenIdsMatchReference) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(path);
    auto f = gguf_file::open(path);
    const wordpiece_tokenizer tok = wordpiece_tokenizer::from_gguf(*f);
    EXPECT_EQ(tok.cls_id(), fixtures()["cls_id"].as_int());
    EXPECT_EQ(tok.sep_id(), fixtures()["sep_id"].as_int());
    int mismatches = 0;
    for (const auto& e : fixtures()["texts"].arr) {
        std::vector<int32_t> want;
        for (const auto& v : e["ids"].arr) want.push_back(int32_t(v.as_int()));
        const std::vector<int32_t> got = tok.encode(e["text"].str);
        if (got != want) {
            ++mismatches;
            std::string g, w;
            for (int32_t id : got) g += " " + std::to_string(id);
            for (int32_t id : want) w += " " + std::to_string(id);
            ADD_FAILURE() << "text: " << e["text"].str << "\n got:" << g << "\nwant:" << w;
        }
    }
    EXPECT_EQ(mismatches, 0);
}

TEST(Embedder, VectorsMatchReference) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(path);
    auto emb = load_bert_embedder(path, 2);
    ASSERT_EQ(emb->dim(), 384);
    const std::vector<std::string> texts = fixture_texts();
    std::vector<float> out;
    emb->embed(texts, out);
    ASSERT_EQ(out.size(), texts.size() * 384);
    double min_cos = 1;
    for (size_t i = 0; i < texts.size(); ++i) {
        const auto& e = fixtures()["texts"][i];
        std::vector<double> want;
        for (const auto& v : e["vector"].arr) want.push_back(v.num);
        ASSERT_EQ(want.size(), 384u);
        const double c = cosine(out.data() + i * 384, want);
        min_cos = std::min(min_cos, c);
        EXPECT_GE(c, 0.999) << "text " << i << ": " << texts[i];
        double norm = 0;
        for (size_t j = 0; j < 384; ++j) norm += double(out[i * 384 + j]) * out[i * 384 + j];
        EXPECT_NEAR(norm, 1.0, 1e-4);
    }
    RecordProperty("min_cosine", std::to_string(min_cos));
    std::printf("embedder: %zu texts, min cosine vs reference %.7f\n", texts.size(), min_cos);
}

TEST(Embedder, BatchingDoesNotChangeVectors) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(path);
    auto emb = load_bert_embedder(path, 2);
    const std::vector<std::string> texts = fixture_texts();
    std::vector<float> all, one;
    emb->embed(texts, all);
    // Short texts alone take the matmul's GEMV path (activations rounded to the weight type),
    // batches the GEMM path: equal up to rounding.
    for (size_t i : {size_t(1), size_t(7), texts.size() - 1}) {
        emb->embed({texts[i]}, one);
        std::vector<double> ref(all.begin() + long(i * 384), all.begin() + long(i * 384 + 384));
        EXPECT_GE(cosine(one.data(), ref), 0.99999) << i;
    }
    std::vector<float> none;
    emb->embed({}, none);
    EXPECT_TRUE(none.empty());
}

TEST(Embedder, IdIsStableAndNamesTheModel) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(path);
    auto a = load_bert_embedder(path, 1);
    auto b = load_bert_embedder(path, 2);
    EXPECT_EQ(a->id(), b->id());
    EXPECT_NE(a->id().find("all-MiniLM-L6-v2"), std::string::npos) << a->id();
    EXPECT_NE(a->id().find("mean"), std::string::npos) << a->id();
}

TEST(Embedder, SimilarTextsAreCloser) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(path);
    auto emb = load_bert_embedder(path, 2);
    std::vector<float> v;
    emb->embed({"How do I change my password?", "Steps to reset a forgotten password",
                "The recipe needs two cups of flour."},
               v);
    auto dot = [&](int i, int j) {
        double s = 0;
        for (int k = 0; k < 384; ++k) s += double(v[size_t(i * 384 + k)]) * v[size_t(j * 384 + k)];
        return s;
    };
    EXPECT_GT(dot(0, 1), dot(0, 2) + 0.2);
}

// Informative: texts/s and tokens/s for 256-token texts on 2 threads.
TEST(Embedder, Throughput) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(path);
    auto emb = load_bert_embedder(path, 2);
    auto f = gguf_file::open(path);
    const wordpiece_tokenizer tok = wordpiece_tokenizer::from_gguf(*f);
    // 254 word pieces -> 256 tokens with [CLS]/[SEP].
    std::string base = fixtures()["texts"][fixtures()["texts"].size() - 2]["text"].str;
    std::string text;
    for (const char* p = base.c_str(); *p; ++p) {
        text += *p;
        if (*p == ' ' && tok.encode(text).size() >= 254) break;
    }
    while (tok.encode(text).size() > 254) text.pop_back();
    const size_t n_pieces = tok.encode(text).size();
    const std::vector<std::string> texts(32, text);
    std::vector<float> out;
    emb->embed({text}, out);  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    emb->embed(texts, out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tokens = double(texts.size() * (n_pieces + 2));
    std::printf("embedder throughput (2 threads): %zu texts x %zu tokens in %.3f s: %.1f texts/s, "
                "%.0f tokens/s\n", texts.size(), n_pieces + 2, s, texts.size() / s, tokens / s);
    RecordProperty("texts_per_s", std::to_string(texts.size() / s));
}

}  // namespace
