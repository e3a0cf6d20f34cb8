// Ingesting the formats people have (issue 13, item 1), model-free: a folder with a 2-page PDF, a
// DOCX, an ODT, an ISO-8859-1 HTML file, an extensionless README and a binary is read (all but the
// binary, skipped with its reason) and BM25 finds a phrase of page 2 with page 2 as its citation;
// headings reach the hits. Damaged and hostile files end in a skip with a reason: corrupt and
// encrypted PDFs, a zip-bomb DOCX, a 100 MB file, files that vanish or shrink while read, and a
// read error. A catalog written before the page/heading columns existed opens and gains them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <map>
#include <string>

#include "core/util/error.h"
#include "core/util/file-io.h"
#include "retrieval/catalog.h"
#include "retrieval/corpus.h"
#include "util/doc-writers.h"
#include "util/faulty-io.h"
#include "util/hash-embedder.h"
#include "util/test-util.h"

using namespace cacheblend;
using cbltest::para;

namespace {

void write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

struct fixture {
    std::string root = cbltest::make_temp_dir("cbl-fmt");
    std::string docs = root + "/docs";
    std::string data = root + "/data";
    std::shared_ptr<file_io> io;

    fixture() { ::mkdir(docs.c_str(), 0700); }
    std::unique_ptr<corpus> open() {
        corpus_params p;
        p.encode = [](std::string_view s) { return cbltest::word_tokens(s); };
        p.tokenizer_id = "words";
        p.emb = std::make_shared<cbltest::hash_embedder>(32);
        p.io = io;
        return corpus::open(data, std::move(p));
    }
};

std::map<std::string, std::string> skip_reasons(const ingest_report& r) {
    std::map<std::string, std::string> why;
    for (const auto& [path, reason] : r.skipped_files) {
        why[path.substr(path.find_last_of('/') + 1)] = reason;
    }
    return why;
}

search_result bm25(corpus& c, const std::string& q) {
    search_params sp;
    sp.mode = search_mode::bm25;
    sp.k = 3;
    return c.search(q, sp);
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string random_bytes(size_t n) {
    std::string s(n, '\0');
    uint32_t x = 12345;
    for (char& c : s) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>(x >> 24);
    }
    return s;
}

// Forwards to `base`, but empties `shrink_path` between the fstat and the read of it.
class racing_io final : public file_io {
public:
    explicit racing_io(std::shared_ptr<file_io> base) : base_(std::move(base)) {}
    std::string shrink_path;

    int open(const std::string& path, int flags, uint32_t mode, int* out_fd) override {
        const int err = base_->open(path, flags, mode, out_fd);
        if (!err && path == shrink_path) shrink_fd_ = *out_fd;
        return err;
    }
    int pread(int fd, void* buf, size_t n, uint64_t off, size_t* out_n) override {
        if (fd == shrink_fd_) {
            EXPECT_EQ(::truncate(shrink_path.c_str(), 0), 0);
            shrink_fd_ = -1;
        }
        return base_->pread(fd, buf, n, off, out_n);
    }
    int close(int fd) override { return base_->close(fd); }
    int pwrite(int fd, const void* b, size_t n, uint64_t off) override {
        return base_->pwrite(fd, b, n, off);
    }
    int fsync(int fd) override { return base_->fsync(fd); }
    int fdatasync(int fd) override { return base_->fdatasync(fd); }
    int fstat(int fd, file_stat* out) override { return base_->fstat(fd, out); }
    int rename(const std::string& a, const std::string& b) override { return base_->rename(a, b); }
    int unlink(const std::string& p) override { return base_->unlink(p); }
    int mkdir(const std::string& p, uint32_t m) override { return base_->mkdir(p, m); }
    int fsync_dir(const std::string& p) override { return base_->fsync_dir(p); }
    int stat(const std::string& p, file_stat* o) override { return base_->stat(p, o); }
    int lstat(const std::string& p, file_stat* o) override { return base_->lstat(p, o); }
    int list_dir(const std::string& p, std::vector<std::string>* n) override {
        return base_->list_dir(p, n);
    }

private:
    std::shared_ptr<file_io> base_;
    int shrink_fd_ = -1;
};

}  // namespace

