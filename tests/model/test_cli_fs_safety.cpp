// `cacheblend` against a hostile file system (issue 17): symlinks planted in an ingested folder
// are not followed (`--follow-symlinks` follows only those that stay inside), a FIFO given as
// --model is refused without hanging, a data dir others can write is refused with the fix, and a
// folder at DATA/vectors.faiss leaves search working while ingest names the path. Each command
// runs under `timeout`, so a hang is a failure, not a stuck suite.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
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

class CliFsSafety : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-fs-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        docs_ = dir_ + "/docs";
        data_ = dir_ + "/data";
        ASSERT_EQ(::mkdir(docs_.c_str(), 0700), 0);
        write_file(docs_ + "/apples.txt", "Apples grow on trees in the orchard.\n");
        // Outside the folder: what a planted link would pull in.
        write_file(dir_ + "/secret.txt", "The vault combination is zebra-9021.\n");
    }
    void TearDown() override {
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    // The CLI with --model (unless given), under a 120 s timeout: exit 124 means it hung.
    run_result run(std::vector<std::string> args, bool with_model = true) const {
        if (with_model) args.insert(args.begin() + 1, {"--model", model_});
        args.insert(args.begin(), {"timeout", "120", cli_path()});
        return cbltest::run_program(args, dir_ + "/stderr");
    }

    json ingest(std::vector<std::string> extra) const {
        std::vector<std::string> args = {"ingest", "--data", data_, "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const run_result r = run(args);
        EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
        return r.exit_code == 0 ? json::parse(r.out) : json();
    }

    // reason by file name, from an ingest --json report
    static std::map<std::string, std::string> skipped(const json& j) {
        std::map<std::string, std::string> out;
        for (const json& s : j["skipped"].arr) {
            const std::string& p = s["path"].str;
            out[p.substr(p.find_last_of('/') + 1)] = s["reason"].str;
        }
        return out;
    }

    // chunk texts `search --mode bm25` returns for q
    std::vector<std::string> bm25(const std::string& q) const {
        const run_result r = run({"search", "--data", data_, "--mode", "bm25", "--json", q});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        std::vector<std::string> out;
        if (r.exit_code != 0) return out;
        const json j = json::parse(r.out);
        for (const json& h : j["hits"].arr) out.push_back(h["text"].str);
        return out;
    }

    std::string model_, dir_, docs_, data_;
};

}  // namespace

TEST_F(CliFsSafety, SymlinkOutOfTheFolderIsNotFollowed) {
    ASSERT_EQ(::symlink((dir_ + "/secret.txt").c_str(), (docs_ + "/x.txt").c_str()), 0);
    const json j = ingest({docs_});
    EXPECT_EQ(j["added"].num, 1);
    EXPECT_EQ(skipped(j)["x.txt"], "symbolic link (not followed)");
    EXPECT_TRUE(bm25("zebra").empty());

    // --follow-symlinks: still not out of the folder, but an inside link is followed (once).
    ASSERT_EQ(::mkdir((docs_ + "/sub").c_str(), 0700), 0);
    write_file(docs_ + "/sub/pears.txt", "Pears ripen after they are picked.\n");
    ASSERT_EQ(::symlink("sub/pears.txt", (docs_ + "/alias.txt").c_str()), 0);
    const json f = ingest({"--follow-symlinks", docs_});
    EXPECT_NE(skipped(f)["x.txt"].find("outside"), std::string::npos) << skipped(f)["x.txt"];
    EXPECT_EQ(skipped(f).count("alias.txt"), 0u);
    EXPECT_EQ(f["added"].num, 1);
    EXPECT_EQ(f["documents"].num, 2);
    EXPECT_EQ(bm25("pears").size(), 1u);
    EXPECT_TRUE(bm25("zebra").empty());
}

TEST_F(CliFsSafety, FifoAsModelIsRefusedWithoutHanging) {
    const std::string fifo = dir_ + "/model.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const run_result r = run({"ingest", "--model", fifo, "--data", data_, docs_}, false);
    EXPECT_NE(r.exit_code, 124) << "hung on the FIFO";
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(fifo), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

TEST_F(CliFsSafety, DataDirOthersCanWriteIsRefused) {
    ASSERT_EQ(::mkdir(data_.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(data_.c_str(), 0777), 0);
    const run_result r = run({"ingest", "--data", data_, docs_});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(data_), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("chmod go-w"), std::string::npos) << r.err;
    struct stat st {};
    ASSERT_EQ(::stat(data_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0777u);  // refused, not silently changed
}

TEST_F(CliFsSafety, FolderAtTheIndexPathLeavesSearchWorking) {
    ingest({docs_});
    const std::string index = data_ + "/vectors.faiss";
    ASSERT_EQ(::unlink(index.c_str()), 0);
    ASSERT_EQ(::mkdir(index.c_str(), 0700), 0);
    for (const char* mode : {"bm25", "hybrid", "dense"}) {
        const run_result s = run({"search", "--data", data_, "--mode", mode, "apples"});
        EXPECT_EQ(s.exit_code, 0) << mode << ": " << s.err;
        EXPECT_NE(s.out.find("apples.txt"), std::string::npos) << mode << ": " << s.out;
    }
    write_file(docs_ + "/pears.txt", "Pears ripen after they are picked.\n");
    const run_result r = run({"ingest", "--data", data_, docs_});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(index + " is a directory"), std::string::npos) << r.err;
}
