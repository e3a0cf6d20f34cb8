// The tokenizer against llama.cpp's own test vectors (tests/test-tokenizer-0.cpp data:
// ../shared/peer-tests/llama-vocab/). Byte-exact ids with add_special = false, parse_special =
// false, as llama.cpp runs them. Skips when ../shared is absent (users do not have it).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/model/gguf.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// NAME.gguf.inp: strings separated by "\n__ggml_vocab_test__\n" (the file ends with one).
std::vector<std::string> read_inputs(const std::string& path) {
    const std::string text = slurp(path);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t pos = 0;
    for (size_t hit; (hit = text.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
        out.push_back(text.substr(pos, hit - pos));
    }
    if (pos < text.size()) out.push_back(text.substr(pos));
    return out;
}

// NAME.gguf.out: one line of space-separated ids per string.
std::vector<std::vector<token_id>> read_outputs(const std::string& path) {
    std::istringstream in(slurp(path));
    std::vector<std::vector<token_id>> out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        std::vector<token_id> ids;
        for (long v; ls >> v;) ids.push_back(token_id(v));
        out.push_back(std::move(ids));
    }
    return out;
}

std::string escaped(const std::string& s) {
    std::string r;
    for (unsigned char c : s) {
        if (c == '\n') {
            r += "\\n";
        } else if (c == '\t') {
            r += "\\t";
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            r += buf;
        } else {
            r += char(c);
        }
    }
    return r;
}

std::string join(const std::vector<token_id>& ids) {
    std::string r;
    for (token_id id : ids) r += " " + std::to_string(id);
    return r;
}

enum class round_trip {
    pieces,  // byte-level BPE: the concatenated pieces are the input bytes
    decode,  // decode(ids) == input (no clean-up of spaces; SPM drops its prefix space)
};

struct vocab_fixture {
    std::string dir;
    std::unique_ptr<gguf_file> file;
    std::unique_ptr<tokenizer> tok;
    std::vector<std::string> inputs;
    std::vector<std::vector<token_id>> outputs;
};

// Returns false (after GTEST_SKIP) when the data is not there.
bool load_vocab(const std::string& name, vocab_fixture& fx) {
    const std::string shared = cbltest::shared_dir();
    if (shared.empty()) return false;
    fx.dir = shared + "/peer-tests/llama-vocab/";
    const std::string base = fx.dir + "ggml-vocab-" + name + ".gguf";
    if (!cbltest::file_exists(base)) return false;
    fx.file = gguf_file::open(base);
    fx.tok = tokenizer::from_gguf(*fx.file);
    fx.inputs = read_inputs(base + ".inp");
    fx.outputs = read_outputs(base + ".out");
    return true;
}

void check_vocab(const std::string& name, const std::string& model, round_trip rt,
                 bool also_decode) {
    vocab_fixture fx;
    if (!load_vocab(name, fx)) GTEST_SKIP() << "llama.cpp vocab test data not found";
    EXPECT_EQ(fx.tok->model(), model);
    ASSERT_EQ(fx.inputs.size(), fx.outputs.size());
    ASSERT_EQ(fx.inputs.size(), 46u);

    int passed = 0;
    for (size_t i = 0; i < fx.inputs.size(); ++i) {
        const std::string& s = fx.inputs[i];
        const auto ids = fx.tok->encode(s, false, false);
        EXPECT_EQ(ids, fx.outputs[i]) << name << " case " << i << " '" << escaped(s)
                                      << "'\n  ours:     " << join(ids)
                                      << "\n  llama.cpp:" << join(fx.outputs[i]);
        if (ids == fx.outputs[i]) ++passed;

        // Round trip of llama.cpp's ids (independent of our encoder).
        if (rt == round_trip::pieces) {
            std::string pieces;
            for (token_id id : fx.outputs[i]) pieces += fx.tok->token_to_piece(id, true);
            EXPECT_EQ(pieces, s) << name << " case " << i;
        }
        if (rt == round_trip::decode || also_decode) {
            EXPECT_EQ(fx.tok->decode(fx.outputs[i], true), s) << name << " case " << i;
        }
    }
    std::printf("[ %-14s ] %d/%zu strings byte-exact with llama.cpp\n", name.c_str(), passed,
                fx.inputs.size());
    ::testing::Test::RecordProperty("passed", passed);
}

}  // namespace

TEST(TokenizerPeer, Gpt2) { check_vocab("gpt-2", "gpt2", round_trip::pieces, false); }
TEST(TokenizerPeer, Starcoder) { check_vocab("starcoder", "gpt2", round_trip::pieces, false); }
TEST(TokenizerPeer, Refact) { check_vocab("refact", "gpt2", round_trip::pieces, false); }
TEST(TokenizerPeer, LlamaSpm) { check_vocab("llama-spm", "llama", round_trip::decode, false); }
TEST(TokenizerPeer, Phi3) { check_vocab("phi-3", "llama", round_trip::decode, false); }
TEST(TokenizerPeer, DeepseekCoder) {
    check_vocab("deepseek-coder", "gpt2", round_trip::pieces, true);
}
TEST(TokenizerPeer, Falcon) { check_vocab("falcon", "gpt2", round_trip::pieces, false); }
TEST(TokenizerPeer, Mpt) { check_vocab("mpt", "gpt2", round_trip::pieces, false); }