#if CBL_HAVE_POPPLER && CBL_HAVE_LIBZIP

TEST(IngestFormats, FolderOfEveryFormatWithPageAndHeadingCitations) {
    fixture f;
    write(f.docs + "/report.pdf",
          cbltest::make_pdf({{"Quarterly report for the orchard.", "Apples grew well this year."},
                             {"The pear harvest doubled in autumn.", "Plums stayed the same."}}));
    write(f.docs + "/handbook.docx", cbltest::make_docx({{"Fruit handbook", 1},
                                                         {"Quinces are pome fruit."},
                                                         {"Storage", 2},
                                                         {"Keep medlars cool and dry."}}));
    write(f.docs + "/garden.odt",
          cbltest::make_odt({{"Garden notes", 1}, {"Tomatoes need full sun."}}));
    write(f.docs + "/recipe.html",
          "<html><head><meta charset=\"iso-8859-1\"><title>Dessert</title></head><body>"
          "<h1>Cr\xE8me br\xFBl\xE9"
          "e</h1><p>Caramelise the sugar &mdash; about &euro;2 of it."
          "</p></body></html>");
    write(f.docs + "/README", "This repository documents the vineyard irrigation schedule.\n");
    write(f.docs + "/blob.bin", random_bytes(8192));
    auto c = f.open();
    const ingest_report r = c->ingest_paths({f.docs}, ingest_params());
    const auto why = skip_reasons(r);
    EXPECT_EQ(r.added, 5) << (r.skipped_files.empty() ? "" : r.skipped_files[0].second);
    ASSERT_EQ(why.size(), 1u);
    EXPECT_EQ(why.at("blob.bin"), "binary file (application/octet-stream)");

    // A phrase from page 2 of the PDF: that PDF, page 2, first.
    const search_result pdf = bm25(*c, "pear harvest doubled");
    ASSERT_FALSE(pdf.hits.empty());
    EXPECT_TRUE(ends_with(pdf.hits[0].uri, "/report.pdf")) << pdf.hits[0].uri;
    EXPECT_EQ(pdf.hits[0].page, 2);
    EXPECT_EQ(pdf.hits[0].text, "The pear harvest doubled in autumn. Plums stayed the same.");
    const search_result p1 = bm25(*c, "apples orchard");
    ASSERT_FALSE(p1.hits.empty());
    EXPECT_EQ(p1.hits[0].page, 1);

    const search_result docx = bm25(*c, "medlars");
    ASSERT_FALSE(docx.hits.empty());
    EXPECT_TRUE(ends_with(docx.hits[0].uri, "/handbook.docx"));
    EXPECT_EQ(docx.hits[0].page, 0);
    const search_result odt = bm25(*c, "tomatoes");
    ASSERT_FALSE(odt.hits.empty());
    EXPECT_TRUE(ends_with(odt.hits[0].uri, "/garden.odt"));
    EXPECT_EQ(odt.hits[0].heading, "Garden notes");

    // ISO-8859-1 bytes were converted: the UTF-8 query finds them, entities are decoded.
    const search_result html = bm25(*c,
                                    "br\xC3\xBBl\xC3\xA9"
                                    "e");
    ASSERT_FALSE(html.hits.empty());
    EXPECT_TRUE(ends_with(html.hits[0].uri, "/recipe.html"));
    EXPECT_NE(html.hits[0].text.find("\xE2\x80\x94 about \xE2\x82\xAC"
                                     "2"),
              std::string::npos)
        << html.hits[0].text;
    const search_result readme = bm25(*c, "vineyard irrigation");
    ASSERT_FALSE(readme.hits.empty());
    EXPECT_TRUE(ends_with(readme.hits[0].uri, "/README"));

    // The catalog records each document's kind.
    std::map<std::string, std::string> kinds;
    for (const document_info& d : c->cat().list_documents(search_filter{})) {
        kinds[d.uri.substr(d.uri.find_last_of('/') + 1)] = d.kind;
    }
    EXPECT_EQ(kinds["report.pdf"], "pdf");
    EXPECT_EQ(kinds["handbook.docx"], "docx");
    EXPECT_EQ(kinds["garden.odt"], "odt");
    EXPECT_EQ(kinds["recipe.html"], "html");
    EXPECT_EQ(kinds["README"], "text");
}

