// WordPiece tokenizer (core/tokenizer/wordpiece.h) on a small synthetic vocabulary, plus
// llama.cpp's BERT (bge) vocabulary test vectors from ../shared when present (produced by HF
// tokenizers).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/model/gguf.h"
#include "core/tokenizer/wordpiece.h"
#include "core/util/error.h"
#include "util/gguf-writer.h"
#include "util/test-util.h"

namespace {

using namespace cacheblend;

const std::vector<std::string> k_vocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",                    // 0..4
    "hello", "world", "un", "##aff", "##able",                       // 5..9
    "!", ",", ".", "cafe", "a",                                      // 10..14
    "##b", "ab", "中", "国", "$",                                    // 15..19
    "i", "##s", "σ", "ς", "ᄒ",                                       // 20..24
    "##ᅡ", "##ᆫ", "e", "##e", "'",                                   // 25..29
};

wordpiece_tokenizer make(wordpiece_config cfg = {}) { return wordpiece_tokenizer(k_vocab, cfg); }

std::vector<int32_t> ids(std::initializer_list<int32_t> v) { return v; }

TEST(WordPiece, SpecialIds) {
    auto t = make();
    EXPECT_EQ(t.pad_id(), 0);
    EXPECT_EQ(t.unk_id(), 1);
    EXPECT_EQ(t.cls_id(), 2);
    EXPECT_EQ(t.sep_id(), 3);
    EXPECT_EQ(t.n_vocab(), int32_t(k_vocab.size()));
    EXPECT_EQ(t.find("##aff"), 8);
    EXPECT_EQ(t.find("nope"), -1);
}

TEST(WordPiece, GreedyLongestMatchWithContinuations) {
    auto t = make();
    EXPECT_EQ(t.encode("unaffable"), ids({7, 8, 9}));
    EXPECT_EQ(t.encode("Hello, World!"), ids({5, 11, 6, 10}));
    EXPECT_EQ(t.encode("ab"), ids({16}));  // longest first: "ab", not "a" "##b"
    EXPECT_EQ(t.encode("abb"), ids({16, 15}));
    // A word with an unmatched piece becomes one [UNK], its other pieces dropped.
    EXPECT_EQ(t.encode("unaffablex hello"), ids({1, 5}));
    EXPECT_EQ(t.encode(""), ids({}));
    EXPECT_EQ(t.encode(" \t\n "), ids({}));
}

TEST(WordPiece, MaxCharsPerWord) {
    wordpiece_config cfg;
    cfg.max_input_chars_per_word = 4;
    auto t = make(cfg);
    EXPECT_EQ(t.encode("abbb"), ids({16, 15, 15}));
    EXPECT_EQ(t.encode("abbbb"), ids({1}));
}

TEST(WordPiece, NormalizationLowerCaseAndAccents) {
    auto t = make();
    EXPECT_EQ(t.encode("CAFÉ"), ids({13}));         // É -> E + U+0301 -> e
    EXPECT_EQ(t.encode("cafe\u0301"), ids({13}));   // combining acute dropped
    EXPECT_EQ(t.encode("\u0130s"), ids({20, 21}));  // İ -> I + dot (dropped) -> i
    EXPECT_EQ(t.encode("\u03a3"), ids({22}));       // Σ -> σ (per codepoint, no final sigma)
    EXPECT_EQ(t.encode("\u03c2"), ids({23}));
    // Hangul syllables decompose into jamo (NFD).
    EXPECT_EQ(t.encode("\ud55c"), ids({24, 25, 26}));
    wordpiece_config keep;
    keep.lower_case = false;
    keep.strip_accents = false;
    auto u = make(keep);
    EXPECT_EQ(u.encode("Hello"), ids({1}));
    EXPECT_EQ(u.encode("caf\u00e9"), ids({1}));
}

TEST(WordPiece, PunctuationCjkAndControls) {
    auto t = make();
    EXPECT_EQ(t.encode("a$a"), ids({14, 19, 14}));  // ASCII symbol counts as punctuation
    EXPECT_EQ(t.encode("hello中国world"), ids({5, 17, 18, 6}));
    EXPECT_EQ(t.encode("hel\x01lo"), ids({5}));            // control removed
    EXPECT_EQ(t.encode("hel\u200blo"), ids({5}));          // format (Cf) removed
    EXPECT_EQ(t.encode("hello\u00a0world"), ids({5, 6}));  // NBSP is whitespace
    EXPECT_EQ(t.encode(std::string("hel\0lo", 6)), ids({5}));
    EXPECT_EQ(t.encode("hel\xfflo"), ids({5}));  // invalid UTF-8 -> U+FFFD -> removed
    EXPECT_EQ(t.encode("e'e"), ids({27, 29, 27}));
    EXPECT_EQ(t.pre_tokenize("Hello, 中x!"),
              (std::vector<std::string>{"hello", ",", "中", "x", "!"}));
}

