// `cacheblend models` and model names on the command line: the list (text and --json) reports
// each registry model's file in the cache folder as present, missing or of the wrong size, marks
// the default and says what CBL_MODEL makes it; `--model NAME` loads the cached file of that name,
// and a missing one fails with the fetch command. A temporary XDG_CACHE_HOME holds the files
// (sparse files of the registry's size: the list never reads them).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "util/cli-runner.h"
#include "util/json.h"
#include "util/scoped-env.h"
#include "util/test-util.h"

namespace {

namespace fs = std::filesystem;
using cbltest::cli_path;
using cbltest::json;
using cbltest::scoped_env;
using run_result = cbltest::cli_result;

struct registry_file {
    const char* name;
    const char* file;
    uint64_t bytes;
};
// From core/model/model-registry.tsv (test_model_registry checks the library against it).
const registry_file k_smollm{"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", 98362432};
const registry_file k_qwen05{"qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
                             491400064};
const registry_file k_qwen15{"qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
                             1117320768};

std::string describe(const run_result& r) {
    return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.signal) +
           "\nstdout: " + r.out.substr(0, 3000) + "\nstderr: " + r.err.substr(0, 2000);
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// The output line that starts with prefix ("" when none).
std::string line_starting(const std::string& text, const std::string& prefix) {
    size_t p = 0;
    while (p < text.size()) {
        const size_t nl = text.find('\n', p);
        const std::string line = text.substr(p, nl == std::string::npos ? nl : nl - p);
        if (line.rfind(prefix, 0) == 0) return line;
        if (nl == std::string::npos) break;
        p = nl + 1;
    }
    return "";
}

class CliModels : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        suite_model_ = cbltest::default_model_path();  // before the cache folder is replaced
        char tmpl[] = "/tmp/cbl-cli-models-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        root_ = d;
        fs::create_directories(models());
        xdg_.emplace("XDG_CACHE_HOME", root_.c_str());
        model_env_.emplace("CBL_MODEL", nullptr);
    }
    void TearDown() override {
        model_env_.reset();
        xdg_.reset();
        if (!root_.empty()) {
            std::error_code ec;
            fs::remove_all(root_, ec);
        }
    }
    std::string models() const { return root_ + "/cacheblend/models"; }
    std::string path_of(const registry_file& f) const { return models() + "/" + f.file; }
    // A sparse file of the given size: no disk blocks, but stat sees the size.
    void make_file(const registry_file& f, uint64_t size) const {
        { std::ofstream(path_of(f), std::ios::binary); }
        fs::resize_file(path_of(f), size);
    }
    run_result run(const std::vector<std::string>& args) const {
        return cbltest::run_cli(args, root_ + "/stderr");
    }

    std::string root_, suite_model_;
    std::optional<scoped_env> xdg_, model_env_;
};

}  // namespace