TEST(IngestFormats, PdfChunksEachHaveOnePage) {
    fixture f;
    std::vector<std::vector<std::string>> pages;
    for (int p = 0; p < 4; ++p) {
        std::vector<std::string> lines;
        for (int l = 0; l < 6; ++l) {
            lines.push_back("Page " + std::to_string(p + 1) + " line " + std::to_string(l) +
                            " mentions topic" + std::to_string(p) + " and more words here.");
        }
        pages.push_back(lines);
    }
    write(f.docs + "/long.pdf", cbltest::make_pdf(pages));
    auto c = f.open();
    ingest_params p;
    p.chunking.max_tokens = 40;  // several chunks per page, and pages would otherwise merge
    ASSERT_EQ(c->ingest_paths({f.docs}, p).added, 1);
    std::vector<int64_t> ids;
    for (const auto& [id, key] : c->cat().chunk_kv_keys()) ids.push_back(id);
    int last_page = 0;
    for (const chunk_info& ch : c->cat().get_chunks(ids)) {
        ASSERT_GE(ch.page, 1);
        EXPECT_GE(ch.page, last_page);
        last_page = ch.page;
        // Every chunk's words name its own page only.
        for (int q = 1; q <= 4; ++q) {
            if (q == ch.page) continue;
            EXPECT_EQ(ch.text.find("Page " + std::to_string(q) + " "), std::string::npos)
                << "page " << ch.page << ": " << ch.text;
        }
    }
    EXPECT_EQ(last_page, 4);
}

TEST(IngestFormats, DamagedAndHostileFilesAreSkippedWithAReason) {
    fixture f;
    write(f.docs + "/good.txt", "A good document about figs.\n");
    write(f.docs + "/corrupt.pdf", "%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage\n");
    write(f.docs + "/locked.pdf", cbltest::make_pdf({{"secret plans"}}, true));
    const std::string bomb_xml = "<w:document xmlns:w=\"w\"><w:body><w:p><w:r><w:t>" +
                                 std::string(8 << 20, 'z') +
                                 "</w:t></w:r></w:p></w:body></w:document>";
    write(f.docs + "/bomb.docx", cbltest::make_zip({{"word/document.xml", bomb_xml}}));
    write(f.docs + "/fake.docx", "not a zip at all");
    {
        // 100 MB, sparse: the size check refuses it before a byte is read.
        const int fd = ::open((f.docs + "/huge.log").c_str(), O_CREAT | O_WRONLY, 0600);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::ftruncate(fd, 100ll << 20), 0);
        ::close(fd);
    }
    auto c = f.open();
    ingest_params p;
    p.max_document_bytes = 1 << 20;
    const ingest_report r = c->ingest_paths({f.docs}, p);
    const auto why = skip_reasons(r);
    EXPECT_EQ(r.added, 1);
    EXPECT_NE(why.at("corrupt.pdf").find("PDF"), std::string::npos) << why.at("corrupt.pdf");
    EXPECT_EQ(why.at("locked.pdf"), "encrypted PDF (a password is needed to read it)");
    EXPECT_NE(why.at("bomb.docx").find("inflates past 1048576 bytes"), std::string::npos)
        << why.at("bomb.docx");
    EXPECT_NE(why.at("fake.docx").find("damaged docx: not a zip archive"), std::string::npos)
        << why.at("fake.docx");
    EXPECT_EQ(why.at("huge.log"), "too large: 104857600 bytes (limit 1048576)");
    EXPECT_EQ(bm25(*c, "figs").hits.size(), 1u);
}

