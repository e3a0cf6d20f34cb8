// Selection policies on the real model (issue 15 item 1): r = 1 reproduces full exactly under
// every policy; sink recomputes each chunk's first tokens; query recomputes the rows a
// brute-force reference finds the question attends to most; a calibration record's policy is
// the one a calibrated session runs.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/blend/blend.h"
#include "core/blend/calibration.h"
#include "core/kvstore/kv-store.h"
#include "kernels/fp16.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

class BlendPolicyTest : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = model::load(path);
        session_params sp;
        sp.n_ctx = 1024;
        sp.n_threads = 2;
        session_ = std::make_unique<session>(model_, sp);
        char tmpl[] = "/tmp/cbl-policy-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        kv_store_params kp;
        kp.dir = dir_ + "/kv";
        store_ = kv_store::open(kp);
        const tokenizer& t = model_->vocab();
        req_.preamble = t.encode(
            "<|im_start|>system\nAnswer the question using the passages.<|im_end|>\n"
            "<|im_start|>user\n",
            false, true);
        const char* passages[] = {
            "The Amazon river flows through Brazil, Peru and Colombia. It carries more water than "
            "any other river and its basin covers about seven million square kilometres.\n",
            "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, rises "
            "5,895 metres above sea level and was first climbed in 1889 by Hans Meyer.\n",
            "The Danube is Europe's second-longest river. It rises in the Black Forest of Germany "
            "and flows through ten countries before reaching the Black Sea in Romania.\n",
        };
        for (const char* p : passages) req_.chunks.push_back(t.encode(p, false, false));
        req_.question = t.encode(
            "Question: Who first climbed Kilimanjaro?<|im_end|>\n<|im_start|>assistant\n", false,
            true);
        for (const auto& c : req_.chunks) {
            first_row_.push_back(static_cast<int32_t>(req_.preamble.size() + n_reused_));
            n_reused_ += static_cast<int64_t>(c.size());
        }
        n_ = static_cast<int64_t>(req_.preamble.size() + req_.question.size()) + n_reused_;
    }
    void TearDown() override {
        session_.reset();
        store_.reset();
        if (!dir_.empty() && std::system(("rm -rf '" + dir_ + "'").c_str()) != 0) ADD_FAILURE();
    }
    void precompute_all(kv_format format) {
        blend_params p;
        p.format = format;
        blend_engine eng(*session_, store_, p);
        for (const auto& c : req_.chunks) eng.precompute_chunk(req_.preamble, c);
    }
    std::vector<float> run(blend_params p, blend_stats* st) {
        p.write_back = false;
        blend_engine eng(*session_, store_, p);
        return eng.prefill(req_, st);
    }
    std::vector<float> run(blend_mode mode, float ratio, select_policy sel, blend_stats* st,
                           kv_format format = kv_format::f16) {
        blend_params p;
        p.mode = mode;
        p.ratio = ratio;
        p.select = sel;
        p.format = format;
        return run(p, st);
    }
    // Rows not reused (preamble, question) and the given reused rows.
    std::set<int32_t> with_computed(std::set<int32_t> rows) const {
        for (int32_t i = 0; i < static_cast<int32_t>(req_.preamble.size()); ++i) rows.insert(i);
        for (int64_t i = n_ - static_cast<int64_t>(req_.question.size()); i < n_; ++i) {
            rows.insert(static_cast<int32_t>(i));
        }
        return rows;
    }

    std::shared_ptr<const model> model_;
    std::unique_ptr<session> session_;
    std::shared_ptr<kv_store> store_;
    std::string dir_;
    blend_request req_;
    std::vector<int32_t> first_row_;  // each chunk's first prompt row
    int64_t n_reused_ = 0, n_ = 0;
};

