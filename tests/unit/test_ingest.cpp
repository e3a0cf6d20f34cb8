// Ingestion end to end with a test embedder: incremental re-ingest, updates, deletes, KV
// reference counting, bad input, and crash safety (a child process is SIGKILLed mid-ingest at
// several points; re-running must finish the job with catalog, index and KV store in agreement).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "retrieval/corpus.h"
#include "util/fifo-guard.h"
#include "util/hash-embedder.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::string temp_dir() { return cbltest::make_temp_dir("cbl-ing"); }

void write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::string doc_text(int i, int paragraphs) {
    std::string s;
    for (int p = 0; p < paragraphs; ++p) {
        s += "Document " + std::to_string(i) + " paragraph " + std::to_string(p) +
             " talks about topic" + std::to_string(i) + " and shared words. ";
        s += "Another sentence with token" + std::to_string(i * 100 + p) + ".\n\n";
    }
    return s;
}

struct fixture {
    std::string root = temp_dir();
    std::string docs = root + "/docs";
    std::string data = root + "/data";
    std::shared_ptr<cbltest::hash_embedder> emb = std::make_shared<cbltest::hash_embedder>(32);
    std::shared_ptr<kv_store> kv;

    uint64_t kv_budget = 0;

    explicit fixture(uint64_t budget = 0) : kv_budget(budget) {
        ::mkdir(docs.c_str(), 0700);
        ::mkdir(data.c_str(), 0700);
        reopen_kv();
    }
    // As a new process would: the store adopts files a killed writer renamed into place but
    // never recorded (a store object opened before the kill does not know of them).
    void reopen_kv() {
        kv_store_params kp;
        kp.dir = data + "/kv";
        kp.budget_bytes = kv_budget;
        kv = kv_store::open(kp);
    }
    std::unique_ptr<corpus> open(const vector_index_params& ip = {}) {
        corpus_params p;
        p.encode = [](std::string_view s) { return cbltest::word_tokens(s); };
        p.tokenizer_id = "words";
        p.emb = emb;
        p.index = ip;
        p.kv = kv;
        p.kv_owned = true;  // data/kv, as the runtime has it
        return corpus::open(data, std::move(p));
    }
};

ingest_params small_chunks() {
    ingest_params p;
    p.chunking.max_tokens = 24;
    return p;
}

// A tiny KV file per chunk, keyed like the real thing (tokens -> chunk key).
std::function<std::string(const chunk_info&)> fake_precompute(std::shared_ptr<kv_store> kv) {
    return [kv](const chunk_info& c) {
        const chunk_key key = make_chunk_key(42, 1, {7}, c.tokens);
        if (!kv->contains(key)) {
            chunk_kv_meta m;
            m.model_fingerprint = 42;
            m.n_layer = 1;
            m.n_kv_head = 1;
            m.head_dim = 2;
            m.n_tokens = static_cast<int32_t>(c.tokens.size());
            auto w = kv->create(key, m, c.tokens);
            std::vector<float> k(static_cast<size_t>(m.n_tokens) * 2, 0.5f);
            w->put_layer(0, k.data(), k.data(), 2);
            w->commit();
        }
        return key.hex();
    };
}

void expect_consistent(corpus& c) {
    const consistency_report r = c.check();
    EXPECT_TRUE(r.problems.empty()) << (r.problems.empty() ? "" : r.problems[0]);
    EXPECT_EQ(r.vectors, r.chunks);
}

}  // namespace