#endif

// A file the walk found but that is gone when its turn comes, one that shrinks while it is
// read, and one whose read fails: each is skipped with its reason and the run goes on.
TEST(IngestFormats, FilesThatVanishOrShrinkWhileReadAreSkipped) {
    fixture f;
    write(f.docs + "/a-gone.txt", "This file will be deleted before it is read.\n");
    write(f.docs + "/b-shrinks.txt", "This file is cut to nothing halfway through the read.\n");
    write(f.docs + "/c-eio.txt", "This file's read fails with an I/O error.\n");
    write(f.docs + "/d-good.txt", "A good document about dates.\n");

    // Truncates b-shrinks.txt between fstat and pread (what a writer racing the ingest does);
    // faulty_io fails the second read (c-eio.txt: files are read in name order).
    auto faulty = std::make_shared<cbltest::faulty_io>();
    faulty->fail_nth(cbltest::io_op::read, 1, EIO);
    auto io = std::make_shared<racing_io>(faulty);
    char real[PATH_MAX];
    ASSERT_NE(::realpath(f.docs.c_str(), real), nullptr);
    io->shrink_path = std::string(real) + "/b-shrinks.txt";
    f.io = io;
    auto c = f.open();
    ingest_params p;
    const std::string gone = std::string(real) + "/a-gone.txt";
    p.progress = [&](const ingest_progress& pr) {
        if (std::string(pr.phase) == "ingest" && pr.current == gone) ::unlink(gone.c_str());
        return true;
    };
    const ingest_report r = c->ingest_paths({f.docs}, p);
    const auto why = skip_reasons(r);
    EXPECT_EQ(why.at("a-gone.txt"), "cannot open: ENOENT");
    EXPECT_EQ(why.at("b-shrinks.txt"), "changed while being read (0 of 54 bytes read)");
    EXPECT_EQ(why.at("c-eio.txt"), "read failed: EIO");
    EXPECT_EQ(r.added, 1);
    EXPECT_EQ(bm25(*c, "dates").hits.size(), 1u);
}

// A catalog made before chunks had page and heading columns opens, gains them, keeps its rows.
TEST(IngestFormats, OldCatalogGainsCitationColumns) {
    const std::string dir = cbltest::make_temp_dir("cbl-fmt-cat");
    const std::string path = dir + "/catalog.db";
    {
        auto cat = catalog::open(path);
        document_info d;
        d.uri = "mem://old";
        d.content_hash = "00";
        new_chunk ch;
        ch.text = "an old chunk about walnuts";
        ch.end = 26;
        cat->replace_document(d, {ch});
    }
    {
        // Back to the schema an older library wrote: no page, no heading.
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db,
                               "ALTER TABLE chunks DROP COLUMN page; "
                               "ALTER TABLE chunks DROP COLUMN heading;",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK)
            << sqlite3_errmsg(db);
        sqlite3_close(db);
    }
    auto cat = catalog::open(path);
    std::vector<int64_t> ids;
    for (const auto& [id, key] : cat->chunk_kv_keys()) ids.push_back(id);
    ASSERT_EQ(ids.size(), 1u);
    const std::vector<chunk_info> old = cat->get_chunks(ids);
    ASSERT_EQ(old.size(), 1u);
    EXPECT_EQ(old[0].text, "an old chunk about walnuts");
    EXPECT_EQ(old[0].page, 0);
    EXPECT_EQ(old[0].heading, "");
    document_info d;
    d.uri = "mem://new";
    d.content_hash = "01";
    new_chunk ch;
    ch.text = "a new chunk about hazelnuts";
    ch.page = 3;
    ch.heading = "Nuts";
    const replace_result res = cat->replace_document(d, {ch});
    const std::vector<chunk_info> fresh = cat->get_chunks(res.added);
    ASSERT_EQ(fresh.size(), 1u);
    EXPECT_EQ(fresh[0].page, 3);
    EXPECT_EQ(fresh[0].heading, "Nuts");
}
