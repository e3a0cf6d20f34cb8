// Tokenizer on small synthetic vocabularies (no model or ../shared needed): BPE merge order,
// merges whose result is not a token, special-token partition, SPM scores and byte fallback,
// detokenization and load errors. llama.cpp parity on real vocabularies is in
// test_tokenizer_peer and test_tokenizer_model.
#include "core/model/gguf.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"
#include "util/gguf-writer.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::unique_ptr<gguf_file> image(cbltest::gguf_builder& b) {
    const auto bytes = b.build();
    return gguf_file::from_bytes(bytes.data(), bytes.size());
}

// 256 byte-level chars, then `extra` normal tokens, then specials.
struct bpe_vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;

    bpe_vocab() {
        for (int b = 0; b < 256; ++b) {
            tokens.emplace_back(unicode::byte_to_utf8(uint8_t(b)));
            types.push_back(1);
        }
    }
    token_id add(const std::string& t, int32_t type = 1) {
        tokens.push_back(t);
        types.push_back(type);
        return token_id(tokens.size() - 1);
    }
    token_id byte(char c) const { return token_id(uint8_t(c)); }
};

std::unique_ptr<tokenizer> make_bpe(const bpe_vocab& v, const std::vector<std::string>& merges,
                                    const std::string& pre = "gpt-2") {
    cbltest::gguf_builder b;
    b.set_str("general.architecture", "llama");
    b.set_str("tokenizer.ggml.model", "gpt2");
    b.set_str("tokenizer.ggml.pre", pre);
    b.set_arr_str("tokenizer.ggml.tokens", v.tokens);
    b.set_arr_i32("tokenizer.ggml.token_type", v.types);
    b.set_arr_str("tokenizer.ggml.merges", merges);
    b.set_u32("tokenizer.ggml.bos_token_id", uint32_t(v.tokens.size() - 1));
    b.set_u32("tokenizer.ggml.eos_token_id", uint32_t(v.tokens.size() - 1));
    auto f = image(b);
    return tokenizer::from_gguf(*f);
}

const std::string G = std::string(unicode::byte_to_utf8(' '));  // "Ġ"

}  // namespace

TEST(Tokenizer, ByteMapIsGpt2s) {
    EXPECT_EQ(unicode::byte_to_cpt('a'), uint32_t('a'));
    EXPECT_EQ(unicode::byte_to_cpt(' '), 0x120u);
    EXPECT_EQ(unicode::byte_to_cpt('\n'), 0x10Au);
    EXPECT_EQ(unicode::byte_to_cpt(0xAD), 0x143u);
    for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode::cpt_to_byte(unicode::byte_to_cpt(b)), b);
    EXPECT_EQ(unicode::cpt_to_byte(0x20), -1);
    EXPECT_EQ(unicode::cpt_to_byte(0x144), -1);
    EXPECT_EQ(unicode::cpt_flags('a'), unicode::flag_letter);
    EXPECT_EQ(unicode::cpt_flags(' '), unicode::flag_separator | unicode::flag_whitespace);
    EXPECT_EQ(unicode::cpt_flags(0x378), unicode::flag_undefined);
    EXPECT_EQ(unicode::cpt_flags(0x110000), unicode::flag_undefined);
}

TEST(Tokenizer, BpeMergeRankOrder) {
    bpe_vocab v;
    const token_id th = v.add("th"), he = v.add("he"), the = v.add("the"), eot = v.add("<|e|>", 3);
    (void)eot;
    // "h e" outranks "t h": t + he, not th + e.
    auto a = make_bpe(v, {"h e", "t h"});
    EXPECT_EQ(a->encode("the", false, false), (std::vector<token_id>{v.byte('t'), he}));
    auto b = make_bpe(v, {"t h", "h e"});
    EXPECT_EQ(b->encode("the", false, false), (std::vector<token_id>{th, v.byte('e')}));
    auto c = make_bpe(v, {"t h", "th e"});
    EXPECT_EQ(c->encode("the", false, false), (std::vector<token_id>{the}));
    EXPECT_EQ(c->decode(c->encode("the the", false, false)), "the the");
}

