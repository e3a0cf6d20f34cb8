// The experimental C API (cacheblend_experimental.h) on the real default model, and the metadata
// filter of the stable search/ask params: the prompt layouts agree with cbl_session_prefill_chunks,
// the first-token logits survive generation and give its first token, precompute fills the store
// once, the blending knobs are checked, and bad input is an error code, never a crash. (The
// evaluation metrics and the musique layout are the eval library's: tests/unit/test_eval_*.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "util/cli-runner.h"
#include "util/test-util.h"

namespace {

using cbltest::shell_quote;

const char* k_chunks[] = {
    "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, rises 5,895 "
    "metres above sea level.",
    "The Amazon river flows through Brazil, Peru and Colombia. It carries more water than any "
    "other river on Earth.",
};
const char* k_question = "Which country is Kilimanjaro in?";

class CapiExperimental : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        char tmpl[] = "/tmp/cbl-capix-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        ASSERT_EQ(cbl_model_load(path.c_str(), nullptr, &model_), CBL_OK) << cbl_last_error();
        ASSERT_EQ(cbl_kvstore_open((dir_ + "/kv").c_str(), nullptr, &store_), CBL_OK)
            << cbl_last_error();
        session_ = make_session();
        ASSERT_NE(session_, nullptr);
    }
    void TearDown() override {
        cbl_session_free(session_);
        cbl_kvstore_free(store_);
        cbl_model_free(model_);
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    cbl_session* make_session() {
        cbl_session_params sp;
        cbl_session_params_init(&sp);
        sp.n_ctx = 512;
        sp.n_threads = 2;
        cbl_session* s = nullptr;
        EXPECT_EQ(cbl_session_create_with(model_, store_, &sp, &s), CBL_OK) << cbl_last_error();
        return s;
    }

    static cbl_x_prompt chunks_prompt() {
        cbl_x_prompt p;
        cbl_x_prompt_init(&p);
        p.format = CBL_X_PROMPT_CHUNKS;
        p.chunks = k_chunks;
        p.n_chunks = 2;
        p.question = k_question;
        return p;
    }

    std::vector<float> logits() const {
        size_t n = 0;
        const float* l = cbl_x_session_logits(session_, &n);
        return l ? std::vector<float>(l, l + n) : std::vector<float>();
    }

    std::string dir_;
    cbl_model* model_ = nullptr;
    cbl_kvstore* store_ = nullptr;
    cbl_session* session_ = nullptr;
};

TEST_F(CapiExperimental, ChunksLayoutIsPrefillChunks) {
    // Same prompt tokens and, on a warm store, the same blended logits as the stable call.
    const cbl_x_prompt p = chunks_prompt();
    size_t n_tokens = 0;
    ASSERT_EQ(cbl_x_prompt_tokens(model_, &p, &n_tokens), CBL_OK) << cbl_last_error();
    size_t computed = 99;
    ASSERT_EQ(cbl_x_session_precompute_prompt(session_, &p, &computed), CBL_OK) << cbl_last_error();
    EXPECT_EQ(computed, 2u);
    ASSERT_EQ(cbl_x_session_precompute_prompt(session_, &p, &computed), CBL_OK);
    EXPECT_EQ(computed, 0u) << "a second precompute finds both chunks stored";

    cbl_stats st;
    cbl_stats_init(&st);
    ASSERT_EQ(cbl_session_prefill_chunks(session_, k_chunks, nullptr, 2, k_question, &st), CBL_OK)
        << cbl_last_error();
    size_t n_prompt = 0;
    ASSERT_NE(cbl_session_prompt_tokens(session_, &n_prompt), nullptr);
    EXPECT_EQ(n_prompt, n_tokens);
    EXPECT_EQ(st.chunks_hit, 2);
    const std::vector<float> stable = logits();
    ASSERT_EQ(stable.size(), static_cast<size_t>(cbl_model_n_vocab(model_)));

    cbl_stats_init(&st);
    ASSERT_EQ(cbl_x_session_prefill_prompt(session_, &p, &st), CBL_OK) << cbl_last_error();
    EXPECT_EQ(st.prompt_tokens, static_cast<int64_t>(n_tokens));
    EXPECT_EQ(st.chunks_hit, 2);
    EXPECT_EQ(logits(), stable);
}

