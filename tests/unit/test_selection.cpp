// Token selection policies (core/blend/selection.h, issue 15 item 1): each policy's choice on a
// constructed case with exact indices (3 chunks of 8 tokens, deviation and question-attention
// scores set by hand), the names table, the check layer's gathering of chunk/offset/budget, and
// the CPU attention_mass op the query policies read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/blend/blend-select.h"
#include "core/blend/selection.h"
#include "kernels/cpu/backend-cpu.h"
#include "kernels/fp16.h"
#include "kernels/kernel-error.h"

using namespace cacheblend;

namespace {

// 3 chunks of 8 candidates: candidate i is chunk i / 8, offset i % 8. Deviation (i * 7) % 24
// ranks the candidates 17, 10, 3, 20, 13, 6, 23, ...; question attention (i * 5) % 24 ranks
// them 19, 14, 9, 4, 23, 18, 13, ...
selection_input three_chunks(int64_t budget) {
    selection_input in;
    for (int i = 0; i < 24; ++i) {
        in.chunk.push_back(i / 8);
        in.offset.push_back(i % 8);
        in.deviation.push_back(static_cast<float>((i * 7) % 24));
        in.query.push_back(static_cast<float>((i * 5) % 24) / 24.f);
    }
    in.budget = budget;
    return in;
}

std::vector<int64_t> chosen(select_policy p, const selection_input& in) {
    std::vector<int64_t> c = make_token_selector(p)->choose(in);
    std::sort(c.begin(), c.end());
    return c;
}

using ids = std::vector<int64_t>;

TEST(Selection, HkvdTakesTheHighestDeviation) {
    EXPECT_EQ(chosen(select_policy::hkvd, three_chunks(7)), (ids{3, 6, 10, 13, 17, 20, 23}));
}

TEST(Selection, HkvdTiesGoToTheEarlierRow) {
    selection_input in = three_chunks(3);
    std::fill(in.deviation.begin(), in.deviation.end(), 1.f);
    in.deviation[20] = 2.f;
    EXPECT_EQ(chosen(select_policy::hkvd, in), (ids{0, 1, 20}));
}

TEST(Selection, SinkSpreadsTheBudgetOverChunksFirstTokensFirst) {
    // 7 over 3 chunks: 3, 2, 2 (the remainder to the earlier chunk), each chunk's first tokens.
    EXPECT_EQ(chosen(select_policy::sink, three_chunks(7)), (ids{0, 1, 2, 8, 9, 16, 17}));
    EXPECT_EQ(chosen(select_policy::sink, three_chunks(3)), (ids{0, 8, 16}));
    EXPECT_EQ(chosen(select_policy::sink, three_chunks(24)).size(), 24u);
}

TEST(Selection, SinkGivesAShortChunksShareToTheOthers) {
    // A later check layer: chunk 0 has one candidate left (its offset 5), chunks 1 and 2 all 8.
    selection_input in = three_chunks(7);
    in.chunk.erase(in.chunk.begin(), in.chunk.begin() + 7);
    in.offset.erase(in.offset.begin(), in.offset.begin() + 7);
    in.deviation.erase(in.deviation.begin(), in.deviation.begin() + 7);
    in.query.erase(in.query.begin(), in.query.begin() + 7);
    // Candidates: 0 = chunk 0 offset 7, 1..8 = chunk 1, 9..16 = chunk 2. Chunk 0 takes 1, the
    // other two 3 each.
    EXPECT_EQ(chosen(select_policy::sink, in), (ids{0, 1, 2, 3, 9, 10, 11}));
}

TEST(Selection, SinkHkvdKeepsFourSinksPerChunkThenDeviation) {
    // 12 sinks (offsets 0-3 of each chunk), then the 4 highest deviations not already sinks:
    // 17, 10 and 3 are sinks, so 20, 13, 6 and 23.
    EXPECT_EQ(chosen(select_policy::sink_hkvd, three_chunks(16)),
              (ids{0, 1, 2, 3, 6, 8, 9, 10, 11, 13, 16, 17, 18, 19, 20, 23}));
    // A budget below the sinks spreads as sink does.
    EXPECT_EQ(chosen(select_policy::sink_hkvd, three_chunks(7)), (ids{0, 1, 2, 8, 9, 16, 17}));
}

TEST(Selection, QueryTakesTheQuestionsMostAttendedRows) {
    EXPECT_EQ(chosen(select_policy::query, three_chunks(7)), (ids{4, 9, 13, 14, 18, 19, 23}));
}

TEST(Selection, QueryHkvdSplitsTheBudget) {
    // 4 (half, rounded up) by attention: 19, 14, 9, 4; 3 by deviation: 17, 10, 3.
    EXPECT_EQ(chosen(select_policy::query_hkvd, three_chunks(7)), (ids{3, 4, 9, 10, 14, 17, 19}));
    // An overlap goes to the next row of the second signal: attention's top is 19, make it the
    // top deviation too; deviation's one row goes to its best row not taken, 17.
    selection_input in = three_chunks(3);
    in.deviation[19] = 100.f;
    EXPECT_EQ(chosen(select_policy::query_hkvd, in), (ids{14, 17, 19}));
}

TEST(Selection, EveryPolicyTakesAllAtFullBudget) {
    ids all(24);
    for (int64_t i = 0; i < 24; ++i) all[static_cast<size_t>(i)] = i;
    for (select_policy p : select_policies()) {
        EXPECT_EQ(chosen(p, three_chunks(24)), all) << select_policy_name(p);
        EXPECT_TRUE(chosen(p, three_chunks(0)).empty()) << select_policy_name(p);
    }
}

TEST(Selection, SignalsArePaidForOnlyWhenRead) {
    EXPECT_TRUE(make_token_selector(select_policy::hkvd)->needs_deviation());
    EXPECT_FALSE(make_token_selector(select_policy::hkvd)->needs_query());
    EXPECT_FALSE(make_token_selector(select_policy::sink)->needs_deviation());
    EXPECT_FALSE(make_token_selector(select_policy::sink)->needs_query());
    EXPECT_TRUE(make_token_selector(select_policy::sink_hkvd)->needs_deviation());
    EXPECT_FALSE(make_token_selector(select_policy::query)->needs_deviation());
    EXPECT_TRUE(make_token_selector(select_policy::query)->needs_query());
    EXPECT_TRUE(make_token_selector(select_policy::query_hkvd)->needs_deviation());
    EXPECT_TRUE(make_token_selector(select_policy::query_hkvd)->needs_query());
}

TEST(Selection, NamesRoundTrip) {
    EXPECT_EQ(select_policy_names(), "hkvd, sink, sink+hkvd, query, query+hkvd");
    for (select_policy p : select_policies()) {
        select_policy q = select_policy::hkvd;
        ASSERT_TRUE(parse_select_policy(select_policy_name(p), &q));
        EXPECT_EQ(q, p);
    }
    select_policy q = select_policy::sink;
    EXPECT_FALSE(parse_select_policy("HKVD", &q));
    EXPECT_FALSE(parse_select_policy("", &q));
    EXPECT_EQ(q, select_policy::sink);
}

// The check layer's gathering: a prompt [P=2][C0=4 hit][C1=3 miss][C2=5 hit][Q=2]; the reused
// rows R are C0 then C2 (hit_offset 0, 4). At a check layer some reused rows are already gone.
TEST(Selection, PrepareGathersChunkOffsetAndBudget) {
    std::vector<int32_t> reused_index(16, -1);
    for (int i = 0; i < 4; ++i) reused_index[static_cast<size_t>(2 + i)] = i;
    for (int i = 0; i < 5; ++i) reused_index[static_cast<size_t>(9 + i)] = 4 + i;
    const std::vector<int64_t> hit_offset{0, 4};
    // Active: everything but C0's first row and C2's rows 0 and 3.
    std::vector<int32_t> active;
    for (int32_t r = 0; r < 16; ++r) {
        if (r != 2 && r != 9 && r != 12) active.push_back(r);
    }
    select_args a;
    a.active = &active;
    a.reused_index = &reused_index;
    a.hit_offset = &hit_offset;
    a.n_reused = 9;
    a.ratio = 0.3f;  // ceil(2.7) = 3 of R
    const auto be = make_cpu_backend(1);
    const auto sel = make_token_selector(select_policy::sink);
    select_scratch s;
    std::vector<int64_t> cand;
    selection_input in;
    select_prepare(*be, a, *sel, &s, &cand, &in);
    // Candidates are rows 3, 4, 5 (C0 offsets 1-3) and 10, 11, 13 (C2 offsets 1, 2, 4).
    EXPECT_EQ(cand, (ids{2, 3, 4, 8, 9, 10}));
    EXPECT_EQ(in.chunk, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
    EXPECT_EQ(in.offset, (std::vector<int32_t>{1, 2, 3, 1, 2, 4}));
    EXPECT_EQ(in.budget, 3);
    EXPECT_TRUE(in.deviation.empty()) << "sink computes no deviation";
    std::vector<int32_t> keep;
    select_finish(a, *sel, in, cand, &keep);
    // Kept: every row not reused (P, C1, Q) and the sinks: rows 3, 4 (C0) and 10 (C2).
    std::vector<int32_t> kept_rows;
    for (int32_t k : keep) kept_rows.push_back(active[static_cast<size_t>(k)]);
    EXPECT_EQ(kept_rows, (std::vector<int32_t>{0, 1, 3, 4, 6, 7, 8, 10, 14, 15}));
}

// attention_mass on the CPU: keys (0,0), (1,0), (2,0) in f16; query row 0 at position 2 attends
// all three, row 1 at position 0 only key 0. Head 0 has q = (1, 0) (logits 0, 1, 2), head 1
// q = (0, 0) (uniform); both read the one KV head (GQA).
TEST(Selection, AttentionMassSumsSoftmaxOverRowsAndHeads) {
    const auto be = make_cpu_backend(2);
    const float kf[] = {0, 0, 1, 0, 2, 0};
    std::vector<uint16_t> k(6);
    fp32_to_fp16_row(kf, k.data(), 6);
    const float q[] = {1, 0, 0, 0, /* row 1 */ 1, 0, 0, 0};
    const int32_t pos[] = {2, 0};
    attention_args a;
    a.q = q;
    a.n_q = 2;
    a.q_stride = 4;
    a.q_pos = pos;
    a.k = k.data();
    a.kv_stride = 2;
    a.n_keys = 3;
    a.n_head = 2;
    a.n_kv_head = 1;
    a.head_dim = 2;
    a.scale = 1.f;
    float scores[3] = {-1, -1, -1};
    be->attention_mass(a, scores);
    const double s = 1 + std::exp(1.0) + std::exp(2.0);
    EXPECT_NEAR(scores[0], 1 / s + 1 / 3.0 + 2.0, 1e-6);  // row 1 puts both heads on key 0
    EXPECT_NEAR(scores[1], std::exp(1.0) / s + 1 / 3.0, 1e-6);
    EXPECT_NEAR(scores[2], std::exp(2.0) / s + 1 / 3.0, 1e-6);

    // 0 KV heads means multi-head attention, as in attention(): head 1 reads its own KV head,
    // here a copy of head 0's keys, so the scores are those of n_kv_head = n_head.
    std::vector<uint16_t> k2(12);
    for (int j = 0; j < 3; ++j) {
        for (int c = 0; c < 4; ++c) k2[size_t(j * 4 + c)] = k[size_t(j * 2 + c % 2)];
    }
    attention_args mha = a;
    mha.k = k2.data();
    mha.kv_stride = 4;
    float mha_scores[2][3];
    for (int n_kv : {0, 2}) {
        mha.n_kv_head = n_kv;
        be->attention_mass(mha, mha_scores[n_kv / 2]);
    }
    for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(mha_scores[0][j], mha_scores[1][j]) << j;
        EXPECT_NEAR(mha_scores[0][j], scores[j], 1e-6) << j;
    }

    // Heads that do not group over the KV heads are an argument error, not a division by zero
    // (or, on a device, reads past the keys).
    for (int n_kv : {-1, 3}) {
        a.n_kv_head = n_kv;
        try {
            be->attention_mass(a, scores);
            ADD_FAILURE() << n_kv << " KV heads accepted";
        } catch (const kernel_error& e) {
            EXPECT_EQ(e.code(), kernel_status::invalid_arg) << e.what();
        }
    }
}

}  // namespace
