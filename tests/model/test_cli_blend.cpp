// Smoke tests of `cacheblend blend` and `cacheblend eval` (docs/ARCHITECTURE.md, 'Command-line
// tool'): the fixed JSON fields, a cold store that is warm on the next run, clean errors, and eval
// on a tiny dataset this test writes itself (musique schema, with ctxs/answers as Python-literal
// strings and as JSON lists). Runs <build>/bin/cacheblend; every run uses its own temporary KV
// store.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/model/model-registry.h"
#include "util/cli-runner.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using cbltest::json;

using cbltest::cli_path;
using cbltest::read_all;
using cbltest::shell_quote;
using cbltest::write_file;
using run_result = cbltest::cli_result;

// A failed run: exit code `code` and one "cacheblend: error: ..." line that mentions needle.
void one_error_line(const run_result& r, int code, const std::string& needle) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_EQ(r.err.rfind("cacheblend: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

class CliBlend : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-blend-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        write_file(dir_ + "/a.txt",
                   "The Amazon river flows through Brazil, Peru and Colombia. It carries more "
                   "water than any other river on Earth.\n");
        write_file(dir_ + "/b.txt",
                   "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, "
                   "rises 5,895 metres above sea level and was first climbed in 1889.\n");
    }
    void TearDown() override {
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    run_result run(std::vector<std::string> args) const {
        // One thread: ctest runs tests side by side, and the prompts here are tiny.
        args.insert(args.begin() + 1, {"--model", model_, "--threads", "1"});
        return cbltest::run_cli(args, dir_ + "/stderr");
    }

    std::vector<std::string> blend_args(const std::string& mode, const std::string& store) const {
        return {"blend",        "--chunk", dir_ + "/a.txt", "--chunk",   dir_ + "/b.txt",
                "--question",   "In which country is Kilimanjaro?", "--mode", mode,
                "--store",      store,     "--max-tokens",  "8",         "--json"};
    }

    // Runs blend --json and checks every fixed field; returns the stats object.
    json blend_json(const std::vector<std::string>& args) const {
        const run_result r = run(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        json j;
        try {
            j = json::parse(r.out);
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what() << "\n" << r.out << "\n" << r.err;
            return json();
        }
        for (const char* f : {"text", "tokens", "top_logprobs", "stats"}) {
            EXPECT_TRUE(j.has(f)) << "missing " << f << ": " << r.out;
        }
        if (!j.has("stats") || !j.has("top_logprobs")) return json();
        EXPECT_EQ(j["text"].kind, json::string);
        EXPECT_EQ(j["tokens"].kind, json::array);
        EXPECT_EQ(j["top_logprobs"].size(), 5u);
        for (const json& t : j["top_logprobs"].arr) {
            EXPECT_TRUE(t.has("id") && t.has("text") && t.has("logprob")) << r.out;
        }
        const json& s = j["stats"];
        EXPECT_EQ(s["mode"].kind, json::string);
        for (const char* f : {"ratio", "ttft_ms", "load_ms", "select_ms", "compute_ms",
                              "tokens_total", "tokens_reused", "tokens_recomputed",
                              "tokens_missed", "bytes_loaded", "decode_tokens_per_s"}) {
            EXPECT_TRUE(s.has(f) && s[f].kind == json::number) << "stats." << f << ": " << r.out;
        }
        return s;
    }

    std::string model_, dir_;
};

TEST_F(CliBlend, JsonFieldsAndWarmSecondRun) {
    const std::string store = dir_ + "/kv";
    const json full = blend_json(blend_args("full", store));
    ASSERT_EQ(full.kind, json::object);
    EXPECT_EQ(full["mode"].str, "full");
    EXPECT_EQ(full["tokens_reused"].num, 0);
    EXPECT_GT(full["ttft_ms"].num, 0);
    EXPECT_EQ(full["tokens_recomputed"].num, full["tokens_total"].num);

    // The first run stored both chunks: the second one reuses them.
    const json blend = blend_json(blend_args("blend", store));
    ASSERT_EQ(blend.kind, json::object);
    EXPECT_EQ(blend["mode"].str, "blend");
    EXPECT_GT(blend["tokens_reused"].num, 0);
    EXPECT_EQ(blend["tokens_missed"].num, 0);
    EXPECT_GT(blend["bytes_loaded"].num, 0);
    EXPECT_LT(blend["tokens_recomputed"].num, blend["tokens_total"].num);
    EXPECT_EQ(blend["tokens_total"].num, full["tokens_total"].num);
    EXPECT_NEAR(blend["ratio"].num, 0.15, 1e-6);

    // --direct-io reads the same files past the page cache: the same hits and bytes.
    std::vector<std::string> args = blend_args("blend", store);
    args.push_back("--direct-io");
    const json direct = blend_json(args);
    ASSERT_EQ(direct.kind, json::object);
    EXPECT_EQ(direct["tokens_missed"].num, 0);
    EXPECT_EQ(direct["tokens_reused"].num, blend["tokens_reused"].num);
    EXPECT_EQ(direct["tokens_recomputed"].num, blend["tokens_recomputed"].num);
    EXPECT_EQ(direct["bytes_loaded"].num, blend["bytes_loaded"].num);
}

TEST_F(CliBlend, ColdStoreMissesInsideTheRequestUnlessWarm) {
    // Default: a cold store's chunks are computed inside the timed request (honest TTFT).
    const json cold = blend_json(blend_args("blend", dir_ + "/kv-cold"));
    ASSERT_EQ(cold.kind, json::object);
    EXPECT_EQ(cold["tokens_reused"].num, 0);
    EXPECT_GT(cold["tokens_missed"].num, 0);
    // --warm precomputes first, so even the first request reuses every chunk.
    std::vector<std::string> args = blend_args("reuse", dir_ + "/kv-warm");
    args.push_back("--warm");
    const json warm = blend_json(args);
    ASSERT_EQ(warm.kind, json::object);
    EXPECT_EQ(warm["tokens_missed"].num, 0);
    EXPECT_GT(warm["tokens_reused"].num, 0);
}

TEST_F(CliBlend, Errors) {
    one_error_line(run({"blend", "--question", "q"}), 2, "--chunk");
    one_error_line(run({"blend", "--chunk", dir_ + "/a.txt"}), 2, "--question");
    std::vector<std::string> bad = blend_args("sideways", dir_ + "/kv");
    one_error_line(run(bad), 2, "--mode");
    one_error_line(run({"blend", "--chunk", dir_ + "/none.txt", "--question", "q"}), 1,
                   "none.txt");
    // A prompt longer than the model's context is refused before any compute.
    std::string huge;
    for (int i = 0; i < 12000; ++i) huge += "river ";
    write_file(dir_ + "/huge.txt", huge);
    one_error_line(run({"blend", "--chunk", dir_ + "/huge.txt", "--question", "q", "--store",
                        dir_ + "/kv"}),
                   1, "context");
    one_error_line(run({"eval", "--limit", "1"}), 2, "--dataset");
    one_error_line(run({"eval", "--dataset", dir_ + "/none.json"}), 1, "none.json");
    write_file(dir_ + "/bad.json",
               "[{\"ctxs\": \"[{'title': '', 'text': 'ok'}]\", \"question\": \"q\", "
               "\"answers\": \"['a']\"},\n {\"ctxs\": \"[{'title': '', 'text': 'unterminated\", "
               "\"question\": \"q\", \"answers\": \"['a']\"}]");
    one_error_line(run({"eval", "--dataset", dir_ + "/bad.json"}), 1, "record 1");
    write_file(dir_ + "/bad2.json", "[{\"ctxs\": [], \"question\": \"q\"}");
    one_error_line(run({"eval", "--dataset", dir_ + "/bad2.json"}), 1, "JSON");
    one_error_line(run({"eval", "--dataset", dir_ + "/bad.json", "--modes", "full,fast"}), 2,
                   "fast");
    write_file(dir_ + "/one.json",
               "[{\"ctxs\": [{\"title\": \"\", \"text\": \"ok\"}], \"question\": \"q\", "
               "\"answers\": [\"a\"]}]");
    for (const char* size : {"12Q", "0", "-5G", "G", "1e30"}) {
        one_error_line(run({"eval", "--dataset", dir_ + "/one.json", "--store", dir_ + "/kv",
                            "--kv-budget", size}),
                       2, "--kv-budget");
    }
}

TEST_F(CliBlend, EvalOnATinyDataset) {
    // Record 0 holds ctxs and answers as Python-literal strings (escapes included), as
    // CacheBlend's inputs do; record 1 uses plain JSON lists.
    const std::string dataset = dir_ + "/tiny.json";
    write_file(dataset,
               "[\n"
               " {\"ctxs\": \"[{'title': '', 'text': 'mount kilimanjaro is a dormant volcano in "
               "tanzania.'}, {'title': '', 'text': \\\"the amazon river flows through brazil's "
               "rainforest.\\\"}, {'title': '', 'text': 'it\\\\'s the \\\\\\\"roof\\\\\\\" of "
               "africa.'}]\",\n"
               "  \"question\": \"In which country is Kilimanjaro\",\n"
               "  \"answers\": \"['Tanzania']\"},\n"
               " {\"ctxs\": [{\"title\": \"\", \"text\": \"the danube flows into the black "
               "sea.\"}, {\"title\": \"\", \"text\": \"paris is the capital of france.\"}],\n"
               "  \"question\": \"What is the capital of France?\",\n"
               "  \"answers\": [\"Paris\"]}\n"
               "]\n");
    const std::string out = dir_ + "/results.json";
    const run_result r = run({"eval", "--dataset", dataset, "--modes", "full,reuse,blend",
                              "--store", dir_ + "/kv", "--max-tokens", "8", "--json", "--out",
                              out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j;
    ASSERT_NO_THROW(j = json::parse(r.out)) << r.out;
    ASSERT_TRUE(j.has("modes")) << r.out;
    EXPECT_EQ(j["records"].num, 2);
    EXPECT_EQ(j["kv_format"].str, "f16");
    EXPECT_EQ(j["warm"]["chunks"].num, 5);
    const json& modes = j["modes"];
    for (const char* m : {"full", "reuse", "blend"}) {
        ASSERT_TRUE(modes.has(m)) << m << ": " << r.out;
        const json& s = modes[m];
        for (const char* f : {"f1", "fidelity_f1", "first_token_agreement", "first_token_kl",
                              "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p95", "speedup_vs_full",
                              "n"}) {
            EXPECT_TRUE(s.has(f) && s[f].kind == json::number) << m << "." << f << ": " << r.out;
        }
        EXPECT_EQ(s["n"].num, 2) << m;
        EXPECT_GE(s["f1"].num, 0.0);
        EXPECT_LE(s["f1"].num, 1.0);
        EXPECT_GT(s["ttft_ms_mean"].num, 0.0);
        EXPECT_GE(s["first_token_kl"].num, 0.0);
    }
    EXPECT_EQ(modes["full"]["fidelity_f1"].num, 1.0);
    EXPECT_EQ(modes["full"]["first_token_agreement"].num, 1.0);
    EXPECT_EQ(modes["full"]["first_token_kl"].num, 0.0);
    EXPECT_EQ(modes["full"]["speedup_vs_full"].num, 1.0);
    EXPECT_GT(modes["reuse"]["tokens_reused_mean"].num, 0.0);
    EXPECT_EQ(modes["reuse"]["chunks_missed"].num, 0);
    ASSERT_TRUE(modes["blend"].has("f1_diff_ci95"));
    EXPECT_EQ(modes["blend"]["f1_diff_ci95"].size(), 2u);
    // stderr is a file, not a terminal: a plain progress line per record, even under --json.
    EXPECT_NE(r.err.find("eval: record 1/2 (full, reuse, blend), elapsed "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("eval: record 2/2 (full, reuse, blend), elapsed "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(", ETA "), std::string::npos) << r.err;  // after record 1 of 2

    // The summary names the model's file, also when --model is a name.
    EXPECT_EQ(j["model"].str, model_);
    if (model_ == cacheblend::resolve_model("smollm2-135m").path) {
        const run_result n = cbltest::run_cli(
            {"eval", "--model", "smollm2-135m", "--threads", "1", "--dataset", dataset, "--modes",
             "full", "--limit", "1", "--max-tokens", "2", "--store", dir_ + "/kv", "--json"},
            dir_ + "/stderr");
        ASSERT_EQ(n.exit_code, 0) << n.err;
        EXPECT_EQ(json::parse(n.out)["model"].str, model_);
    }

    // --out holds every record with every mode's answer.
    json o;
    ASSERT_NO_THROW(o = json::parse(read_all(out)));
    ASSERT_EQ(o["results"].size(), 2u);
    EXPECT_EQ(o["results"][0]["answers"][0].str, "Tanzania");
    EXPECT_EQ(o["results"][1]["answers"][0].str, "Paris");
    for (const char* m : {"full", "reuse", "blend"}) {
        EXPECT_EQ(o["results"][0]["runs"][m]["text"].kind, json::string) << m;
    }
    // Each record keeps how near a tie full's first token was, and the summary counts the
    // records whose first token differs from full's with the largest such gap among them.
    for (const char* m : {"reuse", "blend"}) {
        int64_t flips = 0;
        double margin_max = 0;
        for (size_t i = 0; i < 2; ++i) {
            const json& rec = o["results"][i];
            ASSERT_EQ(rec["full_first_token_margin"].kind, json::number) << i;
            EXPECT_GE(rec["full_first_token_margin"].num, 0.0) << i;
            if (!rec["runs"][m]["first_token_agreement"].b) {
                ++flips;
                margin_max = std::max(margin_max, rec["full_first_token_margin"].num);
            }
        }
        const json& s = modes[m];
        EXPECT_EQ(s["first_token_flips"].num, flips) << m;
        if (flips == 0) {
            EXPECT_EQ(s["flip_full_margin_max"].kind, json::null) << m;
        } else {
            EXPECT_EQ(s["flip_full_margin_max"].num, margin_max) << m;
        }
    }
    EXPECT_FALSE(modes["full"].has("first_token_flips"));

    // Human output: one line per mode, a sweep adds blend@ratio columns.
    const run_result h = run({"eval", "--dataset", dataset, "--store", dir_ + "/kv",
                              "--max-tokens", "4", "--ratios", "0.1,1", "--limit", "1"});
    ASSERT_EQ(h.exit_code, 0) << h.err;
    for (const char* m : {"full ", "reuse ", "blend@0.1 ", "blend@1 "}) {
        EXPECT_NE(h.out.find(m), std::string::npos) << m << "\n" << h.out;
    }
}

// eval --resume (a musique run of a real model takes hours): finished records go to a journal,
// a rerun skips them, and the summary and per-record answers equal one uninterrupted run's.
TEST_F(CliBlend, EvalResumeSkipsJournaledRecordsAndMatchesAnUninterruptedRun) {
    const std::string dataset = dir_ + "/two.json";
    const std::string two =
        "[{\"ctxs\": [{\"title\": \"\", \"text\": \"mount kilimanjaro is a dormant volcano in "
        "tanzania.\"}, {\"title\": \"\", \"text\": \"the amazon river flows through "
        "brazil.\"}], \"question\": \"In which country is Kilimanjaro?\", \"answers\": "
        "[\"Tanzania\"]},\n {\"ctxs\": [{\"title\": \"\", \"text\": \"the danube flows into "
        "the black sea.\"}, {\"title\": \"\", \"text\": \"paris is the capital of "
        "france.\"}, {\"title\": \"\", \"text\": \"rome is in italy.\"}], \"question\": "
        "\"What is the capital of France?\", \"answers\": [\"Paris\"]}]\n";
    write_file(dataset, two);
    const std::string store = dir_ + "/kv";
    const std::string journal = dir_ + "/journal.jsonl";
    const auto eval = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"eval",       "--dataset", dataset, "--modes",
                                      "full,blend", "--store",   store,   "--max-tokens",
                                      "4",          "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run(args);
    };
    const auto answers = [](const std::string& out_file) {
        std::vector<std::string> v;
        const json o = json::parse(read_all(out_file));
        for (size_t i = 0; i < o["results"].size(); ++i) {
            for (const char* m : {"full", "blend"})
                v.push_back(o["results"][i]["runs"][m]["text"].str);
        }
        return v;
    };
    const std::string whole_out = dir_ + "/whole.json";
    const run_result whole = eval({"--out", whole_out});
    ASSERT_EQ(whole.exit_code, 0) << whole.err;

    // First record only, journaled; then a kill's torn line; then the rest.
    const run_result first = eval({"--limit", "1", "--resume", journal});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_NE(first.err.find("resuming from " + journal + ": 0 of 1 records done"),
              std::string::npos)
        << first.err;
    std::string text = read_all(journal);
    ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;  // settings + 1 record
    write_file(journal, text + "{\"index\": 1, \"quest");
    const std::string rest_out = dir_ + "/rest.json";
    const run_result rest = eval({"--resume", journal, "--out", rest_out});
    ASSERT_EQ(rest.exit_code, 0) << rest.err;
    EXPECT_NE(rest.err.find("resuming from " + journal + ": 1 of 2 records done"),
              std::string::npos)
        << rest.err;
    EXPECT_EQ(rest.err.find("record 1/2"), std::string::npos) << rest.err;  // not run again
    EXPECT_NE(rest.err.find("record 2/2"), std::string::npos) << rest.err;
    const json j = json::parse(rest.out);
    EXPECT_EQ(j["records"].num, 2);
    EXPECT_EQ(j["warm"]["chunks"].num, 3);  // only the second record's passages
    EXPECT_EQ(j["modes"]["blend"]["n"].num, 2);
    EXPECT_EQ(j["modes"]["full"]["f1"].num, json::parse(whole.out)["modes"]["full"]["f1"].num);
    EXPECT_EQ(answers(rest_out), answers(whole_out));
    const json whole_records = json::parse(read_all(whole_out));
    const json rest_records = json::parse(read_all(rest_out));
    for (size_t i = 0; i < 2; ++i) {  // record 0's margin came back from the journal
        EXPECT_EQ(rest_records["results"][i]["full_first_token_margin"].num,
                  whole_records["results"][i]["full_first_token_margin"].num)
            << i;
    }
    text = read_all(journal);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
    EXPECT_EQ(text.back(), '\n');

    // Everything done: the summary comes from the journal alone.
    const run_result again = eval({"--resume", journal});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("2 of 2 records done"), std::string::npos) << again.err;
    EXPECT_EQ(json::parse(again.out)["modes"]["blend"]["fidelity_f1"].num,
              j["modes"]["blend"]["fidelity_f1"].num);

    // Copied to another machine, where the model lies in another directory: it is the same
    // model by file name and size, so the journal resumes; another file name is refused.
    const std::string elsewhere = dir_ + "/elsewhere";
    ASSERT_EQ(::mkdir(elsewhere.c_str(), 0755), 0);
    const std::string same_name = elsewhere + "/" + model_.substr(model_.rfind('/') + 1);
    ASSERT_EQ(::symlink(model_.c_str(), same_name.c_str()), 0);
    ASSERT_EQ(::symlink(model_.c_str(), (elsewhere + "/renamed.gguf").c_str()), 0);
    const auto eval_model = [&](const std::string& model) {
        return cbltest::run_cli({"eval", "--model", model, "--threads", "1", "--dataset", dataset,
                                 "--modes", "full,blend", "--store", store, "--max-tokens", "4",
                                 "--json", "--resume", journal},
                                dir_ + "/stderr");
    };
    const run_result moved = eval_model(same_name);
    ASSERT_EQ(moved.exit_code, 0) << moved.err;
    EXPECT_NE(moved.err.find("2 of 2 records done"), std::string::npos) << moved.err;
    one_error_line(eval_model(elsewhere + "/renamed.gguf"), 2, "model");

    // Other settings, or a dataset whose questions changed, are refused and leave it as it was.
    one_error_line(eval({"--resume", journal, "--temp", "0.7"}), 2, "--temp");
    one_error_line(run({"eval", "--dataset", dataset, "--modes", "full,reuse", "--store", store,
                        "--max-tokens", "4", "--resume", journal}),
                   2, "runs");
    one_error_line(eval({"--resume", dataset}), 2, "not an eval journal");  // a slip of the hand
    EXPECT_EQ(read_all(dataset), two);
    std::string changed = two;
    changed.replace(changed.find("In which country"), 16, "Where in Africa ");
    write_file(dataset, changed);
    one_error_line(eval({"--resume", journal}), 1, "dataset changed");
    EXPECT_EQ(read_all(journal), text);
}

TEST_F(CliBlend, CalibrateRecordsTheRatioThatBlendThenUses) {
    const std::string dataset = dir_ + "/tiny.json";
    write_file(dataset,
               "[{\"ctxs\": [{\"title\": \"\", \"text\": \"mount kilimanjaro is a dormant "
               "volcano in tanzania.\"}, {\"title\": \"\", \"text\": \"the amazon river flows "
               "through brazil.\"}], \"question\": \"In which country is Kilimanjaro?\", "
               "\"answers\": [\"Tanzania\"]}]\n");
    const std::string store = dir_ + "/kv";
    const auto calibrate = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"calibrate", "--dataset", dataset, "--store", store,
                                      "--max-tokens", "4", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const run_result r = run(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        json j;
        EXPECT_NO_THROW(j = json::parse(r.out)) << r.out;
        return j;
    };
    // Any KL is at most 1e6: the smallest ratio tried meets it.
    json c = calibrate({"--metric", "kl", "--target", "1e6", "--ratios", "0.5,0.25"});
    ASSERT_TRUE(c.has("met"));
    EXPECT_TRUE(c["met"].b);
    EXPECT_DOUBLE_EQ(c["ratio"].num, 0.25);
    EXPECT_EQ(c["records"].num, 1);
    EXPECT_EQ(c["points"].size(), 2u);
    std::vector<std::string> args = blend_args("blend", store);
    args.insert(args.end(), {"--ratio", "calibrated"});
    json st = blend_json(args);
    EXPECT_DOUBLE_EQ(st["ratio"].num, 0.25);
    EXPECT_EQ(st["mode"].str, "blend");

    // --policies: every policy at every ratio; the record keeps the smallest ratio that met the
    // target and, of the policies that met it there, the faster.
    c = calibrate(
        {"--metric", "kl", "--target", "1e6", "--ratios", "0.5,0.25", "--policies", "sink,hkvd"});
    EXPECT_DOUBLE_EQ(c["ratio"].num, 0.25);
    EXPECT_TRUE(c["select"].str == "sink" || c["select"].str == "hkvd") << c["select"].str;
    ASSERT_EQ(c["points"].size(), 4u);
    EXPECT_EQ(c["points"][size_t{0}]["select"].str, "sink");
    EXPECT_DOUBLE_EQ(c["points"][size_t{0}]["ratio"].num, 0.25);
    st = blend_json(args);
    EXPECT_DOUBLE_EQ(st["ratio"].num, 0.25);

    // A dry run records nothing.
    c = calibrate({"--metric", "kl", "--target", "0", "--ratios", "0.5", "--dry-run"});
    EXPECT_FALSE(c["recorded"].b);
    st = blend_json(args);
    EXPECT_DOUBLE_EQ(st["ratio"].num, 0.25);

    // No ratio below 1 reaches KL 0: calibrated requests run full, and say why.
    c = calibrate({"--metric", "kl", "--target", "0", "--ratios", "0.5"});
    EXPECT_FALSE(c["met"].b);
    EXPECT_DOUBLE_EQ(c["ratio"].num, 1.0);
    st = blend_json(args);
    EXPECT_EQ(st["mode"].str, "full");
    ASSERT_TRUE(st.has("fallback_reason"));
    EXPECT_NE(st["fallback_reason"].str.find("kl <= 0"), std::string::npos)
        << st["fallback_reason"].str;

    one_error_line(run({"calibrate", "--dataset", dataset, "--metric", "speed"}), 2, "--metric");
    one_error_line(run({"calibrate", "--dataset", dataset, "--target", "2"}), 2, "--target");
}

}  // namespace

namespace {

// --select (issue 15 item 1): blend runs a policy; an unknown one is a usage error naming the
// valid ones on blend, eval and ask; eval's summary and resume journal name the policy.
TEST_F(CliBlend, SelectPolicies) {
    const std::string store = dir_ + "/kv";
    std::vector<std::string> args = blend_args("blend", store);
    args.insert(args.end(), {"--warm", "--select", "sink"});
    const json sink = blend_json(args);
    ASSERT_EQ(sink.kind, json::object);
    EXPECT_GT(sink["tokens_reused"].num, 0);
    EXPECT_LT(sink["tokens_recomputed"].num, sink["tokens_total"].num);
    args = blend_args("blend", store);
    args.insert(args.end(), {"--select", "query+hkvd"});
    const json qh = blend_json(args);
    ASSERT_EQ(qh.kind, json::object);
    EXPECT_EQ(qh["tokens_recomputed"].num, sink["tokens_recomputed"].num) << "same budget";

    const std::string valid = "hkvd, sink, sink+hkvd, query, query+hkvd";
    args = blend_args("blend", store);
    args.insert(args.end(), {"--select", "prophet"});
    one_error_line(run(args), 2, valid);
    one_error_line(run(args), 2, "--select");
    write_file(dir_ + "/one.json",
               "[{\"ctxs\": [{\"title\": \"\", \"text\": \"paris is the capital of france.\"}], "
               "\"question\": \"What is the capital of France?\", \"answers\": [\"Paris\"]}]");
    one_error_line(run({"eval", "--dataset", dir_ + "/one.json", "--store", store, "--select",
                        "Sink"}),
                   2, valid);
    one_error_line(run({"ask", "--data", dir_ + "/no-data", "--select", "", "q"}), 2, valid);

    // eval names the policy in its summary and its journal; a journal of another policy is
    // refused on resume rather than mixed.
    const std::string journal = dir_ + "/journal.jsonl";
    const auto eval = [&](const std::string& policy) {
        return run({"eval", "--dataset", dir_ + "/one.json", "--modes", "full,blend", "--store",
                    store, "--max-tokens", "2", "--json", "--select", policy, "--resume",
                    journal});
    };
    const run_result e = eval("sink");
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(json::parse(e.out)["select"].str, "sink");
    EXPECT_NE(read_all(journal).find("\"select\":\"sink\""), std::string::npos)
        << read_all(journal);
    one_error_line(eval("hkvd"), 2, "other settings");

    // --policies: every policy at every ratio against one full run (issue 15's comparison);
    // r = 1 recomputes everything, so with exact KV every policy there reproduces full's
    // answer and first-token distribution exactly.
    const run_result c = run({"eval", "--dataset", dir_ + "/one.json", "--store", store,
                              "--max-tokens", "3", "--json", "--policies", "sink,query+hkvd",
                              "--ratios", "0.1,1", "--kv-format", "exact"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const json cmp = json::parse(c.out);
    const json& modes = cmp["modes"];
    for (const char* label :
         {"full", "reuse", "sink@0.1", "sink@1", "query+hkvd@0.1", "query+hkvd@1"}) {
        ASSERT_TRUE(modes.has(label)) << label << "\n" << c.out;
    }
    EXPECT_EQ(modes["sink@0.1"]["select"].str, "sink");
    EXPECT_EQ(modes["query+hkvd@1"]["select"].str, "query+hkvd");
    EXPECT_EQ(modes["sink@1"]["fidelity_f1"].num, 1) << c.out;
    EXPECT_EQ(modes["query+hkvd@1"]["first_token_kl"].num, 0) << c.out;
    one_error_line(run({"eval", "--dataset", dir_ + "/one.json", "--store", store, "--policies",
                        "sink", "--select", "sink"}),
                   2, "--policies");
    one_error_line(run({"eval", "--dataset", dir_ + "/one.json", "--store", store, "--policies",
                        "hkvd,lego"}),
                   2, valid);
}

}  // namespace
