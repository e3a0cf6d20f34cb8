// Our engine against llama.cpp, using fixtures recorded by scripts/peer/gen-fixtures.py (CI needs
// no llama.cpp), on each model we have fixtures for:
//   smollm2-135m        the default model (CBL_MODEL)  tests/data/llama-cpp-parity.json
//   qwen2.5-coder-0.5b  CBL_QWEN_MODEL                 tests/data/llama-cpp-parity-qwen2.5-coder-0.5b.json
//   qwen2.5-coder-1.5b  CBL_QWEN15_MODEL               tests/data/llama-cpp-parity-qwen2.5-coder-1.5b.json
// Targets (issues 2 and 11):
//   - identical prompt ids on every case (64: plain text of many kinds and ChatML chats, whose
//     rendering must also match llama.cpp's), identical ids on the tokenizer-only strings and the
//     same end-of-generation token set;
//   - greedy continuations: we decode along llama.cpp's path; a case agrees when it never parts
//     from llama.cpp, or parts at a numerical near-tie: our token is llama.cpp's second choice and
//     llama.cpp's own gap between its top two log-probabilities is <= near_tie. Required on >= 90%
//     of cases. Our K-quant kernels are not bit-exact with ggml's, so near-ties are expected there;
//   - first-token top-1 agreement on >= 98% (SmolLM2) / 95% (Qwen) of cases.
// The numbers (and every divergence: case, step, both tokens, llama.cpp's gap) are printed on every
// run. The Qwen cases take minutes and are skipped in sanitizer builds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "core/engine/sampler.h"
#include "core/engine/session.h"
#include "core/model/model.h"
#include "core/prompt/chat-template.h"
#include "util/json.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

struct parity_model {
    const char* name;     // also the test name suffix
    const char* env;      // variable holding the GGUF's path; nullptr: the default model
    bool required;        // env set but the file missing fails under CBL_REQUIRE_MODEL=1
    const char* fixture;  // in tests/data
    double near_tie;      // max llama.cpp gap (top1 - top2 logprob) at an accepted divergence
    double min_cont_ok;   // fraction of cases whose continuation agrees
    double min_first_ok;  // fraction of cases with the same first token
    bool heavy;           // skipped in sanitizer builds (Release on 2 busy cores: 0.5B 2-3 min,
                          // 1.5B ~7 min; ASan is ~7x slower)
};

void PrintTo(const parity_model& p, std::ostream* os) { *os << p.name; }

// Thresholds. SmolLM2 (Q4_1 layers, Q8_0 embeddings) matches llama.cpp to the fixtures' 5
// decimals, so it keeps the tight 0.1. On the Qwen models (Q4_K, Q6_K, Q5_0, Q8_0) our kernels are
// not bit-exact with ggml's (other accumulation order, ggml repacks Q4_K). Measured 2026-11-27:
//   0.5B: |logprob diff| of llama.cpp's token over 1644 steps p50 0.004, p99 0.12, max 0.39;
//         15 divergences in 64 cases at llama.cpp gaps 0.000-0.210 (median 0.034), ours its #2
//         in 14 (the other: #3 at gap 0.034);
//   1.5B: over 1427 steps p50 0.005, p99 0.16, max 0.26; 27 divergences at gaps 0.001-0.227
//         (median 0.057), ours its #2 in 26 (the other: #3 at gap 0.212).
// A threshold of 0.25 accepts those with a little margin (0.1 would pass only 89% of 1.5B's
// cases); a broken kernel moves logits by far more and parts at large gaps or ranks.
const parity_model k_models[] = {
    {"smollm2_135m", nullptr, true, "llama-cpp-parity.json", 0.1, 0.90, 0.98, false},
    {"qwen2_5_coder_0_5b", "CBL_QWEN_MODEL", true, "llama-cpp-parity-qwen2.5-coder-0.5b.json", 0.25,
     0.90, 0.95, true},
    {"qwen2_5_coder_1_5b", "CBL_QWEN15_MODEL", false, "llama-cpp-parity-qwen2.5-coder-1.5b.json",
     0.25, 0.90, 0.95, true},
};

bool sanitized_build() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

bool require_model() {
    const char* req = std::getenv("CBL_REQUIRE_MODEL");
    return req && std::string(req) == "1";
}

// llama.cpp's log-probability of `id` at a recorded step, or NaN when outside its top list;
// *rank gets its place in that list (0 = llama.cpp's choice), -1 when absent.
double peer_logprob(const cbltest::json& step, token_id id, int* rank = nullptr) {
    const auto& top = step["top"].arr;
    for (size_t i = 0; i < top.size(); ++i) {
        if (top[i][0].as_int() == id) {
            if (rank) *rank = static_cast<int>(i);
            return top[i][1].num;
        }
    }
    if (rank) *rank = -1;
    return NAN;
}