TEST(TokenizerPeer, BertIsRejectedCleanly) {
    const std::string shared = cbltest::shared_dir();
    const std::string path = shared + "/peer-tests/llama-vocab/ggml-vocab-bert-bge.gguf";
    if (shared.empty() || !cbltest::file_exists(path)) GTEST_SKIP() << "no vocab test data";
    auto f = gguf_file::open(path);
    try {
        tokenizer::from_gguf(*f);
        FAIL() << "bert vocabulary accepted";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::unsupported) << e.what();
    }
}

// Vocabulary facts llama.cpp derives at load time.
TEST(TokenizerPeer, SpecialTokenDefaults) {
    vocab_fixture fx;
    if (!load_vocab("llama-spm", fx)) GTEST_SKIP() << "no vocab test data";
    EXPECT_EQ(fx.tok->bos(), 1);
    EXPECT_EQ(fx.tok->eos(), 2);
    EXPECT_TRUE(fx.tok->add_bos());
    EXPECT_FALSE(fx.tok->add_eos());
    EXPECT_TRUE(fx.tok->is_eog(2));
    EXPECT_EQ(fx.tok->attr(0), token_attr::unknown);
    EXPECT_EQ(fx.tok->attr(3), token_attr::byte);
    // BOS added, the space prefix follows it; control tokens render only when asked.
    const auto ids = fx.tok->encode("Hello", true, false);
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids[0], 1);
    // llama_detokenize drops the prefix space only from the first token, which is <s> here.
    EXPECT_EQ(fx.tok->decode(ids, false), " Hello");
    EXPECT_EQ(fx.tok->decode(ids, true), "<s> Hello");
    EXPECT_EQ(fx.tok->decode(fx.tok->encode("Hello", false, false), false), "Hello");
    EXPECT_EQ(fx.tok->token_to_piece(1, false), "");
    EXPECT_EQ(fx.tok->token_to_piece(1, true), "<s>");
    // parse_special matches control-token text only when asked.
    EXPECT_EQ(fx.tok->encode("</s>", false, true), (std::vector<token_id>{2}));
    EXPECT_NE(fx.tok->encode("</s>", false, false), (std::vector<token_id>{2}));

    vocab_fixture phi;
    ASSERT_TRUE(load_vocab("phi-3", phi));
    EXPECT_EQ(phi.tok->eos(), 32000);
    // "</s>" is USER_DEFINED in phi-3's file, but llama.cpp's EOG detection also makes it
    // CONTROL, so only parse_special matches it; its RSTRIP attribute (set by name for phi-3)
    // then eats the spaces after it.
    EXPECT_TRUE(phi.tok->is_eog(2));
    const auto plain = phi.tok->encode("a</s>   b", false, false);
    EXPECT_EQ(std::find(plain.begin(), plain.end(), 2), plain.end());
    const auto p = phi.tok->encode("a</s>   b", false, true);
    EXPECT_NE(std::find(p.begin(), p.end(), 2), p.end());
    EXPECT_EQ(phi.tok->decode(p, true), "a</s> b");  // "b" gets the SPM space prefix again
}

TEST(TokenizerPeer, InvalidUtf8RoundTrips) {
    // llama.cpp maps invalid bytes to U+FFFD before byte-level BPE; we keep the bytes (see
    // core/tokenizer/tokenizer.cpp). SentencePiece keeps them through <0xXX> byte tokens, as long
    // as a truncated sequence does not swallow the bytes of an escaped space.
    const std::vector<std::string> both = {"\xff", "a\x80 b\xc3", "\xc0\xaf!", "x\xf0\x9f\xa6"};
    for (const char* name : {"gpt-2", "llama-spm"}) {
        vocab_fixture fx;
        if (!load_vocab(name, fx)) GTEST_SKIP() << "no vocab test data";
        std::vector<std::string> cases = both;
        if (fx.tok->model() == "gpt2") cases.push_back("\xe2\x82 x \xf0\x9f\xa6 \xed\xa0\x80");
        for (const std::string& s : cases) {
            const auto ids = fx.tok->encode(s, false, false);
            std::string pieces;
            for (token_id id : ids) pieces += fx.tok->token_to_piece(id, true);
            if (fx.tok->model() == "llama") pieces = pieces.substr(1);  // the prefix space
            EXPECT_EQ(pieces, s) << name << " '" << escaped(s) << "'";
            EXPECT_EQ(fx.tok->decode(ids), s) << name << " '" << escaped(s) << "'";
        }
    }
}