TEST(Ingest, IncrementalUpdateDeleteAndSearch) {
    fixture f;
    for (int i = 0; i < 5; ++i) write(f.docs + "/d" + std::to_string(i) + ".txt", doc_text(i, 4));
    auto c = f.open();
    ingest_params p = small_chunks();
    int progress_calls = 0;
    p.progress = [&](const ingest_progress&) { return ++progress_calls > 0; };
    ingest_report r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.added, 5);
    EXPECT_GT(progress_calls, 5);
    const int64_t chunks = c->cat().count_chunks();
    EXPECT_GT(chunks, 5);
    expect_consistent(*c);

    // Unchanged: nothing re-embedded.
    const int calls = f.emb->calls;
    r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.unchanged, 5);
    EXPECT_EQ(f.emb->calls, calls);

    // Search finds the document by its unique words, in every mode.
    for (search_mode m : {search_mode::hybrid, search_mode::dense, search_mode::bm25}) {
        search_params sp;
        sp.mode = m;
        sp.k = 3;
        const search_result s = c->search("topic3 token301", sp);
        ASSERT_FALSE(s.hits.empty()) << search_mode_name(m);
        EXPECT_NE(s.hits[0].uri.find("/d3.txt"), std::string::npos) << search_mode_name(m);
        EXPECT_TRUE(s.notice.empty());
    }

    // Change one file: its chunks are replaced, and the old text is gone from both retrievers.
    write(f.docs + "/d3.txt", "Completely new content about zebras.\n");
    r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.updated, 1);
    EXPECT_EQ(r.unchanged, 4);
    search_params sp;
    sp.mode = search_mode::bm25;
    EXPECT_TRUE(c->search("token301", sp).hits.empty());
    EXPECT_EQ(c->search("zebras", sp).hits.size(), 1u);
    expect_consistent(*c);

    // Delete a file: pruned on the next folder ingest.
    ::unlink((f.docs + "/d0.txt").c_str());
    r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.removed, 1);
    EXPECT_EQ(c->cat().count_documents(), 4);
    expect_consistent(*c);

    // Reopen: the saved index is used as is.
    c.reset();
    c = f.open();
    expect_consistent(*c);
    const search_result z = c->search("zebras", {});  // hybrid: dense adds nearest neighbours
    ASSERT_FALSE(z.hits.empty());
    EXPECT_NE(z.hits[0].uri.find("/d3.txt"), std::string::npos);
    EXPECT_EQ(z.hits[0].bm25_rank, 1);

    // A different chunk budget re-chunks unchanged files.
    ingest_params big;
    big.chunking.max_tokens = 512;
    r = c->ingest_paths({f.docs}, big);
    EXPECT_EQ(r.updated, 4);
    for (const auto& d : c->cat().list_documents()) EXPECT_EQ(d.n_chunks, 1) << d.uri;
}

TEST(Ingest, KvFilesSharedByIdenticalChunksStayUntilLastReference) {
    fixture f;
    const std::string shared = "A shared passage that appears in two files.\n";
    write(f.docs + "/a.txt", shared);
    write(f.docs + "/b.txt", shared);
    write(f.docs + "/c.txt", "Only in c.\n");
    auto c = f.open();
    ingest_params p = small_chunks();
    p.precompute_kv = fake_precompute(f.kv);
    ingest_report r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.kv_computed, 3);
    EXPECT_EQ(f.kv->stats().entries, 2u);
    expect_consistent(*c);
    const chunk_key shared_key = make_chunk_key(42, 1, {7}, cbltest::word_tokens(
                                                               "A shared passage that appears in "
                                                               "two files."));
    ASSERT_TRUE(f.kv->contains(shared_key));

    EXPECT_TRUE(c->remove(f.docs + "/a.txt"));
    ::unlink((f.docs + "/a.txt").c_str());
    EXPECT_TRUE(f.kv->contains(shared_key)) << "removed while b.txt still refers to it";
    ::unlink((f.docs + "/b.txt").c_str());
    r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.removed, 1);
    EXPECT_FALSE(f.kv->contains(shared_key));
    EXPECT_EQ(f.kv->stats().entries, 1u);
    // Updating c.txt replaces its KV file too.
    write(f.docs + "/c.txt", "Now different.\n");
    r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.kv_deleted, 1);
    EXPECT_EQ(f.kv->stats().entries, 1u);
    expect_consistent(*c);
}

