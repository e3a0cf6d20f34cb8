// The blended prefill's steps on the real model (issue 12, item 3): a chunk's SHA-256 key is
// computed once per request, however many steps (lookup, write-back, precompute, the catalog's
// key_of) need it, and stays right when the format changes; generation stops and blend modes
// travel as enums and become CBL_STOP_* / CBL_MODE_* only at the C boundary.
#include <chrono>

#include "capi/src/convert.h"
#include "core/blend/blend.h"
#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/kv-store.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

class BlendStepsTest : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = model::load(path);
        session_params sp;
        sp.n_ctx = 512;
        sp.n_threads = 2;
        session_ = std::make_unique<session>(model_, sp);
        dir_ = cbltest::make_temp_dir("cbl-blend-steps");
        kv_store_params kp;
        kp.dir = dir_ + "/kv";
        store_ = kv_store::open(kp);
        const tokenizer& t = model_->vocab();
        req_.preamble =
            t.encode("<|im_start|>system\nAnswer from the passages.<|im_end|>\n", false, true);
        for (const char* p :
             {"The Amazon river flows through Brazil, Peru and Colombia.\n",
              "Mount Kilimanjaro is a dormant volcano in Tanzania.\n",
              "The Danube rises in the Black Forest and reaches the Black Sea.\n"}) {
            req_.chunks.push_back(t.encode(p, false, false));
        }
        req_.question =
            t.encode("<|im_start|>user\nWhere is Kilimanjaro?<|im_end|>\n", false, true);
    }
    void TearDown() override {
        session_.reset();
        store_.reset();
        if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
    }

    // What rag_session::ask does after its prefill: write back the misses, make sure every
    // chunk is stored and record each chunk's key in the catalog.
    void ask_like(blend_engine& eng) {
        blend_stats st;
        eng.prefill(req_, &st);
        eng.write_back_misses();
        for (const auto& c : req_.chunks) {
            eng.precompute_chunk(req_.preamble, c);
            keys_.push_back(eng.key_of(req_.preamble, c).hex());
        }
    }

    std::shared_ptr<const model> model_;
    std::unique_ptr<session> session_;
    std::shared_ptr<kv_store> store_;
    std::string dir_;
    blend_request req_;
    std::vector<std::string> keys_;
};

TEST_F(BlendStepsTest, EachChunkKeyIsHashedOncePerRequest) {
    blend_engine eng(*session_, store_, {});
    const uint64_t before = chunk_keys_made();
    ask_like(eng);  // every chunk misses, is written back, then found stored
    EXPECT_EQ(chunk_keys_made() - before, req_.chunks.size()) << "first request (misses)";
    const uint64_t again = chunk_keys_made();
    ask_like(eng);  // every chunk hits
    EXPECT_EQ(chunk_keys_made() - again, req_.chunks.size()) << "second request (hits)";
    for (size_t c = 0; c < req_.chunks.size(); ++c) {
        const chunk_key want =
            make_chunk_key(model_->fingerprint(), static_cast<uint32_t>(kv_format::f16),
                           req_.preamble, req_.chunks[c]);
        EXPECT_EQ(keys_[c], want.hex()) << c;
        EXPECT_EQ(keys_[c + req_.chunks.size()], want.hex()) << c;
        EXPECT_TRUE(store_->contains(want)) << c;
    }
}

TEST_F(BlendStepsTest, BlendingRunsOnTheSessionsOneForwardEngine) {
    // Micro-batches of 8 rows: a blended prefill (every row of a layer at once) needs more, and
    // must get them from the session's engine, not from a second engine of its own.
    session_params sp;
    sp.n_ctx = 512;
    sp.n_threads = 2;
    sp.n_batch = 8;
    session s(model_, sp);
    EXPECT_EQ(s.engine(1).max_rows(), 8);
    blend_engine eng(s, store_, {});
    blend_stats st;
    const std::vector<float> logits = eng.prefill(req_, &st);
    const int32_t n = s.n_past();
    ASSERT_GT(n, 8);
    forward_engine* one = &s.engine(1);
    EXPECT_GE(one->max_rows(), n)
        << "the blended prefill ran on an engine the session does not own";
    // Decode continues on the same engine, from the blended cache.
    s.decode(req_.question.back());
    EXPECT_EQ(&s.engine(1), one);
    EXPECT_EQ(s.n_past(), n + 1);
    // A precompute of a longer [preamble][chunk] grows that engine again, not a private one.
    std::vector<token_id> longer;
    while (static_cast<int32_t>(longer.size()) <= n) {
        longer.insert(longer.end(), req_.chunks[0].begin(), req_.chunks[0].end());
    }
    EXPECT_TRUE(eng.precompute_chunk(req_.preamble, longer));
    EXPECT_GE(s.engine(1).max_rows(), static_cast<int32_t>(req_.preamble.size() + longer.size()));
    EXPECT_THROW(s.engine(513), error) << "more rows than the context holds";
}

