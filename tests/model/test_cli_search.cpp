// `cacheblend search` document filters (docs/ARCHITECTURE.md, 'Retrieval'): --collection,
// --uri-prefix (resolved like ingest names files: real absolute paths, so relative and symlinked
// prefixes work) and repeatable --filter KEY=VALUE on document metadata (files carry kind and
// path), in BM25, hybrid and dense mode; malformed filters are usage errors (exit 2).
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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
using names = std::set<std::string>;

class CliSearch : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-search-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        const std::string docs = dir_ + "/docs";
        ASSERT_EQ(std::system(("mkdir -p " + shell_quote(docs + "/rivers") + " " +
                               shell_quote(docs + "/rivers-old") + " " +
                               shell_quote(docs + "/lakes") + " && ln -s docs " +
                               shell_quote(dir_ + "/link"))
                                  .c_str()),
                  0);
        // Every document mentions "river", so an unfiltered search finds all four.
        write_file(docs + "/rivers/amazon.txt",
                   "The Amazon river flows through Brazil, Peru and Colombia.\n");
        write_file(docs + "/rivers/nile.md",
                   "# Nile\n\nThe Nile river flows north through Egypt into the Mediterranean.\n");
        write_file(docs + "/rivers-old/danube.txt",
                   "The Danube river flows through Vienna, Budapest and Belgrade.\n");
        write_file(docs + "/lakes/baikal.md",
                   "# Baikal\n\nLake Baikal in Siberia is fed by the Selenga river.\n");
        data_ = dir_ + "/data";
        const run_result ing = run({"ingest", "--data", data_, docs, "--json"});
        ASSERT_EQ(ing.exit_code, 0) << ing.err << ing.out;
        ASSERT_EQ(json::parse(ing.out)["documents"].num, 4);
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

    // File names of the documents `search ... river` hits with these extra flags.
    names search(const std::string& mode, std::vector<std::string> flags) const {
        std::vector<std::string> args = {"search", "--data", data_, "--mode", mode,
                                         "--k",    "10",   "--json"};
        args.insert(args.end(), flags.begin(), flags.end());
        args.push_back("river");
        const run_result r = run(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        names out;
        if (r.exit_code != 0) return out;
        const json j = json::parse(r.out);  // kept alive: the loop reads references into it
        for (const json& h : j["hits"].arr) {
            const std::string& uri = h["uri"].str;
            out.insert(uri.substr(uri.rfind('/') + 1));
        }
        return out;
    }

    std::string model_, dir_, data_;
};

TEST_F(CliSearch, FiltersRestrictBm25AndHybrid) {
    const std::string rivers = dir_ + "/docs/rivers/";
    for (const std::string mode : {"bm25", "hybrid"}) {
        SCOPED_TRACE(mode);
        EXPECT_EQ(search(mode, {}),
                  (names{"amazon.txt", "nile.md", "danube.txt", "baikal.md"}));
        EXPECT_EQ(search(mode, {"--uri-prefix", rivers}), (names{"amazon.txt", "nile.md"}));
        // A plain string prefix: without the slash, rivers-old/ matches too.
        EXPECT_EQ(search(mode, {"--uri-prefix", dir_ + "/docs/rivers"}),
                  (names{"amazon.txt", "nile.md", "danube.txt"}));
        // Documents are named by real paths: a symlinked or ".." prefix resolves to them.
        EXPECT_EQ(search(mode, {"--uri-prefix", dir_ + "/link/rivers/"}),
                  (names{"amazon.txt", "nile.md"}));
        EXPECT_EQ(search(mode, {"--uri-prefix", dir_ + "/docs/lakes/../rivers/ama"}),
                  (names{"amazon.txt"}));
        EXPECT_EQ(search(mode, {"--filter", "kind=markdown"}), (names{"nile.md", "baikal.md"}));
        EXPECT_EQ(search(mode, {"--filter", "kind=markdown", "--uri-prefix", rivers}),
                  (names{"nile.md"}));
        // Repeated filters must all match.
        EXPECT_EQ(search(mode, {"--filter", "kind=markdown", "--filter", "kind=text"}), names{});
        EXPECT_EQ(search(mode, {"--filter", "no-such-key=md"}), names{});
        EXPECT_EQ(search(mode, {"--collection", "other"}), names{});
    }
}

TEST_F(CliSearch, RelativeUriPrefixIsResolvedFromTheWorkingDirectory) {
    char cwd[PATH_MAX];
    ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
    // As many ".." as the working directory is deep, then the absolute path without its '/'.
    std::string rel;
    for (const char* p = cwd; *p; ++p) {
        if (*p == '/' && p[1]) rel += "../";
    }
    rel += dir_.substr(1) + "/docs/lakes/";
    EXPECT_EQ(search("bm25", {"--uri-prefix", rel}), names{"baikal.md"});
}

TEST_F(CliSearch, FiltersRestrictDense) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(emb);
    EXPECT_EQ(search("dense", {"--filter", "kind=markdown"}), (names{"nile.md", "baikal.md"}));
    EXPECT_EQ(search("dense", {"--filter", "kind=text", "--uri-prefix", dir_ + "/docs/rivers/"}),
              names{"amazon.txt"});
}

TEST_F(CliSearch, MalformedFilterIsAUsageError) {
    for (const std::string bad : {"kind", "=md", "a\"b=x", "a b=x"}) {
        const run_result r = run({"search", "--data", data_, "--filter", bad, "river"});
        EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
        ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
        EXPECT_NE(r.err.find("--filter"), std::string::npos) << r.err;
    }
}

}  // namespace
