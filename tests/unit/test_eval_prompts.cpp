// The eval library's dataset prompts (eval/musique-prompt.h, eval/prompt-view.h): the paper's
// musique texts verbatim (CacheBlend's example/blend_musique.py), its question normalization, the
// blank inputs the runtime used to reject for this layout, and the cbl_x_prompt view that passes
// the texts to the runtime literally (CBL_X_PROMPT_CUSTOM), still valid after a move.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "musique-prompt.h"
#include "prompt-view.h"
#include "util/test-util.h"

using namespace cacheblend::eval;

TEST(EvalPrompts, NormalizeQuestionLikeTheReference) {
    EXPECT_EQ(normalize_question("Where was the author educated at?"),
              "where was the author educated at?");
    EXPECT_EQ(normalize_question("Who wrote Hamlet"), "who wrote Hamlet?");
    EXPECT_EQ(normalize_question("already lower?"), "already lower?");
    EXPECT_EQ(normalize_question("\u00c9tienne was born where"), "\u00e9tienne was born where?");
    EXPECT_EQ(normalize_question(""), "?");
}

TEST(EvalPrompts, MusiqueTextsAreThePapers) {
    const prompt_text t =
        musique_prompt({{"", "passage one."}, {"Title", "passage two."}}, "Who is it");
    EXPECT_EQ(t.system,
              "You will be asked a question after reading several passages. Please directly "
              "answer the question based on the given passages. Do NOT repeat the question. The "
              "answer should be within 5 words..");
    EXPECT_EQ(t.preamble, "Passages:\n");
    ASSERT_EQ(t.chunks.size(), 2u);
    EXPECT_EQ(t.chunks[0], "\n\npassage one.\n\n");
    EXPECT_EQ(t.chunks[1], "Title\n\npassage two.\n\n");
    EXPECT_EQ(t.question,
              "\n\nAnswer the question directly based on the given passages. Do NOT repeat the "
              "question. The answer should be within 5 words. \nQuestion:who is it?\nAnswer:");
}

TEST(EvalPrompts, BlankQuestionOrPassageIsRejected) {
    EXPECT_THROW(musique_prompt({{"", "text"}}, " \n"), std::invalid_argument);
    // A title does not make a passage without text usable.
    try {
        musique_prompt({{"", "text"}, {"Title", " \t"}}, "q");
        FAIL() << "a blank passage was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("passage 1 has no text"), std::string::npos)
            << e.what();
    }
}

TEST(EvalPrompts, ViewPassesTheTextsLiterallyAndSurvivesMoves) {
    // Short texts on purpose: a moved short std::string does not keep its characters in place,
    // so a view that pointed into moved strings would read freed or stale memory here.
    prompt_text t;
    t.system = "sys";
    t.preamble = "pre";
    t.chunks = {"a", std::string("b\0c", 3)};
    t.question = "q?";
    std::vector<prompt_view> views;
    views.emplace_back(t);
    views.emplace_back(prompt_text{});  // growth moves the first view
    prompt_view moved = std::move(views[0]);
    const cbl_x_prompt* p = moved.get();
    EXPECT_EQ(p->struct_size, sizeof(cbl_x_prompt));
    EXPECT_EQ(p->format, CBL_X_PROMPT_CUSTOM);
    EXPECT_STREQ(p->system, "sys");
    EXPECT_STREQ(p->preamble, "pre");
    EXPECT_STREQ(p->question, "q?");
    ASSERT_EQ(p->n_chunks, 2u);
    ASSERT_NE(p->lens, nullptr);  // lengths given: a chunk may hold a NUL byte
    EXPECT_EQ(std::string(p->chunks[0], p->lens[0]), "a");
    EXPECT_EQ(std::string(p->chunks[1], p->lens[1]), std::string("b\0c", 3));
    EXPECT_EQ(moved.text().chunks.size(), 2u);
    const prompt_view empty;
    EXPECT_EQ(empty.get()->n_chunks, 0u);
}