// With K stored in f32 (exact) and r = 1, every row is recomputed from the check layer on and
// layers before it run in full: the cache and logits are full prefill's, bit for bit, whatever
// the policy (its scores must not leak into the computation).
TEST_F(BlendPolicyTest, RatioOneReproducesFullExactlyUnderEveryPolicy) {
    precompute_all(kv_format::exact);
    blend_stats fs;
    const std::vector<float> full = run(blend_mode::full, 0.f, select_policy::hkvd, &fs);
    const model_hparams& hp = model_->hparams();
    const auto rows = [&](const uint16_t* base) {
        return std::vector<uint16_t>(base, base + n_ * hp.kv_dim());
    };
    std::vector<std::vector<uint16_t>> full_k;
    for (int l = 0; l < hp.n_layer; ++l) full_k.push_back(rows(session_->cache().k(l)));
    for (select_policy p : select_policies()) {
        blend_stats st;
        const std::vector<float> b = run(blend_mode::blend, 1.f, p, &st, kv_format::exact);
        EXPECT_EQ(st.chunks_hit, 3) << select_policy_name(p);
        EXPECT_EQ(st.tokens_recomputed, n_) << select_policy_name(p);
        EXPECT_EQ(b, full) << select_policy_name(p);
        for (int l = 0; l < hp.n_layer; ++l) {
            EXPECT_EQ(rows(session_->cache().k(l)), full_k[static_cast<size_t>(l)])
                << select_policy_name(p) << " layer " << l;
        }
    }
}

// A budget of 7 over 3 chunks: the first 3, 2 and 2 tokens of the chunks (ratio 6.5 / |R|:
// ceil gives 7 whatever the float rounding).
TEST_F(BlendPolicyTest, SinkRecomputesEachChunksFirstTokens) {
    precompute_all(kv_format::f16);
    blend_stats st;
    run(blend_mode::blend, 6.5f / static_cast<float>(n_reused_), select_policy::sink, &st);
    const std::set<int32_t> expect = with_computed(
        {first_row_[0], first_row_[0] + 1, first_row_[0] + 2, first_row_[1], first_row_[1] + 1,
         first_row_[2], first_row_[2] + 1});
    EXPECT_EQ(std::set<int32_t>(st.recomputed_rows.begin(), st.recomputed_rows.end()), expect);
    // sink reads no signal: it chooses before layer 0 and no layer runs on every prompt row,
    // where hkvd needs layer 0 on all of them for its deviation at layer 1.
    EXPECT_EQ(st.dense_ms, 0);
    blend_stats hkvd;
    run(blend_mode::blend, 6.5f / static_cast<float>(n_reused_), select_policy::hkvd, &hkvd);
    EXPECT_GT(hkvd.dense_ms, 0);
    EXPECT_EQ(hkvd.tokens_recomputed, st.tokens_recomputed) << "the same budget";
}

