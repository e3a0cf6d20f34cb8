// `cacheblend ingest --check` and `--repair` (issue 17, case 4): a data dir made with
// --precompute is damaged the ways a disk or another process damages it (a flipped bit in a KV
// file, FTS rows deleted behind the catalog's back, an overwritten page of the chunk table);
// --check exits 1 and names each, --repair fixes what it can, says what it cannot and exits 1
// then, and --check is clean after a successful repair.
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

std::vector<std::string> strings(const json& arr) {
    std::vector<std::string> out;
    for (const json& s : arr.arr) out.push_back(s.str);
    return out;
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
    for (const std::string& l : lines)
        if (l.find(what) != std::string::npos) return true;
    return false;
}

void sql(const std::string& db, const std::string& q) {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(h, q.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(h);
}

class CliCheck : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-check-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        const std::string docs = dir_ + "/docs";
        ASSERT_EQ(std::system(("mkdir -p " + shell_quote(docs)).c_str()), 0);
        write_file(docs + "/a.txt", "The Amazon river flows through Brazil and Peru.\n");
        write_file(docs + "/b.txt", "The Nile river flows north through Egypt.\n");
        write_file(docs + "/c.txt", "Lake Baikal in Siberia is fed by the Selenga river.\n");
        data_ = dir_ + "/data";
        const run_result r = run({"ingest", "--data", data_, docs, "--precompute", "--json"});
        ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
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
    // --check --json: exit code and problems.
    std::vector<std::string> check(int expect_exit) const {
        const run_result r = run({"ingest", "--data", data_, "--check", "--json"});
        EXPECT_EQ(r.exit_code, expect_exit) << r.err << r.out;
        if (r.out.empty()) return {"no output: " + r.err};
        const json j = json::parse(r.out);
        return strings(j["check"]["problems"]);
    }
    std::vector<std::string> kv_files() const {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::recursive_directory_iterator(data_ + "/kv"))
            if (e.path().extension() == ".kv") out.push_back(e.path().string());
        return out;
    }

    std::string model_, dir_, data_;
};

TEST_F(CliCheck, CheckFindsDamageRepairFixesItAndExitCodesSaySo) {
    EXPECT_TRUE(check(0).empty());
    const std::vector<std::string> files = kv_files();
    ASSERT_EQ(files.size(), 3u);
    {  // a bit of the last layer's payload
        std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-5000, std::ios::end);
        const char c = static_cast<char>(f.get() ^ 0x10);
        f.seekp(-5000, std::ios::end);
        f.put(c);
    }
    sql(data_ + "/catalog.db", "DELETE FROM chunks_fts WHERE rowid = (SELECT MIN(id) FROM chunks)");

    const std::vector<std::string> problems = check(1);
    EXPECT_TRUE(mentions(problems, "corrupt")) << problems.size();
    EXPECT_TRUE(mentions(problems, "full-text index")) << problems.size();
    const run_result text = run({"ingest", "--data", data_, "--check"});
    EXPECT_EQ(text.exit_code, 1);
    EXPECT_NE(text.out.find("check: PROBLEMS"), std::string::npos) << text.out;

    // --repair --precompute: the damaged KV file is deleted and computed again.
    const run_result r =
        run({"ingest", "--data", data_, "--repair", "--precompute", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    const json j = json::parse(r.out);
    const std::vector<std::string> repaired = strings(j["repair"]["repaired"]);
    EXPECT_TRUE(mentions(repaired, "full-text index")) << r.out;
    EXPECT_TRUE(mentions(repaired, "damaged KV file")) << r.out;
    EXPECT_TRUE(mentions(repaired, "computed 1 chunk KV")) << r.out;
    EXPECT_TRUE(strings(j["repair"]["not_repaired"]).empty()) << r.out;
    EXPECT_TRUE(check(0).empty());
    EXPECT_EQ(kv_files().size(), 3u);

    const run_result again = run({"ingest", "--data", data_, "--repair"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("repair: nothing to repair"), std::string::npos) << again.out;
}

TEST_F(CliCheck, UnrepairableCatalogExits1WithAdvice) {
    // The chunk table's root page overwritten while no process has the catalog open.
    const std::string db = data_ + "/catalog.db";
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT rootpage FROM sqlite_schema WHERE name = 'chunks'",
                                 -1, &st, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    const long page = static_cast<long>(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    {
        std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp((page - 1) * 4096);
        for (int i = 0; i < 4096; ++i) f.put(static_cast<char>(i * 7));
    }
    EXPECT_TRUE(mentions(check(1), "is damaged"));
    const run_result r = run({"ingest", "--data", data_, "--repair"});
    EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
    EXPECT_NE(r.out.find("not repaired: catalog"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("new data directory"), std::string::npos) << r.out;
    EXPECT_EQ(kv_files().size(), 3u);  // nothing deleted on a damaged catalog's word
}

}  // namespace
