// Smoke test of `cacheblend ask` (docs/ARCHITECTURE.md, 'Ask path'): three small files ingested
// with --precompute, then `ask --json --k 2 --compare-full` returns the fixed fields, citations
// into those files and reuses the precomputed chunk KV. Runs <build>/bin/cacheblend in its own
// temporary data dir.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/cli-runner.h"
#include "util/test-util.h"

namespace {

using cbltest::json;

using cbltest::cli_path;
using cbltest::read_all;
using cbltest::shell_quote;
using cbltest::write_file;
using run_result = cbltest::cli_result;

class CliAsk : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-ask-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        ASSERT_EQ(std::system(("mkdir -p " + shell_quote(dir_ + "/docs")).c_str()), 0);
        files_ = {dir_ + "/docs/amazon.txt", dir_ + "/docs/kilimanjaro.txt",
                  dir_ + "/docs/baking.txt"};
        write_file(files_[0],
                   "The Amazon river flows through Brazil, Peru and Colombia. It carries more "
                   "water than any other river on Earth.\n");
        write_file(files_[1],
                   "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, "
                   "rises 5,895 metres above sea level and was first climbed in 1889.\n");
        write_file(files_[2],
                   "Sourdough bread is leavened by a culture of wild yeast and lactic acid "
                   "bacteria. The dough rises slowly, which gives the bread its sour taste.\n");
    }
    void TearDown() override {
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    run_result run(std::vector<std::string> args) const {
        args.insert(args.begin() + 1, {"--model", model_});
        return cbltest::run_cli(args, dir_ + "/stderr");
    }

    std::string model_, dir_;
    std::vector<std::string> files_;
};