TEST_F(CapiExperimental, LogitsOutliveGenerationAndGiveItsFirstToken) {
    size_t n = 7;
    EXPECT_EQ(cbl_x_session_logits(session_, &n), nullptr) << "no prefill yet";
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(cbl_x_session_logits(nullptr, &n), nullptr);

    cbl_x_blend_params bp;
    cbl_x_blend_params_init(&bp);
    bp.mode = CBL_MODE_FULL;
    ASSERT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_OK) << cbl_last_error();
    const cbl_x_prompt p = chunks_prompt();
    ASSERT_EQ(cbl_x_session_prefill_prompt(session_, &p, nullptr), CBL_OK) << cbl_last_error();
    const std::vector<float> before = logits();
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = 4;
    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_generate(session_, &gp, &a), CBL_OK) << cbl_last_error();
    EXPECT_EQ(logits(), before);
    size_t n_tok = 0;
    const int32_t* toks = cbl_answer_tokens(a, &n_tok);
    ASSERT_GT(n_tok, 0u);
    size_t best = 0;
    for (size_t i = 1; i < before.size(); ++i) {
        if (before[i] > before[best]) best = i;
    }
    EXPECT_EQ(toks[0], static_cast<int32_t>(best)) << "greedy decoding starts at the argmax";
    cbl_answer_free(a);
}

TEST_F(CapiExperimental, BlendKnobsAreChecked) {
    cbl_x_blend_params bp;
    cbl_x_blend_params_init(&bp);
    EXPECT_EQ(bp.mode, CBL_MODE_BLEND);
    EXPECT_FLOAT_EQ(bp.recompute_ratio, 0.15f);
    EXPECT_EQ(cbl_x_session_set_blend(nullptr, &bp), CBL_INVALID_ARG);

    const int32_t layers[] = {1, 3};
    const float ratios[] = {0.3f, 0.15f};
    bp.check_layers = layers;
    bp.n_check_layers = 2;
    bp.check_ratios = ratios;
    bp.deviation = CBL_X_DEVIATION_KV;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_OK) << cbl_last_error();

    const float rising[] = {0.1f, 0.2f};
    bp.check_ratios = rising;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG);
    EXPECT_NE(std::strstr(cbl_last_error(), "non-increasing"), nullptr) << cbl_last_error();
    bp.check_ratios = ratios;
    const int32_t past_end[] = {1, 1000};
    bp.check_layers = past_end;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG);
    bp.check_layers = nullptr;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG) << "n_check_layers without an array";
    bp.n_check_layers = 0;
    bp.check_ratios = nullptr;
    bp.deviation = 42;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG);
    bp.deviation = CBL_X_DEVIATION_DEFAULT;
    bp.recompute_ratio = std::nanf("");
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG);
    bp.recompute_ratio = 0.f;  // a ratio, not "default", in the experimental struct
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_OK) << cbl_last_error();
    bp.mode = 99;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG);
}

// The selection policy knob (issue 15): every CBL_X_SELECT_* is accepted, an unknown one is
// CBL_INVALID_ARG naming the valid policies, and the names come from the library's table.
TEST_F(CapiExperimental, SelectPolicyKnob) {
    cbl_x_blend_params bp;
    cbl_x_blend_params_init(&bp);
    EXPECT_EQ(bp.select, CBL_X_SELECT_DEFAULT);
    for (int32_t v : {CBL_X_SELECT_DEFAULT, CBL_X_SELECT_HKVD, CBL_X_SELECT_SINK,
                      CBL_X_SELECT_SINK_HKVD, CBL_X_SELECT_QUERY, CBL_X_SELECT_QUERY_HKVD}) {
        bp.select = v;
        EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_OK) << v << cbl_last_error();
    }
    bp.select = 6;
    EXPECT_EQ(cbl_x_session_set_blend(session_, &bp), CBL_INVALID_ARG);
    EXPECT_NE(std::strstr(cbl_last_error(), "hkvd, sink, sink+hkvd, query, query+hkvd"), nullptr)
        << cbl_last_error();
    EXPECT_STREQ(cbl_enum_name(CBL_X_NAMES_SELECT, CBL_X_SELECT_DEFAULT), "hkvd");
    EXPECT_STREQ(cbl_enum_name(CBL_X_NAMES_SELECT, CBL_X_SELECT_SINK_HKVD), "sink+hkvd");
    int32_t v = 0;
    EXPECT_EQ(cbl_enum_parse(CBL_X_NAMES_SELECT, "query+hkvd", &v), CBL_OK);
    EXPECT_EQ(v, CBL_X_SELECT_QUERY_HKVD);
    EXPECT_EQ(cbl_enum_parse(CBL_X_NAMES_SELECT, "random", &v), CBL_INVALID_ARG);
}