TEST(Ingest, BadInputIsSkippedWithAReason) {
    fixture f;
    write(f.docs + "/good1.txt", "Good document one about apples.\n");
    // C1 control bytes: neither UTF-8 nor a charset libmagic names (unknown-8bit)
    write(f.docs + "/bad-utf8.txt", "valid start \x81\x9D then junk\n");
    write(f.docs + "/empty.md", "");
    write(f.docs + "/blank.txt", "   \n\n\t  \n");
    write(f.docs + "/huge.txt", std::string(5000, 'a') + "\n");
    write(f.docs + "/nul.txt", std::string("bin\0ary", 7));
    write(f.docs + "/image.png",
          std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0", 29));
    ::symlink((f.docs + "/missing-target.txt").c_str(), (f.docs + "/dangling.txt").c_str());
    ::mkfifo((f.docs + "/fifo.txt").c_str(), 0600);
    const std::string hostile = f.docs + "/q'\"; DROP TABLE documents; --\n\x01 \xE2\x98\x83.html";
    write(hostile, "<p>Hostile name, fine <b>content</b> about pears.</p>");
    write(f.docs + "/bad-name-\xFF.txt", "Invalid UTF-8 in the file name, plums.\n");
    ::mkdir((f.docs + "/sub").c_str(), 0700);
    write(f.docs + "/sub/good2.md", "# Title\n\nGood document two about bananas.\n");
    const bool root = ::geteuid() == 0;
    write(f.docs + "/noperm.txt", "secret\n");
    ::chmod((f.docs + "/noperm.txt").c_str(), 0);

    auto c = f.open();
    ingest_params p = small_chunks();
    p.max_document_bytes = 4096;
    const ingest_report r = c->ingest_paths({f.docs, f.root + "/does-not-exist"}, p);
    std::map<std::string, std::string> why;
    for (const auto& [path, reason] : r.skipped_files) {
        why[path.substr(path.find_last_of('/') + 1)] = reason;
    }
    EXPECT_NE(why["bad-utf8.txt"].find("invalid UTF-8 at byte 12"), std::string::npos);
    EXPECT_NE(why["empty.md"].find("empty"), std::string::npos);
    EXPECT_NE(why["blank.txt"].find("empty"), std::string::npos);
    EXPECT_NE(why["huge.txt"].find("too large"), std::string::npos);
    EXPECT_NE(why["nul.txt"].find("NUL"), std::string::npos);
    EXPECT_EQ(why["image.png"], "binary file (image/png)");
    EXPECT_NE(why["dangling.txt"].find("symbolic link (not followed)"), std::string::npos);
    EXPECT_NE(why["fifo.txt"].find("not a regular file"), std::string::npos);
    EXPECT_NE(why["does-not-exist"].find("cannot access"), std::string::npos);
    if (!root) EXPECT_NE(why["noperm.txt"].find("EACCES"), std::string::npos);
    EXPECT_EQ(r.added, root ? 5 : 4);  // good1, good2, hostile, bad-name (+ noperm as root)
    search_params sp;
    sp.mode = search_mode::bm25;
    for (const char* q : {"apples", "bananas", "pears", "plums"}) {
        EXPECT_EQ(c->search(q, sp).hits.size(), 1u) << q;
    }
    EXPECT_EQ(c->search("pears", sp).hits[0].uri, hostile);
    expect_consistent(*c);

    // In-memory documents: bad metadata and bad text are errors, not skips.
    EXPECT_THROW(c->ingest_text("mem://1", "text", doc_kind::text, "{\"a\":", p), error);
    EXPECT_THROW(c->ingest_text("mem://2", "\xFF", doc_kind::text, "", p), error);
    EXPECT_TRUE(c->ingest_text("mem://3", "kiwis", doc_kind::text, "{\"src\":\"x'--\"}", p));
    EXPECT_FALSE(c->ingest_text("mem://3", "kiwis", doc_kind::text, "{\"src\":\"x'--\"}", p));
    search_params fp = sp;
    fp.filter.metadata = {{"src", "x'--"}};
    EXPECT_EQ(c->search("kiwis", fp).hits.size(), 1u);
}

TEST(Ingest, HnswDeletesFilteredThenRebuilt) {
    fixture f;
    for (int i = 0; i < 10; ++i) write(f.docs + "/d" + std::to_string(i) + ".txt", doc_text(i, 2));
    vector_index_params ip;
    ip.factory = "HNSW16";
    ip.rebuild_deleted_share = 0.3f;
    auto c = f.open(ip);
    ingest_params p = small_chunks();
    c->ingest_paths({f.docs}, p);
    for (int i = 0; i < 2; ++i) ::unlink((f.docs + "/d" + std::to_string(i) + ".txt").c_str());
    ingest_report r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.removed, 2);
    search_params sp;
    sp.mode = search_mode::dense;
    sp.k = 50;
    for (const auto& h : c->search("topic0 token0", sp).hits) {
        EXPECT_EQ(h.uri.find("/d0.txt"), std::string::npos);
    }
    expect_consistent(*c);
    for (int i = 2; i < 6; ++i) ::unlink((f.docs + "/d" + std::to_string(i) + ".txt").c_str());
    r = c->ingest_paths({f.docs}, p);
    ASSERT_FALSE(r.notices.empty());
    EXPECT_NE(r.notices.back().find("rebuilt"), std::string::npos);
    expect_consistent(*c);
}

namespace {

enum class kill_at { embed, commit, kv, async };

// Runs an ingest in a child process that SIGKILLs itself at the n-th event (or is killed by the
// parent after `n` microseconds for kill_at::async). Returns true if the child was killed.
bool ingest_and_die(fixture& f, kill_at where, int n) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        int count = 0;
        const auto die = [&] {
            if (++count == n) ::kill(::getpid(), SIGKILL);
        };
        try {
            if (where == kill_at::embed) {
                // The embedder runs before a document's transaction: dying here is mid-document.
                struct dying_embedder final : cbltest::hash_embedder {
                    std::function<void()> hook;
                    dying_embedder() : hash_embedder(32) {}
                    void embed(const std::vector<std::string>& t, std::vector<float>& o) override {
                        hook();
                        hash_embedder::embed(t, o);
                    }
                };
                auto e = std::make_shared<dying_embedder>();
                e->hook = die;
                f.emb = e;
            }
            auto c = f.open();
            ingest_params p = small_chunks();
            p.precompute_kv = fake_precompute(f.kv);
            if (where == kill_at::commit) p.after_commit = [&](const std::string&) { die(); };
            if (where == kill_at::kv) {
                auto inner = p.precompute_kv;
                p.precompute_kv = [&, inner](const chunk_info& ch) {
                    die();
                    return inner(ch);
                };
            }
            c->ingest_paths({f.docs}, p);
        } catch (...) {
            ::_exit(2);
        }
        ::_exit(0);
    }
    if (where == kill_at::async) {
        std::this_thread::sleep_for(std::chrono::microseconds(n));
        ::kill(pid, SIGKILL);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_FALSE(WIFEXITED(st) && WEXITSTATUS(st) == 2) << "child failed with an exception";
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

}  // namespace