TEST_F(CliAsk, IngestPrecomputeThenAskReusesKv) {
    const std::string data = dir_ + "/data";
    const run_result ing =
        run({"ingest", "--data", data, dir_ + "/docs", "--precompute", "--json"});
    ASSERT_EQ(ing.exit_code, 0) << ing.err << ing.out;
    const json ij = json::parse(ing.out);
    EXPECT_EQ(ij["documents"].num, 3);
    EXPECT_GT(ij["kv_computed"].num, 0);

    // One thread: ctest runs tests side by side, and the prompt here is tiny.
    const run_result r = run({"ask", "--threads", "1", "--data", data,
                              "In which country is Mount Kilimanjaro?", "--json", "--k", "2",
                              "--compare-full", "--max-tokens", "8", "--seed", "5"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j;
    try {
        j = json::parse(r.out);
    } catch (const std::exception& e) {
        FAIL() << e.what() << "\n" << r.out << "\n" << r.err;
    }
    for (const char* f : {"text", "tokens", "top_logprobs", "stats", "citations"}) {
        ASSERT_TRUE(j.has(f)) << "missing " << f << ": " << r.out;
    }
    EXPECT_EQ(j["text"].kind, json::string);
    EXPECT_EQ(j["tokens"].kind, json::array);
    EXPECT_EQ(j["top_logprobs"].size(), 5u);
    const json& s = j["stats"];
    EXPECT_EQ(s["mode"].str, "blend");
    for (const char* f : {"ratio", "ttft_ms", "load_ms", "select_ms", "compute_ms",
                          "tokens_total", "tokens_reused", "tokens_recomputed", "tokens_missed",
                          "bytes_loaded", "decode_tokens_per_s", "chunks_dropped",
                          "full_ttft_ms", "speedup_vs_full"}) {
        EXPECT_TRUE(s.has(f) && s[f].kind == json::number) << "stats." << f << ": " << r.out;
    }
    // The chunk KV stored by ingest --precompute is what ask looks up.
    EXPECT_GT(s["tokens_reused"].num, 0) << r.out;
    EXPECT_EQ(s["tokens_missed"].num, 0) << r.out;
    EXPECT_EQ(s["chunks_dropped"].num, 0) << r.out;
    EXPECT_GT(s["full_ttft_ms"].num, 0) << r.out;
    EXPECT_GT(s["speedup_vs_full"].num, 0) << r.out;
    EXPECT_EQ(s["seed"].num, 5) << r.out;  // reported, so a sampled answer can be replayed

    const json& cites = j["citations"];
    ASSERT_EQ(cites.kind, json::array);
    ASSERT_FALSE(cites.arr.empty()) << r.out;
    EXPECT_LE(cites.size(), 2u);
    const std::set<std::string> uris(files_.begin(), files_.end());
    bool kilimanjaro_cited = false;
    for (const json& c : cites.arr) {
        ASSERT_TRUE(c.has("uri") && c.has("start") && c.has("end") && c.has("score")) << r.out;
        EXPECT_EQ(uris.count(c["uri"].str), 1u) << c["uri"].str;
        EXPECT_LT(c["start"].num, c["end"].num);
        kilimanjaro_cited |= c["uri"].str == files_[1];
    }
    EXPECT_TRUE(kilimanjaro_cited) << r.out;

    // Human output: the answer, then numbered citations.
    const run_result h = run({"ask", "--threads", "1", "--data", data,
                              "In which country is Mount Kilimanjaro?", "--k", "1",
                              "--max-tokens", "4"});
    ASSERT_EQ(h.exit_code, 0) << h.err;
    EXPECT_NE(h.out.find("[1] " + files_[1] + ":"), std::string::npos) << h.out;
    EXPECT_NE(h.err.find("TTFT"), std::string::npos) << h.err;

    // The document filters: only the sourdough file may be cited, whatever the question.
    const run_result f = run({"ask", "--threads", "1", "--data", data,
                              "In which country is Mount Kilimanjaro?", "--max-tokens", "2",
                              "--uri-prefix", dir_ + "/docs/bak", "--filter", "kind=text",
                              "--json"});
    ASSERT_EQ(f.exit_code, 0) << f.err;
    json fj;
    ASSERT_NO_THROW(fj = json::parse(f.out)) << f.out;
    ASSERT_EQ(fj["citations"].size(), 1u) << f.out;
    EXPECT_EQ(fj["citations"][0]["uri"].str, files_[2]);
    const run_result none = run({"ask", "--data", data, "anything?", "--filter", "kind=html"});
    EXPECT_EQ(none.exit_code, 1) << none.err;
    EXPECT_NE(none.err.find("within the filter"), std::string::npos) << none.err;
    const run_result bad = run({"ask", "--data", data, "anything?", "--filter", "bad key=1"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

TEST_F(CliAsk, EmptyDataDirIsACleanError) {
    const run_result r = run({"ask", "--data", dir_ + "/empty", "anything?", "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("cacheblend: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace

// A calibration made with `calibrate --data DIR` lands in DIR/kv, the store `ask --data DIR`
// reads, so `ask --ratio calibrated` uses it (issue 12: with default flags calibrate wrote to
// the XDG cache store, which ask never looks at). --store and --data together are a usage error.
TEST_F(CliAsk, CalibrateIntoTheDataDirIsWhatAskUses) {
    const std::string data = dir_ + "/data";
    const run_result ing = run({"ingest", "--data", data, dir_ + "/docs"});
    ASSERT_EQ(ing.exit_code, 0) << ing.err;
    const std::string dataset = dir_ + "/tiny.json";
    write_file(dataset,
               "[{\"ctxs\": [{\"title\": \"\", \"text\": \"mount kilimanjaro is a dormant "
               "volcano in tanzania.\"}, {\"title\": \"\", \"text\": \"the amazon river flows "
               "through brazil.\"}], \"question\": \"In which country is Kilimanjaro?\", "
               "\"answers\": [\"Tanzania\"]}]\n");
    const std::vector<std::string> ask = {"ask",          "--data", data, "--ratio", "calibrated",
                                          "--max-tokens", "2",      "--json",
                                          "Where is Kilimanjaro?"};
    // Nothing calibrated yet: the default ratio.
    run_result r = run(ask);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_DOUBLE_EQ(json::parse(r.out)["stats"]["ratio"].num, 0.15) << r.out;

    r = run({"calibrate", "--data", data, "--dataset", dataset, "--max-tokens", "2", "--metric",
             "kl", "--target", "1e6", "--ratios", "0.5,0.25", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json c = json::parse(r.out);
    EXPECT_DOUBLE_EQ(c["ratio"].num, 0.25);
    EXPECT_EQ(c["store"].str, data + "/kv");

    r = run(ask);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json a = json::parse(r.out);
    EXPECT_EQ(a["stats"]["mode"].str, "blend");
    EXPECT_DOUBLE_EQ(a["stats"]["ratio"].num, 0.25) << r.out;

    r = run({"calibrate", "--data", data, "--store", dir_ + "/kv", "--dataset", dataset});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--store and --data"), std::string::npos) << r.err;
}

namespace {

// `bench serve` (issue 14, item 2): every level of every mode serves all its requests on its
// own sessions, the percentiles are ordered, blend reuses the precomputed chunks and full does
// not; usage mistakes exit 2.
TEST_F(CliAsk, BenchServeReportsEveryLevelOfEveryMode) {
    const std::string data = dir_ + "/data";
    const run_result ing = run({"ingest", "--data", data, dir_ + "/docs", "--precompute"});
    ASSERT_EQ(ing.exit_code, 0) << ing.err;
    const std::string questions = dir_ + "/questions.txt";
    write_file(questions,
               "# comment lines and blank lines are skipped\n\nWhere is Kilimanjaro?\n"
               "Which river carries the most water?\n");
    // `serve` is the word right after `bench` (run() would put --model before it).
    const auto serve = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"bench", "serve", "--model", model_});
        return cbltest::run_cli(args, dir_ + "/stderr");
    };
    const run_result r = serve({"--data", data, "--questions", questions, "--concurrency", "1,2",
                                "--requests", "3", "--mode", "full,blend", "--max-tokens", "2",
                                "--k", "2", "--threads", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["questions"].num, 2);
    const json& levels = j["levels"];
    ASSERT_EQ(levels.size(), 4u) << r.out;
    const char* want_mode[] = {"full", "blend", "full", "blend"};
    const int want_conc[] = {1, 1, 2, 2};
    for (size_t i = 0; i < 4; ++i) {
        const json& l = levels[i];
        EXPECT_EQ(l["mode"].str, want_mode[i]);
        EXPECT_EQ(l["concurrency"].num, want_conc[i]);
        EXPECT_EQ(l["requests"].num, 3) << r.out;
        EXPECT_EQ(l["failed"].num, 0) << r.out;
        EXPECT_EQ(l["busy"].num, 0) << r.out;
        EXPECT_GT(l["requests_per_min"].num, 0);
        // The client's TTFT holds the library's (from the request's turn on) and the wait.
        EXPECT_GT(l["library_ttft_ms_mean"].num, 0);
        EXPECT_GE(l["ttft_ms_mean"].num + 1.0, l["library_ttft_ms_mean"].num) << r.out;
        EXPECT_GT(l["ttft_ms_p50"].num, 0);
        EXPECT_LE(l["ttft_ms_p50"].num, l["ttft_ms_p95"].num);
        EXPECT_LE(l["ttft_ms_p95"].num, l["ttft_ms_p99"].num);
        EXPECT_GT(l["prompt_tokens"].num, 0);
        if (l["mode"].str == "blend") {
            EXPECT_GT(l["tokens_reused"].num, 0) << "blend reuses the precomputed chunks";
        } else {
            EXPECT_EQ(l["tokens_reused"].num, 0) << "full recomputes every token";
        }
    }
    // One request at a time and one waiting: two clients queue and none is refused.
    const run_result q = serve({"--data", data, "--questions", questions, "--concurrency", "2",
                                "--requests", "4", "--max-tokens", "2", "--k", "2", "--max-active",
                                "1", "--max-queued", "1", "--json"});
    ASSERT_EQ(q.exit_code, 0) << q.err << q.out;
    const json jq = json::parse(q.out);
    EXPECT_EQ(jq["max_active_requests"].num, 1);
    EXPECT_EQ(jq["levels"][size_t{0}]["requests"].num, 4) << q.out;
    EXPECT_EQ(serve({"--data", data}).exit_code, 2) << "--questions is required";
    EXPECT_EQ(serve({"--data", data, "--questions", dir_ + "/none.txt"}).exit_code, 2);
    write_file(dir_ + "/empty.txt", "# nothing\n\n");
    EXPECT_EQ(serve({"--data", data, "--questions", dir_ + "/empty.txt"}).exit_code, 2);
    EXPECT_EQ(serve({"--data", data, "--questions", questions, "--mode", "fast"}).exit_code, 2);
}

}  // namespace
