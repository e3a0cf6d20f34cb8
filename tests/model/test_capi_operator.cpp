// The C ABI behind the operator commands (issue 13, item 2): cbl_runtime_ingest_path refuses a
// path that cannot be accessed (CBL_IO naming it, not CBL_OK with skipped = 1), must_exist opens
// only an existing data directory and creates nothing, cbl_runtime_documents lists the documents
// (filters, borrowed strings, CBL_RANGE, sized output struct), cbl_runtime_stats reports the sizes
// appended to cbl_corpus_stats, and cbl_runtime_delete of an unknown uri says so in out_found.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "util/cli-runner.h"
#include "util/test-util.h"

namespace {

using cbltest::shell_quote;
using cbltest::write_file;

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

class CapiOperator : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-capi-operator-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        data_ = dir_ + "/data";
        ASSERT_EQ(open(data_, false, &rt_), CBL_OK) << cbl_last_error();
        const char* docs[][3] = {
            {"mem://b-river", "The Amazon river flows through Brazil.", "facts"},
            {"mem://a-volcano", "Mount Kilimanjaro is a dormant volcano in Tanzania.", "facts"},
            {"notes://c-bread", "Sourdough bread is leavened by wild yeast.", "recipes"},
        };
        for (const auto& doc : docs) {
            cbl_ingest_params ip;
            cbl_ingest_params_init(&ip);
            ip.collection = doc[2];
            ip.format = CBL_DOC_MARKDOWN;
            ip.metadata_json = "{\"lang\":\"en\"}";
            ASSERT_EQ(cbl_runtime_ingest_text(rt_, doc[0], doc[1], std::strlen(doc[1]), &ip,
                                              nullptr),
                      CBL_OK)
                << cbl_last_error();
        }
    }
    void TearDown() override {
        cbl_runtime_free(rt_);
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    cbl_status open(const std::string& data, bool must_exist, cbl_runtime** out) const {
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = model_.c_str();
        p.data_dir = data.c_str();
        p.n_threads = 2;
        p.no_embedder = true;
        p.must_exist = must_exist;
        return cbl_runtime_open(&p, out);
    }

    // The uris cbl_runtime_documents lists with this filter (NULL: every document), in order.
    std::vector<std::string> uris(const cbl_search_params* filter) const {
        cbl_documents* docs = nullptr;
        EXPECT_EQ(cbl_runtime_documents(rt_, filter, &docs), CBL_OK) << cbl_last_error();
        std::vector<std::string> out;
        for (size_t i = 0; i < cbl_documents_count(docs); ++i) {
            cbl_document_info d;
            cbl_document_info_init(&d);
            EXPECT_EQ(cbl_documents_get(docs, i, &d), CBL_OK) << cbl_last_error();
            out.emplace_back(d.uri);
        }
        cbl_documents_free(docs);
        return out;
    }

    std::string model_, dir_, data_;
    cbl_runtime* rt_ = nullptr;
};

TEST_F(CapiOperator, IngestPathOfAPathThatCannotBeAccessedIsAnIoError) {
    const std::string missing = dir_ + "/no-such-folder";
    cbl_ingest_report r;
    cbl_ingest_report_init(&r);
    EXPECT_EQ(cbl_runtime_ingest_path(rt_, missing.c_str(), nullptr, &r) & 0xff, CBL_IO);
    const std::string msg = cbl_last_error();
    EXPECT_NE(msg.find("cbl_runtime_ingest_path: cannot access " + missing), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("ENOENT"), std::string::npos) << msg;
    EXPECT_EQ(r.skipped, 0);
    EXPECT_EQ(uris(nullptr).size(), 3u);

    // A folder path still skips what it cannot read inside it, with CBL_OK.
    const std::string docs = dir_ + "/docs";
    ASSERT_EQ(::mkdir(docs.c_str(), 0700), 0);
    write_file(docs + "/good.txt", "Lighthouses guide ships at night.\n");
    write_file(docs + "/bad.txt", std::string("invalid \x81\x9d utf-8\n"));
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), nullptr, &r), CBL_OK) << cbl_last_error();
    EXPECT_EQ(r.added, 1);
    EXPECT_EQ(r.skipped, 1);
}