TEST(Ingest, CrashMidwayThenRerunFinishes) {
    // Reference: one uninterrupted run.
    fixture ref;
    const int n_files = 12;
    for (int i = 0; i < n_files; ++i) {
        write(ref.docs + "/f" + std::to_string(i) + ".txt", doc_text(i, 3 + i % 3));
    }
    write(ref.docs + "/dup.txt", doc_text(1, 3 + 1));  // identical chunks: shared KV files
    int64_t ref_chunks, ref_entries;
    {
        auto c = ref.open();
        ingest_params p = small_chunks();
        p.precompute_kv = fake_precompute(ref.kv);
        c->ingest_paths({ref.docs}, p);
        ref_chunks = c->cat().count_chunks();
        ref_entries = static_cast<int64_t>(ref.kv->stats().entries);
    }
    struct point {
        kill_at where;
        int n;
    };
    const point points[] = {{kill_at::embed, 1}, {kill_at::embed, 6},  {kill_at::commit, 1},
                            {kill_at::commit, 7}, {kill_at::kv, 1},    {kill_at::kv, 20},
                            {kill_at::async, 2000}, {kill_at::async, 20000}};
    for (const point& pt : points) {
        SCOPED_TRACE(::testing::Message() << "kill point " << static_cast<int>(pt.where) << "/"
                                          << pt.n);
        fixture f;
        for (int i = 0; i < n_files; ++i) {
            write(f.docs + "/f" + std::to_string(i) + ".txt", doc_text(i, 3 + i % 3));
        }
        write(f.docs + "/dup.txt", doc_text(1, 3 + 1));
        if (pt.where != kill_at::async) EXPECT_TRUE(ingest_and_die(f, pt.where, pt.n));
        else ingest_and_die(f, pt.where, pt.n);  // may finish first on a fast machine
        // A second crash on top of the first, then the run that finishes.
        ingest_and_die(f, kill_at::commit, 3);
        f.emb = std::make_shared<cbltest::hash_embedder>(32);
        f.reopen_kv();
        auto c = f.open();
        ingest_params p = small_chunks();
        p.precompute_kv = fake_precompute(f.kv);
        c->ingest_paths({f.docs}, p);
        EXPECT_EQ(c->cat().count_documents(), n_files + 1);
        EXPECT_EQ(c->cat().count_chunks(), ref_chunks);
        EXPECT_EQ(static_cast<int64_t>(f.kv->stats().entries), ref_entries);
        const consistency_report r = c->check();
        EXPECT_TRUE(r.problems.empty()) << (r.problems.empty() ? "" : r.problems[0]);
        EXPECT_EQ(r.vectors, ref_chunks);
        EXPECT_EQ(r.kv_keys, ref_entries);
        // Nothing duplicated: every chunk text of every file appears exactly once per file.
        std::set<std::pair<int64_t, int32_t>> seen;
        std::vector<int64_t> ids;
        for (const auto& [id, key] : c->cat().chunk_kv_keys()) ids.push_back(id);
        for (const chunk_info& ch : c->cat().get_chunks(ids)) {
            EXPECT_TRUE(seen.insert({ch.doc_id, ch.ordinal}).second);
        }
        // The index on disk matches too (reopen uses it without a rebuild).
        c.reset();
        bool rebuilt = true;
        open_vector_index(corpus_index_path(f.data), *catalog::open(corpus_catalog_path(f.data)),
                          32, {}, &rebuilt);
        EXPECT_FALSE(rebuilt);
    }
}

// ---- ingest --check and --repair (issue 17, case 4) ----

