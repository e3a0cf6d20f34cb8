// Chunker and text extraction: token budgets, paragraph/sentence cuts, offsets back to the source.
#include <gtest/gtest.h>

#include <string>

#include "core/model/model.h"
#include "core/util/error.h"
#include "retrieval/chunker.h"
#include "retrieval/extract/extract.h"
#include "util/hash-embedder.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

encode_fn words() { return [](std::string_view s) { return cbltest::word_tokens(s); }; }

std::string sentence(int i, int n_words) {
    std::string s = "S" + std::to_string(i);
    for (int w = 1; w < n_words; ++w) s += " w" + std::to_string(w);
    return s + ".";
}

}  // namespace

TEST(Chunker, RespectsBudgetAndCoversAllText) {
    std::string text;
    for (int p = 0; p < 6; ++p) {
        for (int s = 0; s < 5; ++s) text += sentence(p * 10 + s, 7) + " ";
        text += "\n\n";
    }
    chunker_params cp;
    cp.max_tokens = 40;
    const auto chunks = chunk_text(text, words(), cp);
    ASSERT_GT(chunks.size(), 3u);
    size_t total_words = 0;
    size_t prev_end = 0;
    for (const auto& c : chunks) {
        EXPECT_LE(c.tokens.size(), 40u);
        EXPECT_GE(c.begin, prev_end);
        EXPECT_LT(c.begin, c.end);
        prev_end = c.end;
        total_words += cbltest::word_tokens(std::string_view(text).substr(c.begin, c.end - c.begin))
                           .size();
        EXPECT_EQ(text[c.end - 1], '.');  // cut at a sentence end
    }
    EXPECT_EQ(total_words, cbltest::word_tokens(text).size());
}

TEST(Chunker, PrefersParagraphBreaks) {
    // Paragraphs of 35 tokens with a 40-token budget: each chunk is exactly one paragraph.
    std::string text;
    for (int p = 0; p < 4; ++p) {
        for (int s = 0; s < 5; ++s) text += sentence(p * 10 + s, 7) + " ";
        text += "\n\n";
    }
    chunker_params cp;
    cp.max_tokens = 40;
    const auto chunks = chunk_text(text, words(), cp);
    ASSERT_EQ(chunks.size(), 4u);
    for (const auto& c : chunks) EXPECT_EQ(c.tokens.size(), 35u);
}

TEST(Chunker, SplitsOverlongSentencesAndUnbrokenText) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "word" + std::to_string(i) + " ";
    chunker_params cp;
    cp.max_tokens = 16;
    auto chunks = chunk_text(text, words(), cp);
    size_t n = 0;
    for (const auto& c : chunks) {
        EXPECT_LE(c.tokens.size(), 16u);
        n += c.tokens.size();
    }
    EXPECT_EQ(n, 100u);
    // One token per byte and no spaces at all: cut between (UTF-8) characters.
    const encode_fn bytes = [](std::string_view s) {
        return std::vector<token_id>(s.size(), 1);
    };
    std::string blob;
    for (int i = 0; i < 50; ++i) blob += "\xC3\xA9";  // é
    chunks = chunk_text(blob, bytes, cp);
    ASSERT_GT(chunks.size(), 1u);
    for (const auto& c : chunks) {
        EXPECT_LE(c.tokens.size(), 16u);
        EXPECT_EQ((c.end - c.begin) % 2, 0u) << "split a UTF-8 character";
    }
    EXPECT_THROW(chunk_text("x", bytes, chunker_params{4}), error);
    EXPECT_TRUE(chunk_text("   \n\n  ", words(), cp).empty());
}

TEST(Chunker, RealTokenizerBudget) {
    CBL_REQUIRE_DEFAULT_MODEL(path);
    model_load_params lp;
    lp.vocab_only = true;
    auto m = model::load(path, lp);
    std::string text;
    for (int p = 0; p < 20; ++p) {
        text += "Paragraph " + std::to_string(p) + ". ";
        for (int s = 0; s < 8; ++s) {
            text += "The quick brown fox number " + std::to_string(s) +
                    " jumps over the lazy dog near the riverbank! ";
        }
        text += "\n\n";
    }
    chunker_params cp;
    cp.max_tokens = 128;
    const encode_fn enc = tokenizer_encoder(m->vocab());
    const auto chunks = chunk_text(text, enc, cp);
    ASSERT_GT(chunks.size(), 5u);
    for (const auto& c : chunks) {
        EXPECT_LE(c.tokens.size(), 128u);
        EXPECT_GE(c.tokens.size(), 40u);
        EXPECT_EQ(c.tokens, enc(std::string_view(text).substr(c.begin, c.end - c.begin)));
    }
}

TEST(TextExtract, HtmlStripsMarkupAndMapsOffsets) {
    const std::string html =
        "<html><head><title>T</title><style>p{color:red}</style>"
        "<script>var x = '<p>';</script></head><body><!-- hidden -->"
        "<p>Fish &amp; chips</p><p>caf&eacute; &#8364;5 &#x41;</p></body></html>";
    const extracted_text ex = extract_text(html, doc_kind::html);
    EXPECT_EQ(ex.text, "T\n\nFish & chips\n\ncaf\xC3\xA9 \xE2\x82\xAC" "5 A");
    const size_t amp = ex.text.find('&');
    EXPECT_EQ(html.substr(ex.source_begin(amp), ex.source_end(amp + 1) - ex.source_begin(amp)),
              "&amp;");
    const size_t fish = ex.text.find("Fish");
    EXPECT_EQ(html.substr(ex.source_begin(fish), ex.source_end(fish + 4) - ex.source_begin(fish)),
              "Fish");
}

TEST(TextExtract, PlainTextRejectsBadUtf8AndNul) {
    const extracted_text ex = extract_text("\xEF\xBB\xBFhello", doc_kind::text);
    EXPECT_EQ(ex.text, "hello");
    EXPECT_EQ(ex.source_begin(0), 3u);
    // Bytes no charset explains (C1 controls: libmagic says unknown-8bit) are refused.
    EXPECT_THROW(extract_text("ok \x81\x8D bad", doc_kind::text), error);
    EXPECT_THROW(extract_text("\xED\xA0\x80", doc_kind::markdown), error);  // surrogate
    EXPECT_THROW(extract_text(std::string("a\0b", 3), doc_kind::text), error);
    EXPECT_EQ(find_invalid_utf8("ab\xF5"), 2u);
    doc_kind k;
    EXPECT_TRUE(doc_kind_from_path("/x/READ.MD", &k));
    EXPECT_EQ(k, doc_kind::markdown);
    EXPECT_TRUE(doc_kind_from_path("/x/a.PDF", &k));
    EXPECT_EQ(k, doc_kind::pdf);
    EXPECT_FALSE(doc_kind_from_path("/x/a.png", &k));
    EXPECT_FALSE(doc_kind_from_path("/x/README", &k));
}