TEST_F(CapiExperimental, PromptLayoutsAndBadPrompts) {
    // The custom layout: its own system and preamble change the prompt's tokens.
    size_t n_chunks = 0, n_custom = 0;
    const cbl_x_prompt c = chunks_prompt();
    ASSERT_EQ(cbl_x_prompt_tokens(model_, &c, &n_chunks), CBL_OK);
    cbl_x_prompt custom = chunks_prompt();
    custom.format = CBL_X_PROMPT_CUSTOM;
    custom.system = "Answer briefly.";
    custom.preamble = "Documents:\n";
    ASSERT_EQ(cbl_x_prompt_tokens(model_, &custom, &n_custom), CBL_OK) << cbl_last_error();
    EXPECT_GT(n_custom, 0u);
    EXPECT_NE(n_custom, n_chunks);
    ASSERT_EQ(cbl_x_session_prefill_prompt(session_, &custom, nullptr), CBL_OK) << cbl_last_error();
    size_t n_prompt = 0;
    cbl_session_prompt_tokens(session_, &n_prompt);
    EXPECT_EQ(n_prompt, n_custom);

    size_t n = 0;
    EXPECT_EQ(cbl_x_prompt_tokens(model_, nullptr, &n), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_x_prompt_tokens(nullptr, &c, &n), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_x_session_prefill_prompt(nullptr, &c, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_x_session_precompute_prompt(session_, nullptr, &n), CBL_INVALID_ARG);
    cbl_x_prompt bad = chunks_prompt();
    bad.system = "not for this layout";
    EXPECT_EQ(cbl_x_prompt_tokens(model_, &bad, &n), CBL_INVALID_ARG);
    // 1 was the musique layout, now built by the eval library and passed as CUSTOM: the runtime
    // library no longer knows it, and an old caller gets an error, not another layout.
    bad = chunks_prompt();
    bad.format = 1;
    EXPECT_EQ(cbl_x_prompt_tokens(model_, &bad, &n), CBL_INVALID_ARG);
    EXPECT_NE(std::strstr(cbl_last_error(), "unknown prompt format 1"), nullptr) << cbl_last_error();
    bad = chunks_prompt();
    bad.question = "  \n";
    EXPECT_EQ(cbl_x_session_prefill_prompt(session_, &bad, nullptr), CBL_INVALID_ARG);
    const char* blank_chunk[] = {"fine", " \t"};
    bad = chunks_prompt();
    bad.chunks = blank_chunk;
    EXPECT_EQ(cbl_x_prompt_tokens(model_, &bad, &n), CBL_INVALID_ARG);
    EXPECT_NE(std::strstr(cbl_last_error(), "chunk 1"), nullptr) << cbl_last_error();
    const char* null_chunk[] = {"fine", nullptr};
    bad.chunks = null_chunk;
    EXPECT_EQ(cbl_x_prompt_tokens(model_, &bad, &n), CBL_INVALID_ARG);
    bad = chunks_prompt();
    bad.format = 7;
    EXPECT_EQ(cbl_x_prompt_tokens(model_, &bad, &n), CBL_INVALID_ARG);
    bad = chunks_prompt();
    bad.struct_size = 0;
    EXPECT_EQ(cbl_x_prompt_tokens(model_, &bad, &n), CBL_INVALID_ARG);
    // The session still works after every refusal.
    EXPECT_EQ(cbl_x_session_prefill_prompt(session_, &c, nullptr), CBL_OK) << cbl_last_error();
}

TEST_F(CapiExperimental, CalibratedSessionsUseTheRecordedRatio) {
    const cbl_x_prompt p = chunks_prompt();
    ASSERT_EQ(cbl_x_session_precompute_prompt(session_, &p, nullptr), CBL_OK) << cbl_last_error();
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 512;
    sp.n_threads = 2;
    sp.calibrated_ratio = true;
    std::string notice;  // st.notice lives only as long as its session
    const auto prefill = [&](cbl_stats* st) {
        cbl_session* s = nullptr;
        ASSERT_EQ(cbl_session_create_with(model_, store_, &sp, &s), CBL_OK) << cbl_last_error();
        cbl_stats_init(st);
        ASSERT_EQ(cbl_x_session_prefill_prompt(s, &p, st), CBL_OK) << cbl_last_error();
        notice = st->notice;
        st->notice = nullptr;
        cbl_session_free(s);
    };

    // No record yet: the default ratio, and the notice says so.
    cbl_x_calibration c;
    bool found = true;
    ASSERT_EQ(cbl_x_kvstore_calibration(store_, model_, CBL_KV_F16, &c, &found), CBL_OK);
    EXPECT_FALSE(found);
    cbl_stats st;
    prefill(&st);
    EXPECT_EQ(st.mode, CBL_MODE_BLEND);
    EXPECT_FLOAT_EQ(st.ratio, 0.15f);
    EXPECT_NE(notice.find("no calibration"), std::string::npos) << notice;

    // A record that met its target sets the ratio.
    cbl_x_calibration_init(&c);
    c.ratio = 0.3f;
    c.met = true;
    std::strcpy(c.metric, "kl");
    c.target = 0.05;
    c.value = 0.04;
    c.records = 20;
    ASSERT_EQ(cbl_x_kvstore_set_calibration(store_, model_, CBL_KV_F16, &c), CBL_OK) << cbl_last_error();
    cbl_x_calibration back;
    cbl_x_calibration_init(&back);
    ASSERT_EQ(cbl_x_kvstore_calibration(store_, model_, CBL_KV_F16, &back, &found), CBL_OK);
    ASSERT_TRUE(found);
    EXPECT_FLOAT_EQ(back.ratio, 0.3f);
    EXPECT_STREQ(back.metric, "kl");
    EXPECT_EQ(back.records, 20);
    EXPECT_EQ(back.select, CBL_X_SELECT_HKVD) << "no policy given: hkvd";
    ASSERT_EQ(cbl_x_kvstore_calibration(store_, model_, CBL_KV_Q8, &back, &found), CBL_OK);
    EXPECT_FALSE(found) << "records are per KV format";
    prefill(&st);
    EXPECT_EQ(st.mode, CBL_MODE_BLEND);
    EXPECT_FLOAT_EQ(st.ratio, 0.3f);
    EXPECT_EQ(notice, "");

    // The record keeps its policy; an unknown one is refused.
    c.select = CBL_X_SELECT_SINK;
    ASSERT_EQ(cbl_x_kvstore_set_calibration(store_, model_, CBL_KV_F16, &c), CBL_OK);
    ASSERT_EQ(cbl_x_kvstore_calibration(store_, model_, CBL_KV_F16, &back, &found), CBL_OK);
    EXPECT_EQ(back.select, CBL_X_SELECT_SINK);
    c.select = 42;
    EXPECT_EQ(cbl_x_kvstore_set_calibration(store_, model_, CBL_KV_F16, &c), CBL_INVALID_ARG);
    c.select = CBL_X_SELECT_DEFAULT;

    // A record where no ratio met the target: full prefill, with the reason.
    c.ratio = 1.f;
    c.met = false;
    std::strcpy(c.metric, "fidelity");
    c.target = 0.9;
    ASSERT_EQ(cbl_x_kvstore_set_calibration(store_, model_, CBL_KV_F16, &c), CBL_OK);
    prefill(&st);
    EXPECT_EQ(st.mode, CBL_MODE_FULL);
    EXPECT_EQ(st.tokens_reused, 0);
    EXPECT_NE(notice.find("fidelity >= 0.9"), std::string::npos) << notice;

    // Bad arguments.
    EXPECT_EQ(cbl_x_kvstore_set_calibration(nullptr, model_, CBL_KV_F16, &c), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_x_kvstore_set_calibration(store_, model_, 9, &c), CBL_INVALID_ARG);
    std::memset(c.metric, 'a', sizeof(c.metric));
    EXPECT_EQ(cbl_x_kvstore_set_calibration(store_, model_, CBL_KV_F16, &c), CBL_INVALID_ARG);
    std::strcpy(c.metric, "Bad Metric");
    EXPECT_EQ(cbl_x_kvstore_set_calibration(store_, model_, CBL_KV_F16, &c), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_x_kvstore_calibration(store_, model_, CBL_KV_F16, &back, nullptr), CBL_INVALID_ARG);
}

TEST(CapiExperimentalModels, DefaultModelPath) {
    char* s = nullptr;
    ASSERT_EQ(cbl_x_default_model_path(&s), CBL_OK);
    EXPECT_GT(std::strlen(s), 0u);
    cbl_free(s);
}

// The metadata filter of cbl_search_params and cbl_ask_params (stable API).
TEST(CapiMetadataFilter, SearchAndAskKeepOnlyMatchingDocuments) {
    CBL_REQUIRE_DEFAULT_MODEL(path);
    char tmpl[] = "/tmp/cbl-capim-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    ASSERT_NE(d, nullptr);
    const std::string dir = d;
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.model_path = path.c_str();
    const std::string data = dir + "/data";
    rp.data_dir = data.c_str();
    rp.n_threads = 2;
    cbl_runtime* rt = nullptr;
    ASSERT_EQ(cbl_runtime_open(&rp, &rt), CBL_OK) << cbl_last_error();
    const char* docs[][3] = {
        {"mem://a", "Rivers: the Amazon carries more water than any other river.", "{\"lang\":\"en\"}"},
        {"mem://b", "Rivers: the Danube flows through ten countries of Europe.", "{\"lang\":\"de\"}"},
    };
    for (const auto& doc : docs) {
        cbl_ingest_params ip;
        cbl_ingest_params_init(&ip);
        ip.metadata_json = doc[2];
        ASSERT_EQ(cbl_runtime_ingest_text(rt, doc[0], doc[1], std::strlen(doc[1]), &ip, nullptr),
                  CBL_OK)
            << cbl_last_error();
    }
    const char* keys[] = {"lang"};
    const char* values[] = {"de"};
    cbl_search_params sp;
    cbl_search_params_init(&sp);
    sp.mode = CBL_SEARCH_BM25;
    sp.metadata_keys = keys;
    sp.metadata_values = values;
    sp.n_metadata = 1;
    cbl_results* r = nullptr;
    ASSERT_EQ(cbl_runtime_search(rt, "rivers", &sp, &r), CBL_OK) << cbl_last_error();
    ASSERT_EQ(cbl_results_count(r), 1u);
    EXPECT_EQ(cbl_results_mode(r), CBL_SEARCH_BM25);
    cbl_hit h;
    cbl_hit_init(&h);
    ASSERT_EQ(cbl_results_hit(r, 0, &h), CBL_OK);
    EXPECT_STREQ(h.uri, "mem://b");
    cbl_results_free(r);
    EXPECT_EQ(cbl_results_mode(nullptr), 0);

    const char* bad_keys[] = {"la ng"};
    sp.metadata_keys = bad_keys;
    EXPECT_EQ(cbl_runtime_search(rt, "rivers", &sp, &r), CBL_INVALID_ARG);
    EXPECT_EQ(r, nullptr);
    sp.metadata_keys = nullptr;
    EXPECT_EQ(cbl_runtime_search(rt, "rivers", &sp, &r), CBL_INVALID_ARG);

    cbl_session* s = nullptr;
    ASSERT_EQ(cbl_session_create(rt, nullptr, &s), CBL_OK) << cbl_last_error();
    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.search_mode = CBL_SEARCH_BM25;
    ap.max_tokens = 2;
    ap.metadata_keys = keys;
    ap.metadata_values = values;
    ap.n_metadata = 1;
    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_ask(s, "Which river flows through Europe?", &ap, &a), CBL_OK)
        << cbl_last_error();
    ASSERT_EQ(cbl_answer_n_citations(a), 1u);
    cbl_hit_init(&h);
    ASSERT_EQ(cbl_answer_citation(a, 0, &h), CBL_OK);
    EXPECT_STREQ(h.uri, "mem://b");
    cbl_answer_free(a);
    cbl_session_free(s);
    cbl_runtime_free(rt);
    EXPECT_EQ(std::system(("rm -rf " + shell_quote(dir)).c_str()), 0);
}

}  // namespace