TEST(Tokenizer, BpeMergeThroughNonToken) {
    bpe_vocab v;
    const token_id abc = v.add("abc");
    v.add("<|e|>", 3);
    // "ab" is not a token, yet it is a merge step towards "abc" (llama.cpp merges strings).
    auto t = make_bpe(v, {"a b", "ab c"});
    EXPECT_EQ(t->encode("abc", false, false), (std::vector<token_id>{abc}));
    // A final "ab" is no token: llama.cpp falls back to one token per (encoded) byte.
    EXPECT_EQ(t->encode("ab", false, false), (std::vector<token_id>{v.byte('a'), v.byte('b')}));
    EXPECT_EQ(t->decode(t->encode("ab abc", false, false)), "ab abc");
}

TEST(Tokenizer, BpePretokenizers) {
    bpe_vocab v;
    const token_id sp_the = v.add(G + "the"), n12 = v.add("12"), sp_1 = v.add(G + "1");
    v.add("<|e|>", 3);
    const std::vector<std::string> merges = {G + " t", "h e", G + "t he", "1 2", G + " 1"};
    auto gpt2 = make_bpe(v, merges, "gpt-2");
    EXPECT_EQ(gpt2->encode(" the", false, false), (std::vector<token_id>{sp_the}));
    // " 12" is one pre-token; "1 2" outranks "Ġ 1".
    EXPECT_EQ(gpt2->encode(" 12", false, false), (std::vector<token_id>{v.byte(' '), n12}));
    EXPECT_EQ(gpt2->encode(" 1", false, false), (std::vector<token_id>{sp_1}));
    EXPECT_EQ(gpt2->encode("12", false, false), (std::vector<token_id>{n12}));
    // smollm: every digit alone, and never with the space before it.
    auto smol = make_bpe(v, merges, "smollm");
    EXPECT_EQ(smol->encode("12", false, false), (std::vector<token_id>{v.byte('1'), v.byte('2')}));
    EXPECT_EQ(smol->encode(" 1", false, false), (std::vector<token_id>{v.byte(' '), v.byte('1')}));
    EXPECT_EQ(smol->pre(), "smollm");
    EXPECT_THROW(make_bpe(v, merges, "no-such-pre"), error);
}

TEST(Tokenizer, SpecialTokenPartition) {
    bpe_vocab v;
    const token_id ctrl = v.add("<|end|>", 3);
    const token_id user = v.add("<tool>", 4);
    const token_id longer = v.add("<tool>x", 4);
    auto t = make_bpe(v, {});
    // USER_DEFINED always, CONTROL only with parse_special; longest first.
    const auto plain = t->encode("a<tool>b<|end|><tool>x", false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), user), 1);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), longer), 1);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), ctrl), 0);
    const auto parsed = t->encode("a<tool>b<|end|><tool>x", false, true);
    EXPECT_EQ(parsed, (std::vector<token_id>{v.byte('a'), user, v.byte('b'), ctrl, longer}));
    // Control tokens render only with special = true; user-defined ones always.
    EXPECT_EQ(t->decode(parsed, false), "a<tool>b<tool>x");
    EXPECT_EQ(t->decode(parsed, true), "a<tool>b<|end|><tool>x");
    // "<|end|>" is auto-detected as EOT and end of generation, like llama.cpp does.
    EXPECT_EQ(t->eot(), ctrl);
    EXPECT_TRUE(t->is_eog(ctrl));
    EXPECT_EQ(t->attr(user), token_attr::user_defined);
    EXPECT_EQ(t->attr(ctrl), token_attr::control);
}

TEST(Tokenizer, CleanSpacesOnDecode) {
    bpe_vocab v;
    v.add("<|e|>", 3);
    auto gpt2 = make_bpe(v, {}, "gpt-2");    // clean_up_tokenization_spaces
    auto smol = make_bpe(v, {}, "smollm");   // no clean-up
    const std::string s = "Hi , you ' re here . I 'm sure 've he 's";
    EXPECT_EQ(gpt2->decode(gpt2->encode(s, false, false)), "Hi, you're here. I'm sure've he's");
    EXPECT_EQ(smol->decode(smol->encode(s, false, false)), s);
}