TEST_F(BlendStepsTest, AChunkOutsideARequestIsHashedOnceForPrecomputeAndItsKey) {
    // Ingest with precompute: precompute_chunk, then key_of for the catalog.
    blend_engine eng(*session_, store_, {});
    const uint64_t before = chunk_keys_made();
    EXPECT_TRUE(eng.precompute_chunk(req_.preamble, req_.chunks[1]));
    const chunk_key k = eng.key_of(req_.preamble, req_.chunks[1]);
    EXPECT_EQ(chunk_keys_made() - before, 1u);
    EXPECT_EQ(k, make_chunk_key(model_->fingerprint(), static_cast<uint32_t>(kv_format::f16),
                                req_.preamble, req_.chunks[1]));
    // Another chunk is its own key.
    EXPECT_NE(eng.key_of(req_.preamble, req_.chunks[2]), k);
}

TEST_F(BlendStepsTest, AKeyRememberedForOneFormatIsNotReusedForAnother) {
    blend_params p;
    p.write_back = false;
    blend_engine eng(*session_, store_, p);
    blend_stats st;
    eng.prefill(req_, &st);
    const chunk_key f16 = eng.key_of(req_.preamble, req_.chunks[0]);
    p.format = kv_format::q8;
    eng.set_params(p);
    const chunk_key q8 = eng.key_of(req_.preamble, req_.chunks[0]);
    EXPECT_NE(f16, q8);
    EXPECT_EQ(q8, make_chunk_key(model_->fingerprint(), static_cast<uint32_t>(kv_format::q8),
                                 req_.preamble, req_.chunks[0]));
}

TEST_F(BlendStepsTest, StatsCarryTheModeThatRanAndTheCBoundaryNamesIt) {
    blend_params p;
    p.write_back = false;
    for (blend_mode m :
         {blend_mode::full, blend_mode::prefix, blend_mode::reuse, blend_mode::blend}) {
        p.mode = m;
        blend_engine eng(*session_, store_, p);
        blend_stats st;
        eng.prefill(req_, &st);
        EXPECT_EQ(st.mode, m) << blend_mode_name(m);
    }
    EXPECT_EQ(capi::mode_code(blend_mode::full), CBL_MODE_FULL);
    EXPECT_EQ(capi::mode_code(blend_mode::prefix), CBL_MODE_PREFIX);
    EXPECT_EQ(capi::mode_code(blend_mode::reuse), CBL_MODE_REUSE);
    EXPECT_EQ(capi::mode_code(blend_mode::blend), CBL_MODE_BLEND);
    blend_stats st;
    st.mode = blend_mode::reuse;
    EXPECT_EQ(capi::to_stats(st, nullptr, "").mode, CBL_MODE_REUSE);
}

TEST_F(BlendStepsTest, GenerationStopsAreEnumsUntilTheCBoundary) {
    generation_params gp;
    gp.max_tokens = 1;
    gp.ignore_eog = true;
    const std::vector<token_id> prompt = req_.question;
    EXPECT_EQ(session_->generate(prompt, gp).stop_reason, generation_stop::length);
    gp.max_tokens = 4;
    const generation_result stopped =
        session_->generate(prompt, gp, [](token_id, const std::string&) { return false; });
    EXPECT_EQ(stopped.stop_reason, generation_stop::callback);
    EXPECT_EQ(capi::stop_code(generation_stop::none), CBL_STOP_NONE);
    EXPECT_EQ(capi::stop_code(generation_stop::eog), CBL_STOP_EOG);
    EXPECT_EQ(capi::stop_code(generation_stop::length), CBL_STOP_LENGTH);
    EXPECT_EQ(capi::stop_code(generation_stop::context), CBL_STOP_CONTEXT);
    EXPECT_EQ(capi::stop_code(generation_stop::callback), CBL_STOP_CALLBACK);
    // A cancelled request fails with CBL_ABORTED; its stats never carry a stop reason.
    EXPECT_EQ(capi::stop_code(generation_stop::cancelled), CBL_STOP_NONE);
    blend_stats b;
    EXPECT_EQ(capi::to_stats(b, &stopped, "").stop_reason, CBL_STOP_CALLBACK);
}

}  // namespace
