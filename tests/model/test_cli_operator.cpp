// An honest CLI for operators (issue 13, item 2): mistakes that used to succeed silently exit
// non-zero with a message (`ingest --remove` of an unknown uri, `ingest` of a missing path, a
// read-only command on a data directory that does not exist, which it must not create), `docs`
// lists the documents, `stats` shows the sizes against the KV budget, every command that opens a
// KV store takes --kv-budget, and with --json an error is also a JSON object on stdout.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include "util/cli-runner.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using cbltest::cli_path;
using cbltest::json;
using cbltest::shell_quote;
using cbltest::write_file;
using run_result = cbltest::cli_result;

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

bool has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

class CliOperator : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-operator-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        docs_ = dir_ + "/docs";
        ASSERT_EQ(::mkdir(docs_.c_str(), 0700), 0);
        write_file(docs_ + "/amazon.txt", "The Amazon river flows through Brazil and Peru.\n");
        write_file(docs_ + "/nile.md", "# Nile\n\nThe Nile river flows north through Egypt.\n");
        data_ = dir_ + "/data";
        const run_result ing = run({"ingest", "--data", data_, docs_, "--precompute", "--json"});
        ASSERT_EQ(ing.exit_code, 0) << ing.err << ing.out;
        ASSERT_EQ(json::parse(ing.out)["documents"].num, 2);
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

    // The uris `docs --json` lists, by file name.
    std::set<std::string> doc_names(std::vector<std::string> extra = {}) const {
        std::vector<std::string> args = {"docs", "--data", data_, "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const run_result r = run(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        std::set<std::string> out;
        if (r.exit_code != 0) return out;
        const json j = json::parse(r.out);  // kept alive: the loop reads references into it
        for (const json& d : j["documents"].arr) {
            out.insert(d["uri"].str.substr(d["uri"].str.rfind('/') + 1));
        }
        return out;
    }

    std::string model_, dir_, docs_, data_;
};