TEST_F(CapiOperator, MustExistOpensOnlyAnExistingDataDirAndCreatesNothing) {
    const std::string typo = dir_ + "/dtaa";
    cbl_runtime* r = reinterpret_cast<cbl_runtime*>(1);
    EXPECT_EQ(open(typo, true, &r) & 0xff, CBL_IO);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::strstr(cbl_last_error(), ("no data directory at " + typo).c_str()), nullptr)
        << cbl_last_error();
    EXPECT_FALSE(exists(typo));
    // A folder without a catalog is no data directory either, and nothing is added to it.
    const std::string empty = dir_ + "/empty";
    ASSERT_EQ(::mkdir(empty.c_str(), 0700), 0);
    EXPECT_EQ(open(empty, true, &r) & 0xff, CBL_IO);
    EXPECT_FALSE(exists(empty + "/catalog.db"));
    EXPECT_FALSE(exists(empty + "/kv"));
    // The existing one opens and sees the documents.
    ASSERT_EQ(open(data_, true, &r), CBL_OK) << cbl_last_error();
    cbl_corpus_stats st;
    cbl_corpus_stats_init(&st);
    ASSERT_EQ(cbl_runtime_stats(r, &st), CBL_OK);
    EXPECT_EQ(st.documents, 3);
    cbl_runtime_free(r);
    // A caller built before must_exist (a shorter struct) still creates the directory.
    cbl_runtime_params p;
    cbl_runtime_params_init(&p);
    p.model_path = model_.c_str();
    const std::string fresh = dir_ + "/fresh";
    p.data_dir = fresh.c_str();
    p.no_embedder = true;
    p.must_exist = true;  // beyond the old struct: must not be read
    p.struct_size = offsetof(cbl_runtime_params, must_exist);
    ASSERT_EQ(cbl_runtime_open(&p, &r), CBL_OK) << cbl_last_error();
    EXPECT_TRUE(exists(fresh + "/catalog.db"));
    cbl_runtime_free(r);
}

