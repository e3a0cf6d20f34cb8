// Catalog: schema, replace/remove, FTS5 BM25 with hostile queries, filters, KV references.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/util/error.h"
#include "retrieval/catalog.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::string temp_dir() { return cbltest::make_temp_dir("cbl-cat"); }

new_chunk chunk(const std::string& text, const std::vector<float>& emb = {}) {
    new_chunk c;
    c.text = text;
    c.end = static_cast<int64_t>(text.size());
    c.tokens = {1, 2, 3};
    c.embedding = emb;
    return c;
}

document_info doc(const std::string& uri, const std::string& coll = "",
                  const std::string& meta = "{}") {
    document_info d;
    d.uri = uri;
    d.content_hash = "h-" + uri;
    d.collection = coll;
    d.metadata = meta;
    return d;
}

}  // namespace

TEST(Catalog, ReplaceRemoveAndSearch) {
    const std::string dir = temp_dir();
    auto cat = catalog::open(dir + "/c.db");
    auto r1 = cat->replace_document(doc("a"), {chunk("the red fox jumps"), chunk("blue whales")});
    auto r2 = cat->replace_document(doc("b", "zoo"), {chunk("a red panda eats bamboo")});
    EXPECT_EQ(r1.added.size(), 2u);
    EXPECT_EQ(cat->count_chunks(), 3);
    auto hits = cat->search_bm25("red", 10);
    ASSERT_EQ(hits.size(), 2u);
    hits = cat->search_bm25("whales", 10);
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].chunk_id, r1.added[1]);
    search_filter f;
    f.collection = "zoo";
    hits = cat->search_bm25("red", 10, f);
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].chunk_id, r2.added[0]);

    // Replacing drops old chunks from FTS too; ids are never reused.
    auto r3 = cat->replace_document(doc("a"), {chunk("green frogs")});
    EXPECT_EQ(r3.removed, r1.added);
    EXPECT_GT(r3.added[0], r2.added[0]);
    EXPECT_TRUE(cat->search_bm25("whales", 10).empty());
    EXPECT_EQ(cat->remove_document("a"), r3.added);
    EXPECT_TRUE(cat->remove_document("a").empty());
    EXPECT_EQ(cat->count_documents(), 1);
    const auto rows = cat->get_chunks(r2.added);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].uri, "b");
    EXPECT_EQ(rows[0].tokens, (std::vector<token_id>{1, 2, 3}));
}

TEST(Catalog, HostileStringsAreData) {
    const std::string dir = temp_dir();
    auto cat = catalog::open(dir + "/c.db");
    const std::string evil = "x'); DROP TABLE chunks; --\"\n\x01 NEAR(a b) title:* ^";
    cat->replace_document(doc(evil, evil, "{\"k\": \"v'\\\"; DROP\"}"), {chunk(evil + " apple")});
    EXPECT_EQ(cat->count_chunks(), 1);
    for (const char* q : {"\"", "'", "NEAR(", "title:x", "*", "a AND", ")(", "-", "^", ""}) {
        EXPECT_NO_THROW(cat->search_bm25(q, 5)) << q;
    }
    EXPECT_EQ(cat->search_bm25(evil, 5).size(), 1u);
    EXPECT_EQ(cat->find_document(evil)->collection, evil);
    search_filter f;
    f.metadata = {{"k", "v'\"; DROP"}};
    EXPECT_EQ(cat->search_bm25("apple", 5, f).size(), 1u);
    f.metadata = {{"k') OR 1=1 --", "x"}};
    EXPECT_THROW(cat->search_bm25("apple", 5, f), error);
    f.metadata.clear();
    f.uri_prefix = "x'); DROP";
    EXPECT_EQ(cat->search_bm25("apple", 5, f).size(), 1u);
    f.uri_prefix = "x%";  // '%' is no wildcard
    EXPECT_TRUE(cat->search_bm25("apple", 5, f).empty());
    EXPECT_THROW(cat->replace_document(doc("m", "", "not json"), {chunk("z")}), error);
    EXPECT_THROW(cat->replace_document(doc("m", "", "[1]"), {chunk("z")}), error);
    EXPECT_FALSE(cat->find_document("m"));  // the failed replace left nothing behind
}

TEST(Catalog, KvReferencesAndPendingDeletes) {
    const std::string dir = temp_dir();
    auto cat = catalog::open(dir + "/c.db");
    auto a = cat->replace_document(doc("a"), {chunk("same"), chunk("only a")});
    auto b = cat->replace_document(doc("b"), {chunk("same")});
    cat->set_kv_key(a.added[0], "k-shared");
    cat->set_kv_key(b.added[0], "k-shared");
    cat->set_kv_key(a.added[1], "k-a");
    EXPECT_EQ(cat->kv_refcount("k-shared"), 2);
    cat->remove_document("a");
    EXPECT_EQ(cat->pending_kv_deletes(), std::vector<std::string>{"k-a"});
    EXPECT_EQ(cat->kv_refcount("k-shared"), 1);
    cat->drop_pending_kv_delete("k-a");
    cat->remove_document("b");
    EXPECT_EQ(cat->pending_kv_deletes(), std::vector<std::string>{"k-shared"});
    EXPECT_EQ(cat->chunk_ids_without_kv(10).size(), 0u);
}