TEST_F(CliOperator, RemoveOfAnUnknownUriFailsAndRemovesNothing) {
    // A known uri with an unknown one (a relative path: documents are named by absolute path):
    // both are checked before anything is removed.
    const run_result r = run({"ingest", "--data", data_, "--remove", docs_ + "/amazon.txt",
                              "--remove", "docs/nile.md"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_TRUE(has(r.err, "cacheblend: error: ")) << r.err;
    EXPECT_TRUE(has(r.err, "docs/nile.md")) << r.err;
    EXPECT_TRUE(has(r.err, "cacheblend docs --data " + data_)) << r.err;
    EXPECT_EQ(doc_names(), (std::set<std::string>{"amazon.txt", "nile.md"}));

    const run_result ok = run({"ingest", "--data", data_, "--remove", docs_ + "/nile.md"});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(doc_names(), (std::set<std::string>{"amazon.txt"}));
    // Removing it again: it is not there any more.
    EXPECT_EQ(run({"ingest", "--data", data_, "--remove", docs_ + "/nile.md"}).exit_code, 1);
}

TEST_F(CliOperator, IngestOfAMissingPathFailsAndIngestsNothing) {
    write_file(docs_ + "/danube.txt", "The Danube river flows through Vienna.\n");
    const std::string missing = dir_ + "/no-such-folder";
    const run_result r = run({"ingest", "--data", data_, docs_, missing});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_TRUE(has(r.err, "cannot access " + missing)) << r.err;
    // Checked before any work: the good folder's new file was not ingested either.
    EXPECT_EQ(doc_names(), (std::set<std::string>{"amazon.txt", "nile.md"}));
}

TEST_F(CliOperator, ReadOnlyCommandsNeverCreateADataDir) {
    const std::string typo = dir_ + "/dtaa";
    const std::vector<std::vector<std::string>> commands = {
        {"search", "--data", typo, "river"},
        {"ask", "--data", typo, "Where does the Nile flow?"},
        {"docs", "--data", typo},
        {"stats", "--data", typo},
    };
    for (const auto& args : commands) {
        SCOPED_TRACE(args[0]);
        const run_result r = run(args);
        EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
        EXPECT_TRUE(has(r.err, "no data directory at " + typo)) << r.err;
        EXPECT_TRUE(has(r.err, "cacheblend ingest --data " + typo + " PATH")) << r.err;
        EXPECT_FALSE(exists(typo)) << args[0] << " created " << typo;
    }
    // A folder that exists but holds no catalog is no data directory either, and stays empty.
    const std::string empty = dir_ + "/empty";
    ASSERT_EQ(::mkdir(empty.c_str(), 0700), 0);
    const run_result r = run({"search", "--data", empty, "river"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_FALSE(exists(empty + "/catalog.db"));
    EXPECT_FALSE(exists(empty + "/kv"));
}

// "2026-11-27": the UTC date now, as docs prints dates.
std::string today_utc() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[16];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
    return buf;
}

TEST_F(CliOperator, DocsListsTheDocuments) {
    const run_result r = run({"docs", "--data", data_, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const json& docs = j["documents"];
    ASSERT_EQ(docs.size(), 2u) << r.out;
    // Ordered by uri: amazon.txt, nile.md.
    EXPECT_EQ(docs[0]["uri"].str, docs_ + "/amazon.txt");
    EXPECT_EQ(docs[0]["kind"].str, "text");
    EXPECT_EQ(docs[1]["kind"].str, "markdown");
    for (const json& d : docs.arr) {
        EXPECT_GE(d["chunks"].num, 1);
        EXPECT_EQ(d["kv_chunks"].num, d["chunks"].num) << "ingested with --precompute";
        EXPECT_GT(d["source_bytes"].num, 0);
        EXPECT_EQ(d["modified"].str.size(), 20u) << d["modified"].str;  // 2026-11-27T15:19:12Z
        // Issue 13 item 2: the KV bytes and when it was ingested (by this fixture, today).
        EXPECT_GT(d["kv_bytes"].num, 0) << r.out;
        EXPECT_EQ(d["ingested_at"].str.size(), 20u) << r.out;
        EXPECT_EQ(d["ingested_at"].str.substr(0, 10), today_utc()) << r.out;
    }
    // Both documents' KV bytes are the store's (no chunk is shared between them).
    const run_result st = run({"stats", "--data", data_, "--json"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_EQ(docs[0]["kv_bytes"].num + docs[1]["kv_bytes"].num,
              json::parse(st.out)["kv_bytes"].num)
        << r.out << st.out;
    EXPECT_EQ(doc_names({"--uri-prefix", docs_ + "/nile"}), std::set<std::string>{"nile.md"});
    EXPECT_EQ(doc_names({"--filter", "kind=text"}), std::set<std::string>{"amazon.txt"});
    EXPECT_EQ(doc_names({"--collection", "other"}), std::set<std::string>{});

    const run_result human = run({"docs", "--data", data_});
    ASSERT_EQ(human.exit_code, 0) << human.err;
    EXPECT_TRUE(has(human.out, docs_ + "/nile.md")) << human.out;
    EXPECT_TRUE(has(human.out, "2 documents")) << human.out;
    EXPECT_TRUE(has(human.out, " of KV)")) << human.out;
    EXPECT_TRUE(has(human.out, ", ingested " + today_utc() + "T")) << human.out;
}

TEST_F(CliOperator, StatsShowsSizesAndTheKvBudget) {
    const run_result r = run({"stats", "--data", data_, "--kv-budget", "1G", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["documents"].num, 2);
    EXPECT_GE(j["chunks"].num, 2);
    EXPECT_GT(j["catalog_bytes"].num, 0);
    EXPECT_EQ(j["kv_entries"].num, j["chunks"].num);
    EXPECT_GT(j["kv_bytes"].num, 0);
    EXPECT_EQ(j["kv_budget_bytes"].num, 1024.0 * 1024 * 1024);
    EXPECT_GT(j["disk_free_bytes"].num, 0);
    EXPECT_TRUE(j.has("vectors") && j.has("index_bytes")) << r.out;

    const run_result human = run({"stats", "--data", data_});
    ASSERT_EQ(human.exit_code, 0) << human.err;
    EXPECT_TRUE(has(human.out, "of 8.0 GiB budget")) << human.out;
    EXPECT_TRUE(has(human.out, "documents: 2")) << human.out;
}

TEST_F(CliOperator, EveryCommandThatOpensAStoreTakesKvBudget) {
    for (const std::string cmd :
         {"ingest", "search", "ask", "docs", "stats", "blend", "eval", "calibrate"}) {
        const run_result r = run({cmd, "--help"});
        EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
        EXPECT_TRUE(has(r.out, "--kv-budget SIZE")) << cmd;
    }
    // The budget is applied: a store opened with a budget below what it holds evicts to it.
    const run_result r = run({"search", "--data", data_, "--kv-budget", "1K", "river"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const run_result st = run({"stats", "--data", data_, "--kv-budget", "1K", "--json"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_EQ(json::parse(st.out)["kv_entries"].num, 0) << st.out;
    // A bad size is bad usage.
    EXPECT_EQ(run({"ingest", "--data", data_, "--kv-budget", "lots", docs_}).exit_code, 2);
}

TEST_F(CliOperator, JsonErrorsAreJsonObjectsOnStdout) {
    const std::string typo = dir_ + "/typo";
    const run_result r = run({"search", "--data", typo, "--json", "river"});
    EXPECT_EQ(r.exit_code, 1);
    const json e = json::parse(r.out);  // stdout: what a --json script reads, one object
    EXPECT_EQ(e["error"]["status"].str, "io");
    EXPECT_TRUE(has(e["error"]["message"].str, "no data directory at " + typo)) << r.out;
    // stderr keeps the one line people and logs read.
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("cacheblend: error: no data directory at ", 0), 0u) << r.err;

    const run_result usage = run({"docs", "--json"});  // --data missing: exit 2 as before
    EXPECT_EQ(usage.exit_code, 2);
    EXPECT_EQ(json::parse(usage.out)["error"]["status"].str, "usage") << usage.out;

    const run_result remove = run({"ingest", "--data", data_, "--json", "--remove", "nope"});
    EXPECT_EQ(remove.exit_code, 1);
    EXPECT_TRUE(has(json::parse(remove.out)["error"]["message"].str, "nope")) << remove.out;

    // Without --json stdout stays empty and the line is unchanged.
    const run_result plain = run({"search", "--data", typo, "river"});
    EXPECT_EQ(plain.exit_code, 1);
    EXPECT_TRUE(plain.out.empty()) << plain.out;
    EXPECT_EQ(plain.err.rfind("cacheblend: error: no data directory at ", 0), 0u) << plain.err;
}

}  // namespace

// Progress when stderr is not a terminal (a log, CI): plain lines with the file count, the rate and
// the elapsed time, one when each phase ends; precompute counts against the chunks it has to do.
TEST_F(CliOperator, IngestPrintsProgressLinesWhenStderrIsAFile) {
    write_file(docs_ + "/danube.txt", "The Danube flows into the Black Sea.\n");
    write_file(docs_ + "/rhine.txt", "The Rhine flows into the North Sea.\n");
    const run_result r = run({"ingest", "--data", data_, docs_, "--precompute"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "ingest: file 4/4, ")) << r.err;
    EXPECT_TRUE(has(r.err, " files/s") || has(r.err, " s/file")) << r.err;
    EXPECT_TRUE(has(r.err, "elapsed ")) << r.err;
    // Two new documents of one chunk each: precompute has 2 chunks to do, not "n of n+1".
    EXPECT_TRUE(has(r.err, "ingest: KV of chunk 2/2")) << r.err;
    EXPECT_FALSE(has(r.err, "/100")) << r.err;  // the old percent-only bar
}
