// Sampling through the C ABI on the real default model (issue 11): the repetition penalties of
// cbl_generate_params and cbl_ask_params take effect, older (smaller) structs still work and get
// the defaults, bad values are CBL_INVALID_ARG, and ask's defaults end a loop that plain greedy
// decoding falls into.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "util/cli-runner.h"
#include "util/test-util.h"

namespace {

// One document, so that retrieval (dense or BM25 alike) always gives the same prompt.
const char k_doc[] =
    "The Amazon river flows through Brazil, Peru and Colombia. It carries more water than any "
    "other river on Earth.";
// Plain greedy answers it by repeating one sentence until max_tokens on SmolLM2-135M.
const char k_looping_question[] = "Tell me everything about the Amazon river.";

std::vector<int32_t> tokens_of(const cbl_answer* a) {
    size_t n = 0;
    const int32_t* t = cbl_answer_tokens(a, &n);
    return std::vector<int32_t>(t, t + n);
}

// True when some run of n tokens occurs twice: the signature of a loop.
bool repeats_an_ngram(const std::vector<int32_t>& t, size_t n) {
    std::set<std::vector<int32_t>> seen;
    for (size_t i = 0; i + n <= t.size(); ++i) {
        const auto at = t.begin() + static_cast<std::ptrdiff_t>(i);
        if (!seen.insert(std::vector<int32_t>(at, at + static_cast<std::ptrdiff_t>(n))).second) {
            return true;
        }
    }
    return false;
}

class CapiSampling : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        char tmpl[] = "/tmp/cbl-sampling-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = path.c_str();
        const std::string data = dir_ + "/data";
        p.data_dir = data.c_str();
        p.n_threads = 2;
        ASSERT_EQ(cbl_runtime_open(&p, &rt_), CBL_OK) << cbl_last_error();
        ASSERT_EQ(cbl_runtime_ingest_text(rt_, "mem://amazon", k_doc, std::strlen(k_doc), nullptr,
                                          nullptr),
                  CBL_OK)
            << cbl_last_error();
        cbl_session_params sp;
        cbl_session_params_init(&sp);
        sp.n_ctx = 1024;
        sp.n_threads = 2;
        ASSERT_EQ(cbl_session_create(rt_, &sp, &s_), CBL_OK) << cbl_last_error();
    }
    void TearDown() override {
        cbl_session_free(s_);
        cbl_runtime_free(rt_);
        if (!dir_.empty() && std::system(("rm -rf " + cbltest::shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    std::vector<int32_t> ask(const cbl_ask_params& ap) {
        cbl_answer* a = nullptr;
        EXPECT_EQ(cbl_session_ask(s_, k_looping_question, &ap, &a), CBL_OK) << cbl_last_error();
        std::vector<int32_t> out = a ? tokens_of(a) : std::vector<int32_t>{};
        cbl_answer_free(a);
        return out;
    }

    // A plain prefill of `prompt`, then one generate; the prompt's ids go to *prompt_ids.
    std::vector<int32_t> generate(const std::string& prompt, const cbl_generate_params& gp,
                                  std::vector<int32_t>* prompt_ids = nullptr,
                                  cbl_status want = CBL_OK) {
        EXPECT_EQ(cbl_session_prefill_text(s_, prompt.data(), prompt.size(), nullptr, nullptr),
                  CBL_OK)
            << cbl_last_error();
        if (prompt_ids) {
            size_t n = 0;
            const int32_t* ids = cbl_session_prompt_tokens(s_, &n);
            prompt_ids->assign(ids, ids + n);
        }
        cbl_answer* a = nullptr;
        EXPECT_EQ(cbl_session_generate(s_, &gp, &a), want) << cbl_last_error();
        std::vector<int32_t> out = a ? tokens_of(a) : std::vector<int32_t>{};
        cbl_answer_free(a);
        return out;
    }

    std::string dir_;
    cbl_runtime* rt_ = nullptr;
    cbl_session* s_ = nullptr;
};

TEST_F(CapiSampling, AskDefaultsEndTheLoopOfPlainGreedy) {
    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.max_tokens = 128;
    ap.repeat_penalty = 1.f;  // off: plain greedy
    const std::vector<int32_t> greedy = ask(ap);
    // The premise: without a penalty the answer loops (a sentence of 8+ tokens comes back).
    ASSERT_TRUE(repeats_an_ngram(greedy, 8)) << "the question no longer loops under greedy";

    cbl_ask_params_init(&ap);
    ap.max_tokens = 128;
    const std::vector<int32_t> answer = ask(ap);
    EXPECT_GT(answer.size(), 32u);
    EXPECT_FALSE(repeats_an_ngram(answer, 8));

    // A caller built before the sampling fields existed gets the same defaults (greedy with a
    // penalty is deterministic); the bytes past its struct are never read.
    cbl_ask_params old;
    cbl_ask_params_init(&old);
    old.max_tokens = 128;
    old.repeat_penalty = -7.f;
    old.repeat_last_n = -9;
    old.struct_size = offsetof(cbl_ask_params, top_k);
    EXPECT_EQ(ask(old), answer);
}

TEST_F(CapiSampling, PenaltyWindowStartsInThePrompt) {
    const std::string prompt = "one two three one two three one two three one two";
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = 1;
    gp.ignore_eog = true;
    std::vector<int32_t> ids;
    const std::vector<int32_t> plain = generate(prompt, gp, &ids);
    ASSERT_EQ(plain.size(), 1u);
    const std::set<int32_t> in_prompt(ids.begin(), ids.end());
    ASSERT_TRUE(in_prompt.count(plain[0])) << "greedy should continue the pattern";

    // With a heavy penalty over the whole prompt, the first token is none of the prompt's.
    gp.repeat_penalty = 50.f;
    gp.repeat_last_n = -1;
    const std::vector<int32_t> penalized = generate(prompt, gp);
    ASSERT_EQ(penalized.size(), 1u);
    EXPECT_FALSE(in_prompt.count(penalized[0])) << penalized[0];

    // A window of one token penalizes only the last prompt token, which greedy did not pick.
    gp.repeat_last_n = 1;
    ASSERT_NE(plain[0], ids.back());
    EXPECT_EQ(generate(prompt, gp), plain);
}

TEST_F(CapiSampling, GenerateFieldsTakeEffectAndOldStructsKeepDefaults) {
    const std::string prompt = "List the rivers of South America:";
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = 48;
    gp.ignore_eog = true;
    const std::vector<int32_t> greedy = generate(prompt, gp);

    // An older caller's struct ends at min_p: the penalty bytes after it are not read, so this
    // is plain greedy (generate's default penalty is off).
    cbl_generate_params old = gp;
    old.repeat_penalty = 5.f;
    old.struct_size = offsetof(cbl_generate_params, repeat_penalty);
    EXPECT_EQ(generate(prompt, old), greedy);

    for (int field = 0; field < 3; ++field) {
        cbl_generate_params p = gp;
        if (field == 0) p.repeat_penalty = 1.5f;
        if (field == 1) p.frequency_penalty = 2.f;
        if (field == 2) p.presence_penalty = 2.f;
        const std::vector<int32_t> a = generate(prompt, p);
        EXPECT_NE(a, greedy) << "field " << field << " had no effect";
        EXPECT_EQ(generate(prompt, p), a) << "field " << field << " is not deterministic";
    }

    // Sampling with a seed repeats itself, penalties included.
    cbl_generate_params t = gp;
    t.temperature = 0.8f;
    t.seed = 11;
    t.repeat_penalty = 1.2f;
    EXPECT_EQ(generate(prompt, t), generate(prompt, t));
}

TEST_F(CapiSampling, BadPenaltiesAreInvalidArguments) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    struct bad_case {
        float repeat_penalty;
        int32_t repeat_last_n;
        float frequency_penalty;
        const char* message;
    };
    const bad_case cases[] = {
        {-1.f, 0, 0.f, "repeat_penalty"},
        {nan, 0, 0.f, "repeat_penalty"},
        {1.1f, -2, 0.f, "repeat_last_n"},
        {1.1f, 0, nan, "frequency_penalty"},
    };
    for (const bad_case& c : cases) {
        cbl_generate_params gp;
        cbl_generate_params_init(&gp);
        gp.max_tokens = 2;
        gp.repeat_penalty = c.repeat_penalty;
        gp.repeat_last_n = c.repeat_last_n;
        gp.frequency_penalty = c.frequency_penalty;
        generate("Hello", gp, nullptr, CBL_INVALID_ARG);
        EXPECT_NE(std::strstr(cbl_last_error(), c.message), nullptr) << cbl_last_error();

        cbl_ask_params ap;
        cbl_ask_params_init(&ap);
        ap.max_tokens = 2;
        ap.repeat_penalty = c.repeat_penalty;
        ap.repeat_last_n = c.repeat_last_n;
        ap.frequency_penalty = c.frequency_penalty;
        cbl_answer* a = reinterpret_cast<cbl_answer*>(1);
        EXPECT_EQ(cbl_session_ask(s_, "Where does the Amazon flow?", &ap, &a), CBL_INVALID_ARG);
        EXPECT_EQ(a, nullptr);
        EXPECT_NE(std::strstr(cbl_last_error(), "cbl_session_ask"), nullptr) << cbl_last_error();
        EXPECT_NE(std::strstr(cbl_last_error(), c.message), nullptr) << cbl_last_error();
    }
}

}  // namespace