// log-softmax of one entry.
double logprob_of(const std::vector<float>& logits, token_id id) {
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
    return static_cast<double>(logits[static_cast<size_t>(id)]) - mx - std::log(sum);
}

// A token for messages: id and its text, escaped.
std::string tok_str(const tokenizer& v, token_id id) {
    std::string r = std::to_string(id) + " '";
    for (unsigned char c : v.token_to_piece(id, true)) {
        if (c == '\n') {
            r += "\\n";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            r += buf;
        } else {
            r += static_cast<char>(c);
        }
    }
    return r + "'";
}

std::string ids_str(const std::vector<token_id>& ids) {
    std::string r;
    for (token_id t : ids) r += (r.empty() ? "" : " ") + std::to_string(t);
    return r;
}

class LlamaCppParity : public ::testing::TestWithParam<parity_model> {};

}  // namespace

TEST_P(LlamaCppParity, PromptTokensAndGreedyContinuations) {
    const parity_model& pm = GetParam();
    std::string path;
    if (!pm.env) {
        CBL_REQUIRE_DEFAULT_MODEL(default_path);
        path = default_path;
    } else {
        const char* v = std::getenv(pm.env);
        if (!v || !*v) GTEST_SKIP() << pm.env << " is not set (the " << pm.name << " GGUF)";
        path = v;
        if (!cbltest::file_exists(path)) {
            if (pm.required && require_model()) FAIL() << pm.env << "=" << path << " is missing";
            GTEST_SKIP() << pm.env << "=" << path << " is missing";
        }
    }
    if (pm.heavy && sanitized_build()) {
        GTEST_SKIP() << pm.name << " takes minutes in Release: skipped in sanitizer builds";
    }
    const cbltest::json fx = cbltest::load_json_file(std::string(CBL_TEST_DATA_DIR "/") + pm.fixture);
    const std::string recorded_from = fx["header"]["model"]["file"].str;
    if (path.substr(path.find_last_of('/') + 1) != recorded_from) {
        std::printf("note: %s is not %s, the file the fixture was recorded from\n", path.c_str(),
                    recorded_from.c_str());
    }
    const auto t_start = std::chrono::steady_clock::now();
    auto m = model::load(path);
    const tokenizer& vocab = m->vocab();
    session_params sp;
    sp.n_ctx = 2048;
    sp.n_threads = 2;
    session s(m, sp);

    // The end-of-generation set decides where llama.cpp stopped.
    std::set<token_id> peer_eog, our_eog;
    for (const auto& t : fx["header"]["eog_ids"].arr) peer_eog.insert(static_cast<token_id>(t.as_int()));
    for (token_id t = 0; t < vocab.n_vocab(); ++t) {
        if (vocab.is_eog(t)) our_eog.insert(t);
    }
    EXPECT_EQ(our_eog, peer_eog) << "end-of-generation tokens differ from llama.cpp's";

    // Tokenizer-only strings (not in the SmolLM2 fixture).
    int n_tok_cases = 0, n_tok_ok = 0;
    if (fx.has("tokenizer_cases")) {
        for (const auto& tc : fx["tokenizer_cases"].arr) {
            std::vector<token_id> expect;
            for (const auto& t : tc["ids"].arr) expect.push_back(static_cast<token_id>(t.as_int()));
            const auto ours = vocab.encode(tc["text"].str, false, false);
            ++n_tok_cases;
            n_tok_ok += ours == expect;
            EXPECT_EQ(ids_str(ours), ids_str(expect)) << "tokenizer case '" << tc["text"].str << "'";
        }
    }

    const auto& cases = fx["cases"].arr;
    ASSERT_GE(cases.size(), 50u);
    int n_tokens_ok = 0, n_cont_ok = 0, n_first_ok = 0, n_exact = 0;
    double max_first_lp_diff = 0, sum_first_lp_diff = 0;
    std::vector<double> step_lp_diffs;    // |our - llama.cpp's| logprob of its token, every step
    std::vector<double> divergence_gaps;  // llama.cpp's top1 - top2 gap where we part
    std::string failures;                 // the cases that do not agree, for the failure message
    for (const auto& c : cases) {
        const std::string name = c["name"].str;
        const std::string prompt = c["prompt"].str;
        if (c["chat"].b) {
            std::vector<chat_message> msgs;
            for (const auto& mm : c["messages"].arr) msgs.push_back({mm["role"].str, mm["content"].str});
            EXPECT_EQ(render_chat(m->chat(), msgs, true), prompt) << "chat rendering differs: " << name;
        }
        std::vector<token_id> expect_prompt;
        for (const auto& t : c["prompt_tokens"].arr) expect_prompt.push_back(static_cast<token_id>(t.as_int()));
        const auto ours = vocab.encode(prompt, c["add_special"].b, c["parse_special"].b);
        EXPECT_EQ(ids_str(ours), ids_str(expect_prompt)) << "prompt tokens differ: " << name;
        if (ours == expect_prompt) ++n_tokens_ok;

        // Greedy decode along llama.cpp's path while we agree; judge the first divergence.
        s.reset();
        const auto& steps = c["steps"].arr;
        std::vector<float> logits = s.prefill(expect_prompt);
        bool ok = true, exact = true;
        for (size_t i = 0; i < steps.size(); ++i) {
            const token_id peer = static_cast<token_id>(steps[i]["id"].as_int());
            const token_id mine = argmax(logits.data(), static_cast<int32_t>(logits.size()));
            const double d = std::fabs(logprob_of(logits, peer) - steps[i]["logprob"].num);
            step_lp_diffs.push_back(d);
            if (i == 0) {
                if (mine == peer) ++n_first_ok;
                max_first_lp_diff = std::max(max_first_lp_diff, d);
                sum_first_lp_diff += d;
            }
            if (mine != peer) {
                exact = false;
                int rank = -1;
                const double peer_gap = steps[i]["gap"].num;  // llama.cpp's top1 - top2
                peer_logprob(steps[i], mine, &rank);
                const auto tl = top_logprobs(logits.data(), static_cast<int32_t>(logits.size()), 2);
                ok = rank == 1 && peer_gap <= pm.near_tie;
                divergence_gaps.push_back(peer_gap);
                char line[512];
                std::snprintf(line, sizeof line,
                              "%-22s step %2zu/%zu: ours %s vs llama.cpp %s; llama.cpp gap %.4f, "
                              "our token its #%d, our gap %.4f -> %s\n",
                              name.c_str(), i, steps.size(), tok_str(vocab, mine).c_str(),
                              tok_str(vocab, peer).c_str(), peer_gap, rank + 1,
                              tl[0].second - tl[1].second, ok ? "near-tie" : "MISMATCH");
                std::printf("  %s", line);
                if (!ok) failures += std::string("    ") + line;
                break;
            }
            if (vocab.is_eog(peer) || i + 1 == steps.size()) break;
            logits = s.decode(peer);
        }
        n_cont_ok += ok;
        n_exact += exact;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    const double n = static_cast<double>(cases.size());
    std::sort(divergence_gaps.begin(), divergence_gaps.end());
    std::string gaps;
    for (double g : divergence_gaps) {
        char b[16];
        std::snprintf(b, sizeof b, " %.3f", g);
        gaps += b;
    }
    std::sort(step_lp_diffs.begin(), step_lp_diffs.end());
    double step_sum = 0;
    for (double d : step_lp_diffs) step_sum += d;
    auto pct = [&](double q) {
        if (step_lp_diffs.empty()) return 0.0;
        return step_lp_diffs[static_cast<size_t>(q * static_cast<double>(step_lp_diffs.size() - 1))];
    };
    std::printf("parity %s: %zu cases, prompt ids %d, tokenizer strings %d/%d, first token %d, "
                "continuations ok %d (exact %d, near-tie threshold %.2f); first-token logprob "
                "|diff| mean %.4f max %.4f; all %zu compared steps |diff| mean %.4f p50 %.4f "
                "p90 %.4f p99 %.4f max %.4f; %.1f s\n"
                "  llama.cpp gaps at the %zu divergences:%s\n",
                pm.name, cases.size(), n_tokens_ok, n_tok_ok, n_tok_cases, n_first_ok, n_cont_ok,
                n_exact, pm.near_tie, sum_first_lp_diff / n, max_first_lp_diff,
                step_lp_diffs.size(), step_lp_diffs.empty() ? 0.0 : step_sum / step_lp_diffs.size(),
                pct(0.5), pct(0.9), pct(0.99), pct(1.0), secs, divergence_gaps.size(), gaps.c_str());
    EXPECT_EQ(n_tokens_ok, static_cast<int>(cases.size()));
    EXPECT_GE(n_cont_ok / n, pm.min_cont_ok)
        << n_cont_ok << " of " << cases.size() << " continuations agree; these part from llama.cpp "
        << "at more than a near-tie (gap <= " << pm.near_tie << ", our token its second):\n"
        << failures;
    EXPECT_GE(n_first_ok / n, pm.min_first_ok) << n_first_ok << " of " << cases.size();
}

INSTANTIATE_TEST_SUITE_P(Models, LlamaCppParity, ::testing::ValuesIn(k_models),
                         [](const ::testing::TestParamInfo<parity_model>& i) {
                             return std::string(i.param.name);
                         });