namespace {

std::string kv_path(const fixture& f, const std::string& hex) {
    return f.data + "/kv/" + hex.substr(0, 2) + "/" + hex + ".kv";
}

// Distinct KV keys of the catalog, in key order.
std::vector<std::string> kv_keys(corpus& c) {
    std::set<std::string> keys;
    for (const auto& [id, key] : c.cat().chunk_kv_keys())
        if (!key.empty()) keys.insert(key);
    return {keys.begin(), keys.end()};
}

// Test tokens are word lengths (cbltest::word_tokens): vary them so chunks get distinct keys.
std::string varied_text(int i) {
    std::string s;
    for (int p = 0; p < 3; ++p) {
        for (int w = 0; w < 10; ++w) {
            s += std::string(static_cast<size_t>(1 + (i * 7 + p * 3 + w * w) % 13),
                             static_cast<char>('a' + p)) + " ";
        }
        s += "end.\n\n";
    }
    return s;
}

// Ingests 4 documents with their KV precomputed.
std::unique_ptr<corpus> ingest_with_kv(fixture& f) {
    for (int i = 0; i < 4; ++i) write(f.docs + "/d" + std::to_string(i) + ".txt", varied_text(i));
    auto c = f.open();
    ingest_params p = small_chunks();
    p.precompute_kv = fake_precompute(f.kv);
    c->ingest_paths({f.docs}, p);
    return c;
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
    for (const std::string& l : lines)
        if (l.find(what) != std::string::npos) return true;
    return false;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string s;
    for (const std::string& l : lines) s += l + "\n";
    return s;
}

}  // namespace

TEST(IngestCheck, FindsTruncatedFlippedAndSwappedKvFilesAndRepairFixesThem) {
    fixture f;
    auto c = ingest_with_kv(f);
    expect_consistent(*c);
    const std::vector<std::string> keys = kv_keys(*c);
    ASSERT_GE(keys.size(), 4u);
    std::vector<uint8_t> b0 = cbltest::read_bytes(kv_path(f, keys[0]));
    b0.resize(b0.size() - 10);  // the last layer's tail
    cbltest::write_bytes(kv_path(f, keys[0]), b0);
    std::vector<uint8_t> b1 = cbltest::read_bytes(kv_path(f, keys[1]));
    b1[b1.size() - 4000] ^= 0x20;  // a payload bit (header verification cannot see it)
    cbltest::write_bytes(kv_path(f, keys[1]), b1);
    const auto b2 = cbltest::read_bytes(kv_path(f, keys[2]));
    const auto b3 = cbltest::read_bytes(kv_path(f, keys[3]));
    cbltest::write_bytes(kv_path(f, keys[2]), b3);
    cbltest::write_bytes(kv_path(f, keys[3]), b2);

    const consistency_report r = c->check();
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(mentions(r.problems, keys[i])) << joined(r.problems);
    EXPECT_EQ(r.problems.size(), 4u) << joined(r.problems);

    // Without precompute the damaged files go and their chunks are simply uncached.
    const repair_report rep = c->repair(ingest_params{});
    EXPECT_TRUE(rep.not_repaired.empty()) << joined(rep.not_repaired);
    EXPECT_TRUE(mentions(rep.repaired, "4 damaged KV files")) << joined(rep.repaired);
    const consistency_report after = c->check();
    EXPECT_TRUE(after.problems.empty()) << joined(after.problems);
    EXPECT_GT(after.kv_uncached, 0);
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(::access(kv_path(f, keys[i]).c_str(), F_OK) == 0);

    // With precompute the repair computes them again.
    ingest_params p;
    p.precompute_kv = fake_precompute(f.kv);
    const repair_report rep2 = c->repair(p);
    EXPECT_TRUE(mentions(rep2.repaired, "computed")) << joined(rep2.repaired);
    EXPECT_EQ(c->check().kv_uncached, 0);
    expect_consistent(*c);
}

TEST(IngestCheck, EvictionUnderASmallBudgetIsNotAProblem) {
    // A budget of about two tiny files: precompute evicts as it goes.
    fixture f(2 * 4096 + 4096);
    auto c = ingest_with_kv(f);
    const consistency_report r = c->check();
    EXPECT_TRUE(r.problems.empty()) << joined(r.problems);
    EXPECT_GT(r.kv_uncached, 0);
    EXPECT_TRUE(mentions(r.notes, "without cached KV")) << joined(r.notes);
}

TEST(IngestCheck, PrecomputeRecomputesAMissingKvFile) {
    fixture f;
    auto c = ingest_with_kv(f);
    const std::vector<std::string> keys = kv_keys(*c);
    chunk_key k;
    ASSERT_TRUE(parse_chunk_key(keys[1], &k));
    ASSERT_TRUE(f.kv->remove(k));
    EXPECT_EQ(c->check().kv_uncached, c->cat().kv_refcount(keys[1]));
    ingest_params p = small_chunks();
    p.precompute_kv = fake_precompute(f.kv);
    const ingest_report r = c->ingest_paths({f.docs}, p);  // nothing changed but the store
    EXPECT_EQ(r.unchanged, 4);
    EXPECT_EQ(r.kv_computed, 1);
    EXPECT_TRUE(f.kv->contains(k));
    EXPECT_EQ(c->check().kv_uncached, 0);
}