TEST_F(CapiOperator, DocumentsListsEveryDocumentByUriWithFilters) {
    EXPECT_EQ(uris(nullptr),
              (std::vector<std::string>{"mem://a-volcano", "mem://b-river", "notes://c-bread"}));
    cbl_search_params f;
    cbl_search_params_init(&f);
    f.collection = "facts";
    EXPECT_EQ(uris(&f), (std::vector<std::string>{"mem://a-volcano", "mem://b-river"}));
    f.collection = "other";
    EXPECT_TRUE(uris(&f).empty());
    cbl_search_params_init(&f);
    f.uri_prefix = "notes://";
    EXPECT_EQ(uris(&f), std::vector<std::string>{"notes://c-bread"});
    cbl_search_params_init(&f);
    const char* keys[] = {"lang"};
    const char* values[] = {"fr"};
    f.metadata_keys = keys;
    f.metadata_values = values;
    f.n_metadata = 1;
    EXPECT_TRUE(uris(&f).empty());
    values[0] = "en";
    EXPECT_EQ(uris(&f).size(), 3u);

    cbl_documents* docs = nullptr;
    ASSERT_EQ(cbl_runtime_documents(rt_, nullptr, &docs), CBL_OK);
    ASSERT_EQ(cbl_documents_count(docs), 3u);
    cbl_document_info d;
    cbl_document_info_init(&d);
    ASSERT_EQ(cbl_documents_get(docs, 1, &d), CBL_OK);
    EXPECT_STREQ(d.uri, "mem://b-river");
    EXPECT_STREQ(d.collection, "facts");
    EXPECT_STREQ(d.kind, "");  // ingest_text keeps the caller's metadata: no "kind" in it
    EXPECT_NE(std::strstr(d.metadata_json, "\"lang\""), nullptr) << d.metadata_json;
    EXPECT_EQ(d.n_chunks, 1);
    EXPECT_EQ(d.n_kv_chunks, 0);  // not precomputed, never used by a request
    EXPECT_EQ(d.source_bytes, static_cast<int64_t>(std::strlen("The Amazon river flows through Brazil.")));
    EXPECT_EQ(d.mtime_ns, 0);  // from memory, not a file

    EXPECT_EQ(cbl_documents_get(docs, 3, &d), CBL_RANGE);
    EXPECT_NE(std::strstr(cbl_last_error(), "cbl_documents_get: index 3 of 3"), nullptr)
        << cbl_last_error();
    // An older caller's output struct gets only the fields it has.
    cbl_document_info small;
    std::memset(&small, 0xab, sizeof(small));
    small.struct_size = offsetof(cbl_document_info, n_kv_chunks);
    ASSERT_EQ(cbl_documents_get(docs, 0, &small), CBL_OK);
    EXPECT_STREQ(small.uri, "mem://a-volcano");
    EXPECT_EQ(small.n_chunks, 1);
    int64_t untouched;
    std::memset(&untouched, 0xab, sizeof(untouched));
    EXPECT_EQ(small.n_kv_chunks, untouched);
    cbl_document_info unset{};
    EXPECT_EQ(cbl_documents_get(docs, 0, &unset), CBL_INVALID_ARG);
    cbl_documents_free(docs);

    // NULL arguments are errors, never crashes.
    cbl_documents* out = reinterpret_cast<cbl_documents*>(1);
    EXPECT_EQ(cbl_runtime_documents(nullptr, nullptr, &out), CBL_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(cbl_runtime_documents(rt_, nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_documents_get(nullptr, 0, &d), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_documents_count(nullptr), 0u);
    cbl_documents_free(nullptr);
}

// Each document's KV bytes (its chunks' stored files, as the store's index sizes them) and when
// it was last (re)ingested (issue 13, item 2): appended to cbl_document_info.
TEST_F(CapiOperator, DocumentsReportKvBytesAndIngestTime) {
    const int64_t before = static_cast<int64_t>(std::time(nullptr));
    // b-river again, changed, with precompute_kv: a re-ingest that also computes every missing
    // chunk KV (the other two documents' too).
    const char* text = "The Amazon river flows through Brazil, Peru and Colombia.";
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.collection = "facts";
    ip.format = CBL_DOC_MARKDOWN;
    ip.precompute_kv = true;
    ASSERT_EQ(cbl_runtime_ingest_text(rt_, "mem://b-river", text, std::strlen(text), &ip, nullptr),
              CBL_OK)
        << cbl_last_error();
    // And one document whose KV is not computed.
    const char* later = "Basalt is a volcanic rock.";
    ip.precompute_kv = false;
    ASSERT_EQ(cbl_runtime_ingest_text(rt_, "mem://d-rock", later, std::strlen(later), &ip, nullptr),
              CBL_OK)
        << cbl_last_error();
    const int64_t after = static_cast<int64_t>(std::time(nullptr));

    cbl_documents* docs = nullptr;
    ASSERT_EQ(cbl_runtime_documents(rt_, nullptr, &docs), CBL_OK);
    ASSERT_EQ(cbl_documents_count(docs), 4u);
    std::vector<cbl_document_info> d(4);
    for (size_t i = 0; i < d.size(); ++i) {
        cbl_document_info_init(&d[i]);
        ASSERT_EQ(cbl_documents_get(docs, i, &d[i]), CBL_OK);
    }
    const cbl_document_info& volcano = d[0];
    const cbl_document_info& river = d[1];
    const cbl_document_info& rock = d[2];
    ASSERT_STREQ(river.uri, "mem://b-river");
    ASSERT_STREQ(rock.uri, "mem://d-rock");
    EXPECT_EQ(river.n_kv_chunks, 1);
    EXPECT_GT(river.kv_bytes, 0);
    EXPECT_EQ(rock.n_kv_chunks, 0);
    EXPECT_EQ(rock.kv_bytes, 0);  // nothing stored for it
    EXPECT_GE(river.ingested_at, before);
    EXPECT_LE(river.ingested_at, after);
    EXPECT_GT(volcano.ingested_at, 0);
    EXPECT_LE(volcano.ingested_at, river.ingested_at);  // not re-ingested

    // The documents' KV bytes add up to the store's (no chunk is shared here).
    cbl_corpus_stats st;
    cbl_corpus_stats_init(&st);
    ASSERT_EQ(cbl_runtime_stats(rt_, &st), CBL_OK);
    int64_t sum = 0;
    for (const cbl_document_info& x : d) sum += x.kv_bytes;
    EXPECT_GT(st.kv_bytes, 0u);
    EXPECT_EQ(static_cast<uint64_t>(sum), st.kv_bytes);

    // A caller built before the two fields gets neither.
    cbl_document_info old;
    std::memset(&old, 0xab, sizeof(old));
    old.struct_size = offsetof(cbl_document_info, ingested_at);
    ASSERT_EQ(cbl_documents_get(docs, 1, &old), CBL_OK);
    EXPECT_EQ(old.mtime_ns, 0);
    int64_t untouched;
    std::memset(&untouched, 0xab, sizeof(untouched));
    EXPECT_EQ(old.ingested_at, untouched);
    EXPECT_EQ(old.kv_bytes, untouched);
    cbl_documents_free(docs);
}

TEST_F(CapiOperator, StatsReportSizesAndTheBudget) {
    cbl_corpus_stats st;
    cbl_corpus_stats_init(&st);
    ASSERT_EQ(cbl_runtime_stats(rt_, &st), CBL_OK) << cbl_last_error();
    EXPECT_EQ(st.documents, 3);
    EXPECT_EQ(st.chunks, 3);
    EXPECT_EQ(st.vectors, 0);  // no embedder
    EXPECT_GT(st.catalog_bytes, 0u);
    EXPECT_EQ(st.kv_budget_bytes, uint64_t(8) << 30);
    EXPECT_GT(st.disk_free_bytes, 0u);
    // An older caller's struct (before the sizes) gets the counts only.
    cbl_corpus_stats old;
    std::memset(&old, 0xab, sizeof(old));
    old.struct_size = offsetof(cbl_corpus_stats, vectors);
    ASSERT_EQ(cbl_runtime_stats(rt_, &old), CBL_OK);
    EXPECT_EQ(old.documents, 3);
    int64_t untouched;
    std::memset(&untouched, 0xab, sizeof(untouched));
    EXPECT_EQ(old.vectors, untouched);
}

TEST_F(CapiOperator, DeleteOfAnUnknownUriIsOkWithNotFound) {
    // Kept as it is (the CLI turns it into exit 1): found tells the caller.
    bool found = true;
    ASSERT_EQ(cbl_runtime_delete(rt_, "mem://nope", &found), CBL_OK);
    EXPECT_FALSE(found);
    ASSERT_EQ(cbl_runtime_delete(rt_, "mem://b-river", &found), CBL_OK);
    EXPECT_TRUE(found);
    EXPECT_EQ(uris(nullptr).size(), 2u);
}

}  // namespace
