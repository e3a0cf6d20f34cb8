// The sampler on crafted logits: llama.cpp's penalty arithmetic, the window, exempt tokens,
// greedy with penalties, and seeded sampling.
#include <vector>

#include "core/engine/sampler.h"
#include "util/test-util.h"

using cacheblend::sampler;
using cacheblend::sampler_params;
using cacheblend::token_id;

namespace {

std::vector<float> penalized(sampler& s, std::vector<float> logits) {
    s.penalize(logits.data(), static_cast<int32_t>(logits.size()));
    return logits;
}

sampler_params greedy_with(float repeat, int32_t last_n) {
    sampler_params p;
    p.repeat_penalty = repeat;
    p.repeat_last_n = last_n;
    return p;
}

}  // namespace

TEST(Sampler, PenaltyArithmeticIsLlamaCpps) {
    sampler_params p = greedy_with(2.f, 64);
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    sampler s(p);
    for (token_id t : {0, 1, 0, 2}) s.accept(t);
    // Positive logits are divided, negative and zero ones multiplied; then count x frequency
    // and presence once. Tokens 3 and 4 were never seen.
    const std::vector<float> out = penalized(s, {2.f, -2.f, 0.f, 1.f, 3.f});
    EXPECT_FLOAT_EQ(out[0], 2.f / 2.f - (2 * 0.5f + 0.25f));
    EXPECT_FLOAT_EQ(out[1], -2.f * 2.f - (0.5f + 0.25f));
    EXPECT_FLOAT_EQ(out[2], 0.f - (0.5f + 0.25f));
    EXPECT_FLOAT_EQ(out[3], 1.f);
    EXPECT_FLOAT_EQ(out[4], 3.f);
}

TEST(Sampler, PenaltiesOffLeaveLogitsAlone) {
    const std::vector<float> logits{1.5f, -0.5f, 2.f};
    for (const sampler_params& p : {greedy_with(1.f, 64), greedy_with(1.5f, 0)}) {
        sampler s(p);
        for (token_id t : {0, 1, 2}) s.accept(t);
        EXPECT_EQ(penalized(s, logits), logits);
    }
}

TEST(Sampler, WindowHoldsTheLastNTokens) {
    sampler s(greedy_with(2.f, 2));
    for (token_id t : {0, 1, 2}) s.accept(t);  // 0 has left the window
    std::vector<float> out = penalized(s, {4.f, 4.f, 4.f, 4.f});
    EXPECT_EQ(out, (std::vector<float>{4.f, 2.f, 2.f, 4.f}));
    s.accept(1);  // the window is now {2, 1}: counts follow tokens in and out
    s.accept(1);  // {1, 1}
    out = penalized(s, {4.f, 4.f, 4.f, 4.f});
    EXPECT_EQ(out, (std::vector<float>{4.f, 2.f, 4.f, 4.f}));

    sampler whole(greedy_with(2.f, -1));  // -1: the whole context
    for (token_id t = 0; t < 1000; ++t) whole.accept(t % 4 == 3 ? 0 : t);
    out = penalized(whole, {4.f, 4.f, 4.f, 4.f});
    EXPECT_EQ(out, (std::vector<float>{2.f, 2.f, 2.f, 4.f}));
}

TEST(Sampler, ExemptTokensAreNeverPenalized) {
    sampler s(greedy_with(2.f, 64), [](token_id t) { return t == 1; });
    s.accept(0);
    s.accept(1);
    EXPECT_EQ(penalized(s, {4.f, 4.f}), (std::vector<float>{2.f, 4.f}));
}

TEST(Sampler, GreedyWithPenaltyIsDeterministicAndStepsOffARepeat) {
    const std::vector<float> logits{5.f, 4.8f, 1.f};
    sampler plain(greedy_with(1.f, 64));
    plain.accept(0);
    EXPECT_EQ(plain.sample(logits.data(), 3), 0);
    for (int run = 0; run < 2; ++run) {
        sampler s(greedy_with(1.1f, 64));
        s.accept(0);
        EXPECT_EQ(s.sample(logits.data(), 3), 1);  // 5 / 1.1 < 4.8
        s.accept(1);
        EXPECT_EQ(s.sample(logits.data(), 3), 0);  // both seen: 5 / 1.1 > 4.8 / 1.1
    }
    EXPECT_EQ(logits, (std::vector<float>{5.f, 4.8f, 1.f}));  // the caller's logits are untouched
}

TEST(Sampler, PenaltiesApplyBeforeTemperatureSampling) {
    sampler_params p = greedy_with(100.f, 64);
    p.temperature = 1.f;
    p.seed = 3;
    sampler s(p);
    s.accept(0);
    const std::vector<float> logits{10.f, 10.f};
    // Penalized to 0.1, token 0 falls far below min_p (0.05) of token 1: never drawn.
    for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(logits.data(), 2), 1);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
    std::vector<float> logits(50);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.05f * static_cast<float>(i % 7);
    auto draw = [&](uint64_t seed) {
        sampler_params p = greedy_with(1.1f, 8);
        p.temperature = 1.f;
        p.top_k = 0;
        p.top_p = 1.f;
        p.min_p = 0.f;
        p.seed = seed;
        sampler s(p);
        std::vector<token_id> out;
        for (int i = 0; i < 200; ++i) {
            out.push_back(s.sample(logits.data(), static_cast<int32_t>(logits.size())));
            s.accept(out.back());
        }
        return out;
    };
    const std::vector<token_id> a = draw(7);
    EXPECT_EQ(a, draw(7));
    EXPECT_NE(a, draw(8));
}
