// Evaluation metrics: expected values come from the CacheBlend reference's example/utils.py run
// under Python 3 (normalize_answer, parse_generation, Counter F1) and numpy's percentile.
#include <cmath>
#include <limits>

#include "eval-metrics.h"
#include "util/test-util.h"

using namespace cacheblend::eval;

TEST(EvalMetrics, NormalizeAnswerMatchesSquad) {
    EXPECT_EQ(normalize_answer("The Exeter College, Oxford."), "exeter college oxford");
    EXPECT_EQ(normalize_answer("  A  tale of-two  cities! "), "tale oftwo cities");
    EXPECT_EQ(normalize_answer("an a the"), "");
    EXPECT_EQ(normalize_answer("theater anthem"), "theater anthem");
    // \b is Unicode-aware: an en dash is not a word character, U+0301 (a mark) is not either.
    EXPECT_EQ(normalize_answer("the\u2013end an_apple \u00c0BC \u00c9l\u00e9phant"),
              "\u2013end anapple \u00e0bc \u00e9l\u00e9phant");
    EXPECT_EQ(normalize_answer("x\u0301the y"), "x\u0301 y");
    // Python's lower() beyond ASCII, and Unicode white space as separators.
    EXPECT_EQ(normalize_answer("Stra\u00dfe \u0130stanbul \u0391\u0398\u0397\u039d\u0391 "
                               "\u041c\u043e\u0441\u043a\u0432\u0430"),
              "stra\u00dfe i\u0307stanbul \u03b1\u03b8\u03b7\u03bd\u03b1 "
              "\u043c\u043e\u0441\u043a\u0432\u0430");
    EXPECT_EQ(normalize_answer("a\u00a0b\u3000c"), "b c");
    EXPECT_EQ(normalize_answer(""), "");
    // Invalid UTF-8 passes through instead of being dropped or crashing.
    EXPECT_EQ(normalize_answer("Caf\xff X"), "caf\xff x");
}

TEST(EvalMetrics, ParseGenerationMapsYesNoLikeTheReference) {
    EXPECT_EQ(parse_generation("\n\nYes, it is.\nmore"), "Yes");
    EXPECT_EQ(parse_generation("yesterday"), "Yes");
    EXPECT_EQ(parse_generation("No way"), "No");
    EXPECT_EQ(parse_generation("Norway is"), "No");  // the reference's quirk, kept
    EXPECT_EQ(parse_generation("none"), "No");
    EXPECT_EQ(parse_generation(" no."), "No");
    EXPECT_EQ(parse_generation("  Nope"), "No");
    EXPECT_EQ(parse_generation("Exeter College\nThe answer"), "Exeter College");
    EXPECT_EQ(parse_generation("\n"), "");  // the reference raises IndexError here
    EXPECT_EQ(parse_generation(""), "");
    EXPECT_EQ(parse_generation("  Paris  "), "  Paris  ");
}

TEST(EvalMetrics, WordF1) {
    EXPECT_NEAR(word_f1("Exeter College, Oxford", "Exeter College"), 0.8, 1e-12);
    EXPECT_NEAR(word_f1("the the cat cat", "cat"), 2.0 / 3.0, 1e-12);
    EXPECT_EQ(word_f1("a", "the"), 1.0);  // both empty after normalization
    EXPECT_EQ(word_f1("", "x"), 0.0);
    EXPECT_EQ(word_f1("dog", "cat"), 0.0);
    EXPECT_EQ(word_f1("EXETER college!", "exeter College"), 1.0);
}

TEST(EvalMetrics, AnswerF1ParsesAndTakesBestGold) {
    EXPECT_EQ(answer_f1("\nExeter College\nbecause...", {"Oxford", "Exeter College"}), 1.0);
    EXPECT_EQ(answer_f1("Yes, definitely", {"yes"}), 1.0);
    EXPECT_EQ(answer_f1("anything", {}), 0.0);
}