TEST(IngestCheck, OverwrittenCatalogPageIsReportedAndNotRepaired) {
    fixture f;
    ingest_with_kv(f).reset();
    const size_t files = f.kv->keys().size();
    const std::string db = corpus_catalog_path(f.data);
    // The chunk table's root page, overwritten while no one has the catalog open.
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT rootpage FROM sqlite_schema WHERE name = 'chunks'",
                                 -1, &st, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    const long page = static_cast<long>(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    std::vector<uint8_t> b = cbltest::read_bytes(db);
    ASSERT_GE(b.size(), static_cast<size_t>(page) * 4096);
    for (size_t i = 0; i < 4096; ++i) b[static_cast<size_t>(page - 1) * 4096 + i] = uint8_t(i * 7);
    cbltest::write_bytes(db, b);

    auto c = f.open();
    const consistency_report r = c->check();
    EXPECT_TRUE(mentions(r.problems, "is damaged")) << joined(r.problems);
    const repair_report rep = c->repair(ingest_params{});
    ASSERT_EQ(rep.not_repaired.size(), 1u);
    EXPECT_TRUE(mentions(rep.not_repaired, "new data directory")) << rep.not_repaired[0];
    EXPECT_EQ(f.kv->keys().size(), files);  // nothing is deleted on a catalog's word it fails
}

TEST(IngestCheck, DeletedFtsRowsAreReportedAndRebuilt) {
    fixture f;
    auto c = ingest_with_kv(f);
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(corpus_catalog_path(f.data).c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "DELETE FROM chunks_fts WHERE rowid % 2 = 0", nullptr, nullptr,
                           nullptr), SQLITE_OK);
    sqlite3_close(h);
    const consistency_report r = c->check();
    EXPECT_TRUE(mentions(r.problems, "full-text index")) << joined(r.problems);
    const repair_report rep = c->repair(ingest_params{});
    EXPECT_TRUE(rep.not_repaired.empty()) << joined(rep.not_repaired);
    EXPECT_TRUE(mentions(rep.repaired, "full-text index")) << joined(rep.repaired);
    expect_consistent(*c);
    // The next ingest works (it failed "database disk image is malformed").
    write(f.docs + "/d0.txt", doc_text(9, 2));
    EXPECT_NO_THROW(c->ingest_paths({f.docs}, small_chunks()));
    expect_consistent(*c);
}

TEST(IngestCheck, TruncatedCatalogWithOrphanKvFilesIsReportedAndCleared) {
    fixture f;
    ingest_with_kv(f).reset();
    const size_t files = f.kv->keys().size();
    ASSERT_GT(files, 0u);
    ASSERT_EQ(::truncate(corpus_catalog_path(f.data).c_str(), 0), 0);
    auto c = f.open();
    const consistency_report r = c->check();
    EXPECT_EQ(r.chunks, 0);
    EXPECT_EQ(r.kv_orphans, static_cast<int64_t>(files));
    EXPECT_TRUE(mentions(r.problems, "holds no chunks")) << joined(r.problems);
    const repair_report rep = c->repair(ingest_params{});
    EXPECT_TRUE(rep.not_repaired.empty()) << joined(rep.not_repaired);
    EXPECT_TRUE(mentions(rep.notes, "re-ingest")) << joined(rep.notes);
    EXPECT_EQ(f.kv->keys().size(), 0u);
    expect_consistent(*c);
}

TEST(IngestCheck, RepairEmbedsAndRebuildsTheIndex) {
    fixture f;
    auto c = ingest_with_kv(f);
    c->cat().clear_embeddings();  // as after an interrupted re-embed
    const consistency_report r = c->check();
    EXPECT_TRUE(mentions(r.problems, "without an embedding")) << joined(r.problems);
    // The in-memory index follows the catalog's vector version (reloaded under the writer lock),
    // so it drops the cleared vectors by itself: only the embeddings are missing.
    EXPECT_EQ(r.vectors, 0);
    const repair_report rep = c->repair(ingest_params{});
    EXPECT_TRUE(rep.not_repaired.empty()) << joined(rep.not_repaired);
    EXPECT_TRUE(mentions(rep.repaired, "rebuilt the vector index")) << joined(rep.repaired);
    expect_consistent(*c);
}

TEST(IngestCheck, SharedStoreOrphansAreNotOurs) {
    fixture f;
    auto c = ingest_with_kv(f);
    corpus_params p;  // the same store, as a store shared by another data dir
    p.encode = [](std::string_view s) { return cbltest::word_tokens(s); };
    p.tokenizer_id = "words";
    p.kv = f.kv;
    auto other = corpus::open(f.root + "/other", std::move(p));
    const consistency_report r = other->check();
    EXPECT_TRUE(r.problems.empty()) << joined(r.problems);
    EXPECT_EQ(r.kv_orphans, 0);
    other->repair(ingest_params{});
    EXPECT_EQ(f.kv->keys().size(), kv_keys(*c).size());
}