// Brute force of the question's attention at layer 1: layers 0 and 1 of the whole prompt in
// the forward engine's steps, Q of the question rotated, softmax per row and head in double
// over the cached (rotated, f16) keys, summed; the top rows must be what query recomputed.
TEST_F(BlendPolicyTest, QueryRecomputesWhatTheQuestionAttendsTo) {
    precompute_all(kv_format::f16);
    const float r = 0.15f;
    blend_stats st;
    run(blend_mode::blend, r, select_policy::query, &st);

    const model_hparams& hp = model_->hparams();
    std::vector<token_id> all(req_.preamble);
    for (const auto& c : req_.chunks) all.insert(all.end(), c.begin(), c.end());
    all.insert(all.end(), req_.question.begin(), req_.question.end());
    const int64_t N = n_, nq = static_cast<int64_t>(req_.question.size());
    backend& be = session_->get_backend();
    forward_engine fwd(*model_, be, static_cast<int32_t>(N));
    kv_cache cache(be, hp, 1024);
    std::vector<int32_t> pos(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    fwd.embed(all.data(), N);
    fwd.set_positions(pos.data(), N);
    fwd.project_qkv(0, N);
    fwd.rope_store_kv(0, cache, N);
    fwd.attend_and_mlp(0, cache, N, N);
    fwd.project_qkv(1, N);
    fwd.rope_store_kv(1, cache, N);
    const int64_t qd = hp.q_dim(), hd = hp.head_dim;
    std::vector<float> q(fwd.q() + (N - nq) * qd, fwd.q() + N * qd);
    be.rope(q.data(), nq, qd, hp.n_head, hp.head_dim, pos.data() + (N - nq),
            session_->weights().rope);
    std::vector<double> mass(static_cast<size_t>(N), 0.0);
    const int group = hp.n_head / hp.n_head_kv;
    for (int64_t i = 0; i < nq; ++i) {
        const int64_t limit = N - nq + i + 1;
        for (int h = 0; h < hp.n_head; ++h) {
            std::vector<double> p(static_cast<size_t>(limit));
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j < limit; ++j) {
                const uint16_t* k = cache.k(1) + j * cache.row_elems() + (h / group) * hd;
                double dot = 0;
                for (int64_t d = 0; d < hd; ++d) {
                    dot += static_cast<double>(q[static_cast<size_t>(i * qd + h * hd + d)]) *
                           fp16_to_fp32(k[d]);
                }
                p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(hd));
                mx = std::max(mx, p[static_cast<size_t>(j)]);
            }
            for (double& x : p) sum += (x = std::exp(x - mx));
            for (int64_t j = 0; j < limit; ++j) mass[static_cast<size_t>(j)] += p[static_cast<size_t>(j)] / sum;
        }
    }
    std::vector<int32_t> reused;
    for (int32_t c = 0; c < 3; ++c) {
        for (size_t i = 0; i < req_.chunks[static_cast<size_t>(c)].size(); ++i) {
            reused.push_back(first_row_[static_cast<size_t>(c)] + static_cast<int32_t>(i));
        }
    }
    std::stable_sort(reused.begin(), reused.end(), [&](int32_t a, int32_t b) {
        return mass[static_cast<size_t>(a)] > mass[static_cast<size_t>(b)];
    });
    const size_t k = static_cast<size_t>(std::ceil(r * static_cast<double>(n_reused_) - 1e-9));
    const std::set<int32_t> expect =
        with_computed(std::set<int32_t>(reused.begin(), reused.begin() + static_cast<long>(k)));
    const std::set<int32_t> got(st.recomputed_rows.begin(), st.recomputed_rows.end());
    EXPECT_EQ(got.size(), expect.size());
    size_t same = 0;
    for (int32_t x : got) same += expect.count(x);
    // Float vs double sums may swap rows within noise of the cut.
    EXPECT_GE(same + 1, expect.size()) << "query selection differs beyond a boundary tie";
    // And it is not the deviation's choice (the test would not tell the signals apart).
    blend_stats hk;
    run(blend_mode::blend, r, select_policy::hkvd, &hk);
    EXPECT_NE(hk.recomputed_rows, st.recomputed_rows);
}

// A calibrated session runs the record's policy with its ratio.
TEST_F(BlendPolicyTest, CalibratedSessionRunsTheRecordsPolicy) {
    precompute_all(kv_format::f16);
    calibration c;
    c.model_fingerprint = model_->fingerprint();
    c.format = kv_format::f16;
    c.ratio = 2.5f / static_cast<float>(n_reused_);  // 3 rows: each chunk's first
    c.met = true;
    c.metric = "fidelity";
    c.target = 0.9;
    c.value = 0.95;
    c.records = 4;
    c.select = select_policy::sink;
    write_calibration(store_->dir(), c);
    blend_params p;
    p.ratio_calibrated = true;
    blend_stats st;
    run(p, &st);
    EXPECT_EQ(std::set<int32_t>(st.recomputed_rows.begin(), st.recomputed_rows.end()),
              with_computed({first_row_[0], first_row_[1], first_row_[2]}));
}

}  // namespace