TEST(EvalMetrics, OverlapF1OnTokenIds) {
    EXPECT_NEAR(overlap_f1(std::vector<int32_t>{1, 2, 2, 3}, std::vector<int32_t>{2, 3, 4}),
                2.0 * (2.0 / 4) * (2.0 / 3) / (2.0 / 4 + 2.0 / 3), 1e-12);
    EXPECT_EQ(overlap_f1(std::vector<int32_t>{}, std::vector<int32_t>{}), 1.0);
    EXPECT_EQ(overlap_f1(std::vector<int32_t>{1}, std::vector<int32_t>{}), 0.0);
}

TEST(EvalMetrics, KlDivergence) {
    const float p[] = {1.f, 2.f, 3.f};
    const float q[] = {3.f, 2.f, 1.f};
    EXPECT_NEAR(kl_divergence_logits(p, q, 3), 1.1504207652088827, 1e-12);
    EXPECT_EQ(kl_divergence_logits(p, p, 3), 0.0);
    // Shifting logits does not change the distribution.
    const float p_shift[] = {101.f, 102.f, 103.f};
    EXPECT_NEAR(kl_divergence_logits(p, p_shift, 3), 0.0, 1e-12);
    const float inf = std::numeric_limits<float>::infinity();
    const float q_zero[] = {-inf, 2.f, 3.f};
    EXPECT_TRUE(std::isinf(kl_divergence_logits(p, q_zero, 3)));
    EXPECT_EQ(kl_divergence_logits(q_zero, p, 3) >= 0.0, true);
}

TEST(EvalMetrics, PercentileLikeNumpy) {
    EXPECT_DOUBLE_EQ(percentile({5, 1, 3, 2, 4}, 50), 3.0);
    EXPECT_DOUBLE_EQ(percentile({5, 1, 3, 2, 4}, 95), 4.8);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 95), 3.85);
    EXPECT_DOUBLE_EQ(percentile({7}, 95), 7.0);
    EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
    EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
    EXPECT_DOUBLE_EQ(mean({}), 0.0);
}

TEST(EvalMetrics, PairedBootstrap) {
    // A constant difference has a degenerate interval at that difference.
    const std::vector<double> a = {0.5, 1.0, 0.0, 0.25};
    const std::vector<double> b = {0.25, 0.75, -0.25, 0.0};
    const interval c = paired_bootstrap_ci(a, b);
    EXPECT_NEAR(c.lo, 0.25, 1e-12);
    EXPECT_NEAR(c.hi, 0.25, 1e-12);

    // Varied differences: the interval holds the observed mean, stays inside the observed
    // range, and is reproducible for a fixed seed.
    std::vector<double> x, y;
    for (int i = 0; i < 50; ++i) {
        x.push_back((i % 7) / 7.0);
        y.push_back((i % 5) / 5.0);
    }
    const interval c1 = paired_bootstrap_ci(x, y, 1000, 7);
    const interval c2 = paired_bootstrap_ci(x, y, 1000, 7);
    EXPECT_EQ(c1.lo, c2.lo);
    EXPECT_EQ(c1.hi, c2.hi);
    double m = 0;
    for (size_t i = 0; i < x.size(); ++i) m += x[i] - y[i];
    m /= static_cast<double>(x.size());
    EXPECT_LT(c1.lo, m);
    EXPECT_GT(c1.hi, m);
    EXPECT_GT(c1.lo, -0.8);
    EXPECT_LT(c1.hi, 0.86);
    // A wider level gives a wider interval.
    const interval c99 = paired_bootstrap_ci(x, y, 1000, 7, 0.99);
    EXPECT_LE(c99.lo, c1.lo);
    EXPECT_GE(c99.hi, c1.hi);
    const interval none = paired_bootstrap_ci({}, {});
    EXPECT_EQ(none.lo, 0.0);
    EXPECT_EQ(none.hi, 0.0);
}

TEST(EvalMetrics, LowerAndSplit) {
    EXPECT_EQ(to_lower("ABC \u00c9\u0178 \u0416"), "abc \u00e9\u00ff \u0436");
    const std::vector<std::string> w = split_words(" a\tb\n\u2003c  ");
    ASSERT_EQ(w.size(), 3u);
    EXPECT_EQ(w[0], "a");
    EXPECT_EQ(w[1], "b");
    EXPECT_EQ(w[2], "c");
    EXPECT_TRUE(split_words("   ").empty());
}