TEST(WordPiece, SpecialTokensMatchedVerbatim) {
    auto t = make();
    EXPECT_EQ(t.encode("hello[MASK]world"), ids({5, 4, 6}));
    EXPECT_EQ(t.encode("[CLS] hello [SEP]"), ids({2, 5, 3}));
    EXPECT_EQ(t.encode("[mask]"), ids({1, 1, 1}));  // not special once lower-cased: [ mask ]
}

TEST(WordPiece, RejectsVocabularyWithoutSpecials) {
    EXPECT_THROW(wordpiece_tokenizer({"a", "b"}, wordpiece_config{}), cacheblend::error);
}

TEST(WordPiece, FromGguf) {
    cbltest::gguf_builder b;
    b.set_str("general.architecture", "bert");
    b.set_arr_str("tokenizer.ggml.tokens", k_vocab);
    b.set_u32("tokenizer.ggml.unknown_token_id", 1);
    b.set_u32("tokenizer.ggml.cls_token_id", 2);
    b.set_u32("tokenizer.ggml.seperator_token_id", 3);
    b.set_u32("tokenizer.ggml.padding_token_id", 0);
    b.set_str("tokenizer.wordpiece.subword_prefix", "##");
    b.set_bool("tokenizer.wordpiece.do_lower_case", false);
    b.set_u32("tokenizer.wordpiece.max_input_chars_per_word", 3);
    auto f = gguf_file::from_bytes(b.build().data(), b.build().size());
    auto t = wordpiece_tokenizer::from_gguf(*f);
    EXPECT_FALSE(t.config().lower_case);
    EXPECT_FALSE(t.config().strip_accents);  // follows lower case unless set
    EXPECT_EQ(t.encode("Hello abb"), ids({1, 16, 15}));
    EXPECT_EQ(t.encode("abbb"), ids({1}));

    b.set_u32("tokenizer.ggml.cls_token_id", 999);
    auto g = gguf_file::from_bytes(b.build().data(), b.build().size());
    EXPECT_THROW(wordpiece_tokenizer::from_gguf(*g), cacheblend::error);
}

TEST(WordPiece, FromLlamaCppPhantomSpaceVocab) {
    // llama.cpp's converter writes "\u2581word" for word starts and drops "##".
    cbltest::gguf_builder b;
    b.set_arr_str("tokenizer.ggml.tokens",
                  {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581he", "llo", "\u2581llo"});
    b.set_u32("tokenizer.ggml.unknown_token_id", 1);
    b.set_u32("tokenizer.ggml.cls_token_id", 2);
    b.set_u32("tokenizer.ggml.seperator_token_id", 3);
    b.set_u32("tokenizer.ggml.padding_token_id", 0);
    const std::vector<uint8_t> img = b.build();
    auto f = gguf_file::from_bytes(img.data(), img.size());
    auto t = wordpiece_tokenizer::from_gguf(*f);
    EXPECT_EQ(t.token(5), "##llo");
    EXPECT_EQ(t.encode("hello llo"), ids({4, 5, 6}));
}

// llama.cpp's tokenizer test vectors for bge-small-en-v1.5 (uncased BERT WordPiece), generated
// with HF tokenizers: NAME.gguf.inp holds inputs separated by "\n__ggml_vocab_test__\n", .out one
// line of ids per input (no [CLS]/[SEP]).
TEST(WordPiece, LlamaCppBgeVectors) {
    const std::string dir = cbltest::shared_dir();
    const std::string base = dir + "/peer-tests/llama-vocab/ggml-vocab-bert-bge.gguf";
    if (dir.empty() || !cbltest::file_exists(base) || !cbltest::file_exists(base + ".inp")) {
        GTEST_SKIP() << "llama.cpp bge vocab test vectors not present";
    }
    auto f = gguf_file::open(base);
    auto t = wordpiece_tokenizer::from_gguf(*f);
    std::ifstream in(base + ".inp", std::ios::binary), out(base + ".out");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < all.size();) {
        size_t e = all.find(sep, pos);
        if (e == std::string::npos) break;
        inputs.push_back(all.substr(pos, e - pos));
        pos = e + sep.size();
    }
    std::string line;
    size_t n = 0;
    for (const std::string& s : inputs) {
        ASSERT_TRUE(std::getline(out, line));
        std::vector<int32_t> want;
        std::istringstream ls(line);
        for (int32_t id; ls >> id;) want.push_back(id);
        EXPECT_EQ(t.encode(s), want) << "input: " << s;
        ++n;
    }
    EXPECT_GT(n, 30u);
}

}  // namespace