namespace {

std::map<std::string, std::string> skip_reasons(const ingest_report& r) {
    std::map<std::string, std::string> why;
    for (const auto& [path, reason] : r.skipped_files) {
        why[path.substr(path.find_last_of('/') + 1)] = reason;
    }
    return why;
}

size_t bm25_hits(corpus& c, const std::string& q) {
    search_params sp;
    sp.mode = search_mode::bm25;
    sp.k = 10;
    return c.search(q, sp).hits.size();
}

}  // namespace

// Issue 17 case 1: `mkdir f; ln -s /etc/shadow f/x.txt; ingest f` indexed the link's target.
// A symlink met in a folder is skipped with a reason; nothing outside the folder is read.
TEST(IngestSafety, SymlinksInAFolderAreNotFollowed) {
    fixture f;
    write(f.root + "/secret.txt", "The launch code is zebra-4417.\n");  // outside the folder
    write(f.docs + "/good.txt", "An ordinary document about apples.\n");
    ASSERT_EQ(::symlink((f.root + "/secret.txt").c_str(), (f.docs + "/x.txt").c_str()), 0);
    ::mkdir((f.root + "/elsewhere").c_str(), 0700);
    write(f.root + "/elsewhere/more.txt", "More secrets about zebra.\n");
    ASSERT_EQ(::symlink((f.root + "/elsewhere").c_str(), (f.docs + "/dir").c_str()), 0);
    auto c = f.open();
    const ingest_report r = c->ingest_paths({f.docs}, small_chunks());
    auto why = skip_reasons(r);
    EXPECT_EQ(why["x.txt"], "symbolic link (not followed)");
    EXPECT_EQ(why["dir"], "symbolic link (not followed)");
    EXPECT_EQ(r.added, 1);
    EXPECT_EQ(bm25_hits(*c, "zebra"), 0u);
    EXPECT_EQ(bm25_hits(*c, "apples"), 1u);
}

// With follow_symlinks, a link is followed only when its real path stays inside the folder, and
// a link and its target are one document.
TEST(IngestSafety, FollowSymlinksStaysInsideAndIndexesOnce) {
    fixture f;
    write(f.root + "/secret.txt", "The launch code is zebra-4417.\n");
    ::mkdir((f.docs + "/sub").c_str(), 0700);
    write(f.docs + "/sub/real.txt", "The real document about mangoes.\n");
    ASSERT_EQ(::symlink((f.root + "/secret.txt").c_str(), (f.docs + "/out.txt").c_str()), 0);
    // relative and absolute links to the same inside file, and one through a `..` that escapes
    ASSERT_EQ(::symlink("sub/real.txt", (f.docs + "/alias.txt").c_str()), 0);
    ASSERT_EQ(::symlink((f.docs + "/sub/real.txt").c_str(), (f.docs + "/abs.txt").c_str()), 0);
    ASSERT_EQ(::symlink("../../secret.txt", (f.docs + "/sub/up.txt").c_str()), 0);
    auto c = f.open();
    ingest_params p = small_chunks();
    p.follow_symlinks = true;
    const ingest_report r = c->ingest_paths({f.docs}, p);
    auto why = skip_reasons(r);
    EXPECT_NE(why["out.txt"].find("outside"), std::string::npos) << why["out.txt"];
    EXPECT_NE(why["up.txt"].find("outside"), std::string::npos) << why["up.txt"];
    EXPECT_EQ(why.count("alias.txt"), 0u);
    EXPECT_EQ(why.count("abs.txt"), 0u);
    EXPECT_EQ(r.added, 1);
    EXPECT_EQ(r.files_seen, 1);
    EXPECT_EQ(c->cat().count_documents(), 1);
    EXPECT_EQ(bm25_hits(*c, "mangoes"), 1u);
    EXPECT_EQ(bm25_hits(*c, "zebra"), 0u);
    ASSERT_TRUE(c->cat().find_document(f.docs + "/sub/real.txt"));
    // A path the caller names is theirs to follow, symlink or not.
    const ingest_report named = c->ingest_paths({f.docs + "/out.txt"}, small_chunks());
    EXPECT_EQ(named.added, 1);
    EXPECT_EQ(bm25_hits(*c, "zebra"), 1u);
}

// FIFOs (and devices, sockets) are never opened: no hang, a reason instead.
TEST(IngestSafety, SpecialFilesAreSkippedWithoutHanging) {
    fixture f;
    write(f.docs + "/good.txt", "An ordinary document about apples.\n");
    ASSERT_EQ(::mkfifo((f.docs + "/a.txt").c_str(), 0600), 0);
    ASSERT_EQ(::mkfifo((f.root + "/named.txt").c_str(), 0600), 0);
    auto c = f.open();
    ingest_report r;
    EXPECT_TRUE(cbltest::returns_soon(f.docs + "/a.txt", [&] {
        r = c->ingest_paths({f.docs, f.root + "/named.txt"}, small_chunks());
    }));
    auto why = skip_reasons(r);
    EXPECT_NE(why["a.txt"].find("not a regular file"), std::string::npos) << why["a.txt"];
    EXPECT_NE(why["named.txt"].find("not a regular file"), std::string::npos);
    EXPECT_EQ(r.added, 1);
}

