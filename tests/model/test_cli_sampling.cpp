// The sampling flags of the CLI (issue 11): every generating command lists them, a bad value
// exits 2 with one line before anything loads, and `generate` maps them onto the library
// (llama.cpp's "off" values included: --repeat-last-n 0 turns the penalties off).
#include <string>
#include <vector>

#include "util/cli-runner.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using cbltest::cli_path;
using cbltest::json;
using run_result = cbltest::cli_result;

run_result run_cli(const std::vector<std::string>& args) {
    return cbltest::run_cli(args, testing::TempDir() + "cbl_test_cli_sampling_stderr");
}

// The words a command needs before it reads the sampling flags (nothing here is loaded: a bad
// sampling value must stop the command first).
std::vector<std::string> command(const std::string& name) {
    if (name == "generate") return {"generate", "--prompt", "hi", "--model", "/nonexistent.gguf"};
    if (name == "ask") {
        return {"ask", "--data", "/nonexistent", "q", "--model", "/nonexistent.gguf"};
    }
    if (name == "blend") {
        return {"blend", "--chunk", "/nonexistent.txt", "--question", "q", "--model",
                "/nonexistent.gguf"};
    }
    return {"eval", "--dataset", "/nonexistent.json", "--model", "/nonexistent.gguf"};
}

#define CBL_REQUIRE_CLI() \
    if (!cbltest::file_exists(cli_path())) { GTEST_SKIP() << "CLI not built: " << cli_path(); }

TEST(CliSampling, EveryGeneratingCommandListsTheFlags) {
    CBL_REQUIRE_CLI();
    for (const char* c : {"generate", "ask", "blend", "eval"}) {
        const run_result r = run_cli({c, "--help"});
        ASSERT_EQ(r.exit_code, 0) << c << ": " << r.err;
        for (const char* f : {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                              "--repeat-last-n", "--frequency-penalty", "--presence-penalty",
                              "--seed"}) {
            EXPECT_NE(r.out.find(f), std::string::npos) << c << " lacks " << f;
        }
    }
    // ask's own default, stated where users look.
    EXPECT_NE(run_cli({"ask", "--help"}).out.find("(default 1.1)"), std::string::npos);
}

TEST(CliSampling, BadValuesExit2WithOneLine) {
    CBL_REQUIRE_CLI();
    const std::vector<std::vector<std::string>> bad = {
        {"--repeat-penalty", "-1"}, {"--repeat-penalty", "0"}, {"--repeat-penalty", "x"},
        {"--repeat-last-n", "-2"},  {"--top-p", "0"},          {"--temp", "-0.5"},
        {"--seed", "-1"},           {"--frequency-penalty", "nan"},
    };
    for (const char* c : {"generate", "ask", "blend", "eval"}) {
        for (const auto& flag : bad) {
            std::vector<std::string> args = command(c);
            args.insert(args.end(), flag.begin(), flag.end());
            const run_result r = run_cli(args);
            EXPECT_EQ(r.exit_code, 2) << c << " " << flag[0] << " " << flag[1] << ": " << r.err;
            const auto lines = r.err_lines();
            ASSERT_EQ(lines.size(), 1u) << r.err;
            EXPECT_NE(lines[0].find(flag[0]), std::string::npos) << lines[0];
        }
    }
}

TEST(CliSampling, GenerateMapsTheFlagsOntoTheLibrary) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    auto tokens = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"generate", "--model", model_path, "--prompt",
                                         "List the rivers of South America:", "--max-tokens",
                                         "24", "--threads", "1", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const run_result r = run_cli(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        std::vector<int64_t> out;
        if (r.exit_code == 0) {
            // Keep the parsed document alive: a range-for over a member of a temporary would
            // iterate freed memory.
            const json doc = json::parse(r.out);
            for (const json& t : doc["tokens"].arr) out.push_back(t.as_int());
        }
        return out;
    };
    const std::vector<int64_t> greedy = tokens({});
    ASSERT_FALSE(greedy.empty());
    EXPECT_NE(tokens({"--repeat-penalty", "1.5"}), greedy);
    EXPECT_NE(tokens({"--presence-penalty", "2"}), greedy);
    // A window of 0 tokens is llama.cpp's "no penalties", whatever the penalty says.
    EXPECT_EQ(tokens({"--repeat-penalty", "1.5", "--repeat-last-n", "0"}), greedy);
    EXPECT_EQ(tokens({"--repeat-penalty", "1"}), greedy);
}

}  // namespace