namespace {

std::unique_ptr<tokenizer> make_spm() {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    std::vector<float> scores = {0, 0, 0};
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        types.push_back(6);
        scores.push_back(0);
    }
    const std::string sp = "\xE2\x96\x81";
    const std::vector<std::pair<std::string, float>> normal = {
        {sp, -10}, {"h", -10}, {"e", -10}, {"l", -10}, {"o", -10}, {sp + "h", -1},
        {"ll", -2}, {sp + "he", -3}, {sp + "hello", -5}, {"lo", -0.5f}, {sp + sp, -1},
    };
    for (const auto& n : normal) {
        tokens.push_back(n.first);
        types.push_back(1);
        scores.push_back(n.second);
    }
    cbltest::gguf_builder b;
    b.set_str("general.architecture", "llama");
    b.set_str("tokenizer.ggml.model", "llama");
    b.set_arr_str("tokenizer.ggml.tokens", tokens);
    b.set_arr_i32("tokenizer.ggml.token_type", types);
    b.set_arr_f32("tokenizer.ggml.scores", scores);
    auto f = image(b);
    return tokenizer::from_gguf(*f);
}

}  // namespace

TEST(Tokenizer, SpmScoresAndByteFallback) {
    const auto t = make_spm();
    EXPECT_EQ(t->model(), "llama");
    EXPECT_TRUE(t->add_bos());
    EXPECT_EQ(t->bos(), 1);
    const token_id base = 3 + 256;  // first normal token
    const token_id sp = base, l = base + 3, sp_he = base + 7, lo = base + 9, sp_sp = base + 10;
    // Highest score first: "lo", then "▁h", then "▁he"; "ll" went stale when "lo" took its l.
    EXPECT_EQ(t->encode("hello", false, false), (std::vector<token_id>{sp_he, l, lo}));
    EXPECT_EQ(t->encode("hello", true, false), (std::vector<token_id>{1, sp_he, l, lo}));
    // No token for "é": its bytes.
    EXPECT_EQ(t->encode("\xC3\xA9", false, false),
              (std::vector<token_id>{sp, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_EQ(t->encode("  ", false, false), (std::vector<token_id>{sp_sp, sp}));
    for (const std::string s : {"hello", "hello  hello", "\xC3\xA9 x\xFF", " lead", ""}) {
        EXPECT_EQ(t->decode(t->encode(s, false, false)), s);
        EXPECT_EQ(t->decode(t->encode(s, true, false), true), (s.empty() ? "<s>" : "<s> " + s));
    }
}

TEST(Tokenizer, LoadErrors) {
    auto fails = [](cbltest::gguf_builder& b, status want) {
        auto f = image(b);
        try {
            tokenizer::from_gguf(*f);
        } catch (const error& e) {
            return e.code() == want;
        }
        return false;
    };
    cbltest::gguf_builder none;
    none.set_str("general.architecture", "llama");
    EXPECT_TRUE(fails(none, status::format));

    cbltest::gguf_builder bert;
    bert.set_str("tokenizer.ggml.model", "bert");
    bert.set_arr_str("tokenizer.ggml.tokens", {"a"});
    EXPECT_TRUE(fails(bert, status::unsupported));

    cbltest::gguf_builder no_merges;
    no_merges.set_str("tokenizer.ggml.model", "gpt2");
    no_merges.set_arr_str("tokenizer.ggml.tokens", {"a", "b"});
    EXPECT_TRUE(fails(no_merges, status::format));

    cbltest::gguf_builder dup;
    dup.set_str("tokenizer.ggml.model", "llama");
    dup.set_arr_str("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "a"});
    EXPECT_TRUE(fails(dup, status::format));

    cbltest::gguf_builder short_types;
    short_types.set_str("tokenizer.ggml.model", "llama");
    short_types.set_arr_str("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    short_types.set_arr_i32("tokenizer.ggml.token_type", {2, 3});
    EXPECT_TRUE(fails(short_types, status::format));

    cbltest::gguf_builder bad_bos;  // add_bos without a BOS token in range
    bad_bos.set_str("tokenizer.ggml.model", "llama");
    bad_bos.set_arr_str("tokenizer.ggml.tokens", {"<unk>"});
    EXPECT_TRUE(fails(bad_bos, status::format));
}