TEST_F(CliModels, JsonReportsPresenceSizesAndTheDefault) {
    make_file(k_smollm, k_smollm.bytes);
    make_file(k_qwen05, 1000);  // an interrupted copy, say
    const run_result r = run({"models", "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.err, "");
    const json j = json::parse(r.out);
    EXPECT_EQ(j["folder"].str, models());
    EXPECT_EQ(j["default"].str, "qwen2.5-coder-1.5b");
    EXPECT_EQ(j["default_path"].str, path_of(k_qwen15));
    const json& ms = j["models"];
    ASSERT_EQ(ms.size(), 3u);
    const registry_file* want[] = {&k_smollm, &k_qwen05, &k_qwen15};
    for (size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE(want[i]->name);
        const json& m = ms[i];
        EXPECT_EQ(m["name"].str, want[i]->name);
        EXPECT_EQ(m["file"].str, want[i]->file);
        EXPECT_EQ(m["path"].str, path_of(*want[i]));
        EXPECT_EQ(m["bytes"].as_int(), static_cast<int64_t>(want[i]->bytes));
        EXPECT_EQ(m["sha256"].str.size(), 64u);
        EXPECT_EQ(m["licence"].str, "Apache-2.0");
        EXPECT_FALSE(m["description"].str.empty());
        EXPECT_EQ(m["default"].b, i == 2);
    }
    EXPECT_TRUE(ms[0]["present"].b);
    EXPECT_TRUE(ms[0]["size_ok"].b);
    EXPECT_EQ(ms[0]["size"].as_int(), static_cast<int64_t>(k_smollm.bytes));
    EXPECT_TRUE(ms[1]["present"].b);
    EXPECT_FALSE(ms[1]["size_ok"].b);
    EXPECT_EQ(ms[1]["size"].as_int(), 1000);
    EXPECT_FALSE(ms[2]["present"].b);
    EXPECT_FALSE(ms[2]["size_ok"].b);
    EXPECT_EQ(ms[2]["size"].kind, json::null);
}

TEST_F(CliModels, TextListsEveryModel) {
    make_file(k_smollm, k_smollm.bytes);
    make_file(k_qwen05, 1000);
    const run_result r = run({"models"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const std::string header = line_starting(r.out, "NAME");
    EXPECT_TRUE(contains(header, "PRESENT")) << r.out;
    EXPECT_TRUE(contains(header, "LICENCE")) << r.out;
    const std::string smol = line_starting(r.out, "smollm2-135m ");
    EXPECT_TRUE(contains(smol, " yes ")) << r.out;
    EXPECT_TRUE(contains(smol, "93.8 MiB")) << r.out;
    EXPECT_TRUE(contains(smol, "Apache-2.0")) << r.out;
    EXPECT_TRUE(contains(smol, k_smollm.file)) << r.out;
    const std::string q05 = line_starting(r.out, "qwen2.5-coder-0.5b ");
    EXPECT_TRUE(contains(q05, " wrong size ")) << r.out;
    EXPECT_TRUE(contains(q05, "1000 B")) << r.out;  // the size found, not the registry's
    const std::string q15 = line_starting(r.out, "qwen2.5-coder-1.5b *");
    EXPECT_TRUE(contains(q15, " no ")) << r.out;
    EXPECT_TRUE(contains(q15, "1.04 GiB")) << r.out;
    EXPECT_TRUE(contains(r.out, "    SmolLM2-135M-Instruct, Q4_1")) << r.out;  // descriptions
    EXPECT_TRUE(contains(r.out, "folder: " + models() + "\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "cacheblend-fetch-model NAME")) << r.out;
    EXPECT_FALSE(contains(r.out, "CBL_MODEL overrides")) << r.out;
}

TEST_F(CliModels, CblModelOverridesTheDefault) {
    scoped_env env("CBL_MODEL", "smollm2-135m");
    run_result r = run({"models", "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const json j = json::parse(r.out);
    EXPECT_EQ(j["default"].str, "qwen2.5-coder-1.5b");  // the library's own default ...
    EXPECT_EQ(j["default_path"].str, path_of(k_smollm));  // ... and what NULL loads now
    r = run({"models"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_TRUE(contains(r.out, "CBL_MODEL overrides it: " + path_of(k_smollm))) << r.out;
}

TEST_F(CliModels, UsageErrors) {
    run_result r = run({"models", "extra"});
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    r = run({"models", "--nope"});
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    r = run({"models", "--help"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_TRUE(contains(r.out, "usage: cacheblend models")) << r.out;
    r = run({"--help"});
    EXPECT_TRUE(contains(r.out, "  models ")) << r.out;
}

// --model NAME loads the cache file of that name: the same token ids as its path.
TEST_F(CliModels, ModelFlagTakesAName) {
    const std::string real = suite_model_;
    if (!cbltest::file_exists(real)) {
        const char* req = std::getenv("CBL_REQUIRE_MODEL");
        if (req && std::string(req) == "1") FAIL() << "the suite's model is missing: " << real;
        GTEST_SKIP() << "the suite's model is missing: " << real;
    }
    fs::create_symlink(fs::absolute(real), path_of(k_smollm));
    const run_result by_name =
        run({"tokenize", "--model", "smollm2-135m", "--text", "Hello world", "--json"});
    const run_result by_path = run({"tokenize", "--model", real, "--text", "Hello world", "--json"});
    ASSERT_EQ(by_name.exit_code, 0) << describe(by_name);
    ASSERT_EQ(by_path.exit_code, 0) << describe(by_path);
    EXPECT_EQ(by_name.out, by_path.out);
    EXPECT_TRUE(contains(by_name.out, "\"ids\"")) << by_name.out;
}

TEST_F(CliModels, MissingNamedModelNamesTheFetchCommand) {
    run_result r = run({"generate", "--model", "qwen2.5-coder-0.5b", "--prompt", "hi"});
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << describe(r);
    EXPECT_EQ(lines[0].rfind("cacheblend: error: ", 0), 0u) << lines[0];
    EXPECT_TRUE(contains(lines[0], "cacheblend-fetch-model qwen2.5-coder-0.5b")) << lines[0];
    EXPECT_TRUE(contains(lines[0], models())) << lines[0];

    // No --model and no CBL_MODEL: the default, qwen2.5-coder-1.5b.
    r = run({"tokenize", "--text", "hi"});
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_TRUE(contains(r.err, "cacheblend-fetch-model qwen2.5-coder-1.5b")) << r.err;
}