// The walk checks a file, the read comes later: a file swapped in between (for a symlink to
// somewhere else, or for another file) is refused rather than read.
TEST(IngestSafety, FilesSwappedAfterTheWalkAreRefused) {
    fixture f;
    write(f.root + "/secret.txt", "The launch code is zebra-4417.\n");
    write(f.root + "/other.txt", "Another file about zebra too.\n");
    write(f.docs + "/a.txt", "First document about apples.\n");
    write(f.docs + "/b.txt", "Second document about bananas.\n");
    write(f.docs + "/c.txt", "Third document about cherries.\n");
    auto c = f.open();
    ingest_params p = small_chunks();
    p.after_commit = [&](const std::string& uri) {
        if (uri != f.docs + "/a.txt") return;
        ::unlink((f.docs + "/b.txt").c_str());
        ::symlink((f.root + "/secret.txt").c_str(), (f.docs + "/b.txt").c_str());
        ::rename((f.root + "/other.txt").c_str(), (f.docs + "/c.txt").c_str());
    };
    const ingest_report r = c->ingest_paths({f.docs}, p);
    auto why = skip_reasons(r);
    EXPECT_EQ(why["b.txt"], "symbolic link (not followed)");
    EXPECT_NE(why["c.txt"].find("replaced"), std::string::npos) << why["c.txt"];
    EXPECT_EQ(bm25_hits(*c, "zebra"), 0u);
}

// Issue 17 case 3: a pre-existing data dir others can write (or another user owns), or a vector
// index file others can write, is refused with the path and the fix; never silently chmod-ed.
TEST(IngestSafety, DataDirOthersCanWriteIsRefused) {
    fixture f;
    const std::string data = f.root + "/shared";
    ASSERT_EQ(::mkdir(data.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(data.c_str(), 0777), 0);
    corpus_params cp;
    cp.encode = [](std::string_view s) { return cbltest::word_tokens(s); };
    cp.emb = f.emb;
    try {
        corpus::open(data, cp);
        ADD_FAILURE() << "a 0777 data dir was used";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::io);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("data directory " + data), std::string::npos) << msg;
        EXPECT_NE(msg.find("chmod go-w"), std::string::npos) << msg;
    }
    struct stat st {};
    ASSERT_EQ(::stat(data.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0777u);
    ASSERT_EQ(::chmod(data.c_str(), 0755), 0);
    corpus::open(data, cp)->ingest_text("mem://a", "apples", doc_kind::text, "", small_chunks());
    ASSERT_EQ(::chmod(corpus_index_path(data).c_str(), 0666), 0);
    EXPECT_THROW(corpus::open(data, cp), error);
    ASSERT_EQ(::chmod(corpus_index_path(data).c_str(), 0600), 0);
    EXPECT_NO_THROW(corpus::open(data, cp));
    if (::geteuid() == 0) {
        ASSERT_EQ(::chown(data.c_str(), 65534, 65534), 0);
        EXPECT_THROW(corpus::open(data, cp), error);
    }
}

// Issue 17 case 5: a directory at DATA/vectors.faiss failed every command with
// "basic_filebuf::underflow". Search works now (from an in-memory rebuild); an ingest, which
// must save the index, fails with an error naming the path.
TEST(IngestSafety, DirectoryAtTheIndexPathLeavesSearchWorking) {
    fixture f;
    write(f.docs + "/a.txt", "First document about apples.\n");
    f.open()->ingest_paths({f.docs}, small_chunks());
    const std::string index = corpus_index_path(f.data);
    ASSERT_EQ(::unlink(index.c_str()), 0);
    ASSERT_EQ(::mkdir(index.c_str(), 0700), 0);
    auto c = f.open();
    search_params sp;
    sp.mode = search_mode::dense;
    EXPECT_EQ(c->search("apples", sp).hits.size(), 1u);
    write(f.docs + "/b.txt", "Second document about bananas.\n");
    try {
        c->ingest_paths({f.docs}, small_chunks());
        ADD_FAILURE() << "saved the index over a directory";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find(index + " is a directory"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(bm25_hits(*c, "bananas"), 1u);  // the document itself was committed
    c.reset();  // the destructor's save fails quietly
    ASSERT_EQ(::rmdir(index.c_str()), 0);
    c = f.open();
    bool found = false;
    for (const search_hit& h : c->search("bananas", sp).hits) found |= h.uri == f.docs + "/b.txt";
    EXPECT_TRUE(found);
    expect_consistent(*c);
}
