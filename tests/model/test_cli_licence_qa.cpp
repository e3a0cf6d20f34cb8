// scripts/make-licence-qa.py, the licence-QA dataset builder (README, "Licence-QA dataset"): it
// is deterministic and fails clearly on a missing licence file or anchor (on licence texts this
// test writes itself), and the dataset it builds from the machine's /usr/share/common-licenses
// loads and runs in `cacheblend eval` (skipped where Debian's licence texts are absent). The
// eval run's stderr is a file, not a terminal, so it also checks eval's plain progress lines.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/cli-runner.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using cbltest::json;
using cbltest::read_all;
using cbltest::shell_quote;
using cbltest::write_file;
using run_result = cbltest::cli_result;

const char k_licences[] = "/usr/share/common-licenses";

std::string script_path() {
    return std::string(CBL_TEST_DATA_DIR) + "/../../scripts/make-licence-qa.py";
}

bool have_python() { return std::system("command -v python3 >/dev/null 2>&1") == 0; }

std::string describe(const run_result& r) {
    return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out.substr(0, 2000) +
           "\nstderr: " + r.err.substr(0, 4000);
}

class LicenceQa : public ::testing::Test {
protected:
    void SetUp() override {
        if (!have_python()) GTEST_SKIP() << "python3 not on PATH";
        if (!cbltest::file_exists(script_path())) GTEST_SKIP() << "no " << script_path();
        char tmpl[] = "/tmp/cbl-licence-qa-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
    }
    void TearDown() override {
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    run_result make(std::vector<std::string> args) const {
        args.insert(args.begin(), {"python3", script_path()});
        return cbltest::run_program(args, dir_ + "/stderr");
    }

    // Three small licences of three paragraphs each and a question file over them.
    void write_fake_licences() const {
        ASSERT_TRUE(::mkdir((dir_ + "/lic").c_str(), 0755) == 0 || errno == EEXIST);
        const char* names[] = {"ALPHA", "BETA", "GAMMA"};
        for (int l = 0; l < 3; ++l) {
            std::string text = std::string("              ") + names[l] + " PUBLIC LICENSE\n\n";
            for (int p = 0; p < 3; ++p) {
                text += "  Paragraph " + std::to_string(p) + " of the " + names[l] +
                        " licence says that\nthe licensee must keep every notice intact and "
                        "must\nnot remove any of the words written here.\n\n";
            }
            write_file(dir_ + "/lic/" + names[l], text);
        }
        write_file(dir_ + "/lic/ALPHA",
                   read_all(dir_ + "/lic/ALPHA") +
                       "  The ALPHA licence grants a cure period of 45 days after notice.\n");
    }
    void write_questions(const std::string& anchor, const std::string& licence = "ALPHA") const {
        write_file(dir_ + "/q.json",
                   "{\"licences\": {\"ALPHA\": \"Alpha Licence\", \"BETA\": \"Beta Licence\", "
                   "\"GAMMA\": \"Gamma Licence\"},\n \"questions\": [{\"id\": \"alpha-cure\", "
                   "\"licence\": \"" + licence + "\", \"anchor\": \"" + anchor + "\", "
                   "\"question\": \"How long is the ALPHA cure period?\", \"answers\": "
                   "[\"45 days\"]}]}\n");
    }

    std::string dir_;
};

TEST_F(LicenceQa, BuildsDeterministicRecordsFromAnyLicenceFolder) {
    write_fake_licences();
    write_questions("a cure period of 45 days");
    const std::vector<std::string> args{"--licences", dir_ + "/lic", "--questions",
                                        dir_ + "/q.json", "--words", "20", "--chunks", "4"};
    std::vector<std::string> a1 = args, a2 = args;
    a1.insert(a1.end(), {"--out", dir_ + "/out/one.json"});  // a folder the script creates
    a2.insert(a2.end(), {"--out", dir_ + "/two.json"});
    const run_result r1 = make(a1), r2 = make(a2);
    ASSERT_EQ(r1.exit_code, 0) << describe(r1);
    ASSERT_EQ(r2.exit_code, 0) << describe(r2);
    EXPECT_NE(r1.out.find("1 records x 4 passages"), std::string::npos) << r1.out;
    const std::string built = read_all(dir_ + "/out/one.json");
    EXPECT_EQ(built, read_all(dir_ + "/two.json"));
    json j;
    ASSERT_NO_THROW(j = json::parse(built)) << built;
    ASSERT_EQ(j.kind, json::array);
    ASSERT_EQ(j.size(), 1u);
    const json& rec = j[0];
    EXPECT_EQ(rec["question"].str, "How long is the ALPHA cure period?");
    EXPECT_EQ(rec["answers"][0].str, "45 days");
    ASSERT_EQ(rec["ctxs"].size(), 4u);
    const json& gold = rec["ctxs"][static_cast<size_t>(rec["gold_ctx"].as_int())];
    EXPECT_EQ(gold["title"].str, "Alpha Licence");
    EXPECT_NE(gold["text"].str.find("45 days"), std::string::npos) << gold["text"].str;
    // Hard-wrapped lines are reflowed; no distractor holds the answer.
    EXPECT_EQ(gold["text"].str.find("that\nthe"), std::string::npos) << gold["text"].str;
    for (const json& c : rec["ctxs"].arr) {
        if (&c != &gold) EXPECT_EQ(c["text"].str.find("45 days"), std::string::npos);
    }
}

TEST_F(LicenceQa, FailsClearlyOnAMissingLicenceOrAnchor) {
    write_fake_licences();
    const std::vector<std::string> base{"--licences", dir_ + "/lic", "--questions",
                                        dir_ + "/q.json", "--words", "20", "--out",
                                        dir_ + "/out.json"};
    write_questions("a cure period of 45 days");
    ASSERT_EQ(::unlink((dir_ + "/lic/GAMMA").c_str()), 0);
    run_result r = make(base);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_NE(r.err.find("make-licence-qa: error: licence file"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("GAMMA"), std::string::npos) << r.err;

    write_fake_licences();  // GAMMA is back
    write_questions("a cure period of 90 days");
    r = make(base);
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_NE(r.err.find("alpha-cure"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not found in ALPHA"), std::string::npos) << r.err;
    EXPECT_FALSE(cbltest::file_exists(dir_ + "/out.json"));
}

TEST_F(LicenceQa, BuiltFromDebianLicencesItRunsInEval) {
    if (!cbltest::file_exists(std::string(k_licences) + "/GPL-3")) {
        GTEST_SKIP() << k_licences << " is absent (not a Debian machine)";
    }
    if (!cbltest::file_exists(cbltest::cli_path())) {
        GTEST_SKIP() << "CLI not built: " << cbltest::cli_path();
    }
    CBL_REQUIRE_DEFAULT_MODEL(model);
    const std::string dataset = dir_ + "/licence-qa.json";
    const run_result b = make({"--out", dataset});
    ASSERT_EQ(b.exit_code, 0) << describe(b);
    EXPECT_NE(b.out.find("x 6 passages"), std::string::npos) << b.out;
    json d;
    ASSERT_NO_THROW(d = cbltest::load_json_file(dataset));
    ASSERT_GE(d.size(), 25u);
    for (const json& rec : d.arr) {
        ASSERT_EQ(rec["ctxs"].size(), 6u) << rec["question"].str;
        EXPECT_FALSE(rec["answers"][0].str.empty());
    }

    // One record, four tokens: the dataset loads and every mode runs on it (two threads: model
    // tests count as two processors in ctest). stderr is a file, so eval prints plain progress
    // lines instead of a bar.
    const run_result r = cbltest::run_cli(
        {"eval", "--model", model, "--dataset", dataset, "--limit", "1", "--max-tokens", "4",
         "--threads", "2", "--modes", "full,reuse,blend", "--store", dir_ + "/kv", "--json"},
        dir_ + "/eval-stderr");
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    json j;
    ASSERT_NO_THROW(j = json::parse(r.out)) << r.out;
    EXPECT_EQ(j["records"].num, 1);
    EXPECT_EQ(j["skipped"].num, 0);
    EXPECT_EQ(j["warm"]["chunks"].num, 6);
    EXPECT_GT(j["prompt_tokens_mean"].num, 1000);
    for (const char* m : {"full", "reuse", "blend"}) {
        ASSERT_TRUE(j["modes"].has(m)) << r.out;
        EXPECT_EQ(j["modes"][m]["n_gold"].num, 1) << m;
    }
    EXPECT_NE(r.err.find("eval: warming KV store: record 1/1, 6 chunks computed, elapsed "),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("eval: record 1/1 (full, reuse, blend), elapsed "), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << "a bar was drawn: " << r.err;
}

}  // namespace
