// The formats people have, through the CLI (issue 13, item 1, "Must show"): a folder with a
// 2-page PDF, a DOCX, an ODT, an ISO-8859-1 HTML file, an extensionless README and a binary.
// `ingest` reads the first five and skips the binary with its reason; `search --json` for a
// phrase of page 2 returns the PDF with "page": 2 first; DOCX/ODT/HTML hits carry "heading";
// `ask --json` cites page 2 first. Hits without a page or heading have no such key.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/cli-runner.h"
#include "util/doc-writers.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using cbltest::cli_path;
using cbltest::json;
using cbltest::para;
using cbltest::shell_quote;
using cbltest::write_file;
using run_result = cbltest::cli_result;

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

class CliFormats : public ::testing::Test {
protected:
    void SetUp() override {
#if !(CBL_HAVE_POPPLER && CBL_HAVE_LIBZIP)
        GTEST_SKIP() << "built without poppler or libzip";
#endif
        if (!cbltest::file_exists(cli_path())) GTEST_SKIP() << "CLI not built: " << cli_path();
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-cli-formats-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        docs_ = dir_ + "/docs";
        ASSERT_EQ(std::system(("mkdir -p " + shell_quote(docs_)).c_str()), 0);
        write_file(docs_ + "/report.pdf",
                   cbltest::make_pdf(
                       {{"Quarterly report for the orchard.", "Apples grew well."},
                        {"The pear harvest doubled in autumn.", "Plums stayed the same."}}));
        write_file(docs_ + "/handbook.docx", cbltest::make_docx({{"Fruit handbook", 1},
                                                                 {"Quinces are pome fruit."},
                                                                 {"Storage", 2},
                                                                 {"Keep medlars cool and dry."}}));
        write_file(docs_ + "/garden.odt",
                   cbltest::make_odt({{"Garden notes", 1}, {"Tomatoes need full sun."}}));
        write_file(docs_ + "/recipe.html",
                   "<html><head><meta charset=\"iso-8859-1\"></head><body><h1>Dessert</h1>"
                   "<p>Cr\xE8me br\xFBl\xE9"
                   "e needs caramelised sugar &mdash; &euro;2.</p>"
                   "</body></html>");
        write_file(docs_ + "/README", "This folder documents the vineyard irrigation schedule.\n");
        std::string blob(4096, '\0');
        for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 7919 + 13) % 256);
        write_file(docs_ + "/blob.bin", blob);
        data_ = dir_ + "/data";
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
    json search(const std::string& q) const {
        const run_result r =
            run({"search", "--data", data_, "--mode", "bm25", "--k", "3", "--json", q});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return json::parse(r.out);
    }

    std::string model_, dir_, docs_, data_;
};

TEST_F(CliFormats, FiveFormatsReadBinarySkippedPageTwoCitedFirst) {
    const run_result ing = run({"ingest", "--data", data_, docs_, "--json"});
    ASSERT_EQ(ing.exit_code, 0) << ing.err << ing.out;
    const json rep = json::parse(ing.out);
    EXPECT_EQ(rep["added"].num, 5);
    ASSERT_EQ(rep["skipped"].arr.size(), 1u) << ing.out;
    EXPECT_TRUE(ends_with(rep["skipped"][0]["path"].str, "/blob.bin"));
    EXPECT_EQ(rep["skipped"][0]["reason"].str, "binary file (application/octet-stream)");

    const json pdf = search("pear harvest doubled");
    ASSERT_FALSE(pdf["hits"].arr.empty());
    EXPECT_TRUE(ends_with(pdf["hits"][0]["uri"].str, "/report.pdf")) << pdf["hits"][0]["uri"].str;
    EXPECT_EQ(pdf["hits"][0]["page"].num, 2);
    EXPECT_FALSE(pdf["hits"][0].has("heading"));

    const json docx = search("medlars");
    ASSERT_FALSE(docx["hits"].arr.empty());
    // The small DOCX is one chunk: it starts under its first heading.
    EXPECT_EQ(docx["hits"][0]["heading"].str, "Fruit handbook");
    EXPECT_FALSE(docx["hits"][0].has("page"));
    EXPECT_EQ(search("tomatoes")["hits"][0]["heading"].str, "Garden notes");
    const json html = search(
        "br\xC3\xBBl\xC3\xA9"
        "e");
    ASSERT_FALSE(html["hits"].arr.empty());
    EXPECT_TRUE(ends_with(html["hits"][0]["uri"].str, "/recipe.html"));
    EXPECT_EQ(html["hits"][0]["heading"].str, "Dessert");
    const json readme = search("vineyard irrigation");
    ASSERT_FALSE(readme["hits"].arr.empty());
    EXPECT_TRUE(ends_with(readme["hits"][0]["uri"].str, "/README"));

    const run_result ask = run({"ask", "--data", data_, "--k", "2", "--max-tokens", "4", "--json",
                                "When did the pear harvest double?"});
    ASSERT_EQ(ask.exit_code, 0) << ask.err;
    const json a = json::parse(ask.out);
    ASSERT_FALSE(a["citations"].arr.empty()) << ask.out;
    EXPECT_TRUE(ends_with(a["citations"][0]["uri"].str, "/report.pdf")) << ask.out;
    EXPECT_EQ(a["citations"][0]["page"].num, 2) << ask.out;
    EXPECT_FALSE(a["citations"][0].has("heading")) << ask.out;
}

}  // namespace