TEST(Catalog, EmbeddingsVersionAndSchema) {
    const std::string dir = temp_dir();
    {
        auto cat = catalog::open(dir + "/c.db");
        const int64_t v0 = cat->vector_version();
        auto r = cat->replace_document(doc("a"), {chunk("x", {1, 0}), chunk("y")});
        EXPECT_GT(cat->vector_version(), v0);
        EXPECT_EQ(cat->chunk_ids_without_embedding(10), std::vector<int64_t>{r.added[1]});
        cat->set_embeddings({r.added[1]}, {0, 1});
        int n = 0;
        cat->for_each_embedding([&](int64_t, const float*, size_t dim) {
            EXPECT_EQ(dim, 2u);
            ++n;
        });
        EXPECT_EQ(n, 2);
        EXPECT_EQ(cat->get_chunks(r.added, true)[1].embedding, (std::vector<float>{0, 1}));
    }
    // A file from a newer schema is refused with status::format.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir + "/c.db").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    try {
        catalog::open(dir + "/c.db");
        FAIL() << "opened a newer schema";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::format);
    }
    // Not a database at all: status::catalog, not a crash.
    FILE* f = std::fopen((dir + "/junk.db").c_str(), "wb");
    std::fputs("this is not sqlite, just some bytes that go on for a while..........", f);
    std::fclose(f);
    EXPECT_THROW(catalog::open(dir + "/junk.db"), error);
}

TEST(Catalog, ConcurrentReadersAndWriter) {
    const std::string dir = temp_dir();
    auto cat = catalog::open(dir + "/c.db");
    std::thread w([&] {
        for (int i = 0; i < 50; ++i) {
            cat->replace_document(doc("d" + std::to_string(i)), {chunk("alpha beta " +
                                                                       std::to_string(i))});
        }
    });
    std::thread r([&] {
        for (int i = 0; i < 200; ++i) cat->search_bm25("alpha", 5);
    });
    w.join();
    r.join();
    EXPECT_EQ(cat->count_documents(), 50);
}

namespace {

void sql_exec(const std::string& db_path, const std::string& q) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, q.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
}

int64_t sql_int(const std::string& db_path, const std::string& q) {
    sqlite3* db = nullptr;
    sqlite3_stmt* s = nullptr;
    int64_t v = -1;
    if (sqlite3_open(db_path.c_str(), &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, q.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        v = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

// Overwrites the root page of `object` (a table or an index) with garbage, as a bad disk or a
// stray writer would; the catalog must be closed (its WAL checkpointed).
void overwrite_root_page(const std::string& db_path, const std::string& object) {
    const int64_t page = sql_int(db_path, "SELECT rootpage FROM sqlite_schema WHERE name = '" +
                                              object + "'");
    const int64_t size = sql_int(db_path, "PRAGMA page_size");
    ASSERT_GT(page, 1);
    ASSERT_GT(size, 0);
    FILE* f = std::fopen(db_path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>((page - 1) * size), SEEK_SET);
    for (int64_t i = 0; i < size; ++i) std::fputc(static_cast<int>((i * 7 + 13) & 0xff), f);
    std::fclose(f);
}

}  // namespace

TEST(Catalog, OverwrittenPagesAreFound) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/c.db";
    {
        auto cat = catalog::open(path);
        for (int i = 0; i < 20; ++i) {
            auto r = cat->replace_document(doc("d" + std::to_string(i)),
                                           {chunk("text number " + std::to_string(i))});
            cat->set_kv_key(r.added[0], "k" + std::to_string(i));
        }
        EXPECT_TRUE(cat->integrity_problems().empty());
    }
    // An index page: everything still reads; only the integrity check sees it.
    overwrite_root_page(path, "chunks_kv_key");
    {
        auto cat = catalog::open(path);
        EXPECT_EQ(cat->count_chunks(), 20);
        EXPECT_FALSE(cat->integrity_problems().empty());
    }
    // A table page: the check says so instead of throwing.
    overwrite_root_page(path, "chunks");
    auto cat = catalog::open(path);
    EXPECT_FALSE(cat->integrity_problems().empty());
}

TEST(Catalog, DeletedFtsRowsAreFoundAndRebuilt) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/c.db";
    auto cat = catalog::open(path);
    cat->replace_document(doc("a"), {chunk("the red fox jumps"), chunk("blue whales")});
    cat->replace_document(doc("b"), {chunk("a red panda eats bamboo")});
    EXPECT_EQ(cat->fts_problem(), "");
    // Another process deletes index rows: the chunks stay, their words are no longer found.
    sql_exec(path, "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE text "
                   "LIKE '%panda%')");
    EXPECT_EQ(cat->search_bm25("panda", 10).size(), 0u);
    EXPECT_NE(cat->fts_problem(), "");
    EXPECT_TRUE(cat->integrity_problems().empty());  // SQLite 3.40's check does not see it
    cat->rebuild_fts();
    EXPECT_EQ(cat->fts_problem(), "");
    EXPECT_EQ(cat->search_bm25("panda", 10).size(), 1u);
}

// Issue 17: a catalog others can write held chunk text another user rewrote, and search returned
// it. Such a catalog (or one another user owns) is refused with the path and the fix.
TEST(Catalog, CatalogOthersCanWriteIsRefused) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/catalog.db";
    catalog::open(path)->replace_document(doc("a"), {chunk("alpha")});
    ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
    try {
        catalog::open(path);
        ADD_FAILURE() << "a 0666 catalog was opened";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::io);
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        EXPECT_NE(msg.find("writable by other users (mode 0666)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("chmod go-w"), std::string::npos) << msg;
    }
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0);  // readable by others is the user's choice
    EXPECT_EQ(catalog::open(path)->count_documents(), 1);
    if (::geteuid() == 0) {  // only root can give a file away
        ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
        EXPECT_THROW(catalog::open(path), error);
    }
    EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}
