// Big inputs and right reports (issue 17, case 5), with a test embedder and a word tokenizer:
// chunking a long line is linear, a big file reports progress while it is chunked and embedded,
// a file past max_file_seconds is abandoned while the next files go on, and the report counts
// what was embedded, removed (chunks and KV files) and committed before an abort.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "retrieval/chunker.h"
#include "retrieval/corpus.h"
#include "util/hash-embedder.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::string temp_dir() { return cbltest::make_temp_dir("cbl-inglim"); }

void write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Many short sentences, paragraphs now and then: about n_words words.
std::string prose(int doc, int n_words) {
    std::string s;
    for (int w = 0; w < n_words; ++w) {
        s += "word" + std::to_string(doc) + "x" + std::to_string(w % 97);
        s += (w % 9 == 8) ? ". " : " ";
        if (w % 200 == 199) s += "\n\n";
    }
    return s + ".\n";
}

// The hash embedder, slowed down: a big file takes a while, as with a real model.
class slow_embedder : public cbltest::hash_embedder {
public:
    explicit slow_embedder(int ms) : cbltest::hash_embedder(32), ms_(ms) {}
    void embed(const std::vector<std::string>& texts, std::vector<float>& out) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
        cbltest::hash_embedder::embed(texts, out);
    }

private:
    int ms_;
};

struct fixture {
    std::string root = temp_dir();
    std::string docs = root + "/docs";
    std::string data = root + "/data";
    std::shared_ptr<kv_store> kv;

    fixture() {
        ::mkdir(docs.c_str(), 0700);
        ::mkdir(data.c_str(), 0700);
        kv_store_params kp;
        kp.dir = data + "/kv";
        kv = kv_store::open(kp);
    }
    std::unique_ptr<corpus> open(std::shared_ptr<embedder> emb =
                                     std::make_shared<cbltest::hash_embedder>(32)) {
        corpus_params p;
        p.encode = [](std::string_view s) { return cbltest::word_tokens(s); };
        p.tokenizer_id = "words";
        p.emb = std::move(emb);
        p.kv = kv;
        return corpus::open(data, std::move(p));
    }
};

ingest_params small_chunks() {
    ingest_params p;
    p.chunking.max_tokens = 24;
    return p;
}

}  // namespace

TEST(IngestLimits, ChunkingOneLongLineIsLinear) {
    // 400 KB without a sentence end or a newline: the chunker used to tokenize the whole rest of
    // the line for every piece it cut (400 KB x ~700 pieces).
    std::string line;
    while (line.size() < 400000) line += "lorem" + std::to_string(line.size() % 1000) + " ";
    size_t encoded = 0;
    const encode_fn counting = [&](std::string_view s) {
        encoded += s.size();
        return cbltest::word_tokens(s);
    };
    chunker_params cp;
    cp.max_tokens = 64;
    std::vector<size_t> progress;
    const auto chunks = chunk_text(line, counting, cp, [&](size_t done, size_t total) {
        EXPECT_EQ(total, line.size());
        progress.push_back(done);
    });
    ASSERT_GT(chunks.size(), 500u);
    for (const auto& c : chunks) EXPECT_LE(c.tokens.size(), 64u);
    EXPECT_LT(encoded, 30 * line.size()) << "bytes tokenized for " << line.size() << " bytes";
    // Progress moved during the one line, not only at its end.
    ASSERT_GE(progress.size(), 4u);
    EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
    EXPECT_LT(progress.front(), line.size() / 2);
}

TEST(IngestLimits, DefaultSizeLimitIs16MiB) {
    EXPECT_EQ(ingest_params{}.max_document_bytes, 16ll << 20);
}

TEST(IngestLimits, BigFileReportsProgressWhileEmbedding) {
    fixture f;
    auto c = f.open();
    const std::string big = f.docs + "/big.txt";
    write(big, prose(1, 6000));  // about 250 chunks of 24 words: several embedding batches
    std::set<int64_t> embed_done;
    bool embed_names_file = false;
    ingest_params p = small_chunks();
    p.progress = [&](const ingest_progress& pr) {
        if (std::string(pr.phase) == "embed" && pr.current.find("big.txt") != std::string::npos) {
            embed_done.insert(pr.done);
            embed_names_file = true;
            EXPECT_LE(pr.done, pr.total);
        }
        return true;
    };
    const ingest_report r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.added, 1);
    EXPECT_TRUE(embed_names_file);
    EXPECT_GE(embed_done.size(), 4u);  // done moved batch by batch within the file
    // The chunks embedded inside the document count (they used to report 0).
    EXPECT_GT(r.embedded, 0);
    EXPECT_EQ(r.embedded, r.chunks_added);
}

TEST(IngestLimits, SlowFileIsAbandonedAndTheNextFilesGoOn) {
    fixture f;
    auto c = f.open(std::make_shared<slow_embedder>(40));
    write(f.docs + "/a-big.txt", prose(1, 12000));  // ~500 chunks: ~16 batches of 40 ms
    write(f.docs + "/b-small.txt", prose(2, 30));
    write(f.docs + "/c-small.txt", prose(3, 30));
    ingest_params p = small_chunks();
    p.max_file_seconds = 0.2;
    const auto t0 = std::chrono::steady_clock::now();
    const ingest_report r = c->ingest_paths({f.docs}, p);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(r.added, 2);
    ASSERT_EQ(r.skipped_files.size(), 1u);
    EXPECT_NE(r.skipped_files[0].first.find("a-big.txt"), std::string::npos);
    EXPECT_NE(r.skipped_files[0].second.find("took longer than 0.2 s"), std::string::npos)
        << r.skipped_files[0].second;
    EXPECT_LT(took.count(), 5.0);  // not the ~0.7 s x 16 the whole file would take (+ slack)
    // Nothing of the abandoned file was committed.
    EXPECT_FALSE(c->cat().find_document(f.docs + "/a-big.txt").has_value());
    EXPECT_TRUE(c->cat().find_document(f.docs + "/b-small.txt").has_value());
    EXPECT_TRUE(c->check().problems.empty());

    // ingest_text: the one document is refused with the same reason.
    try {
        c->ingest_text("mem://big", prose(4, 12000), doc_kind::text, "", p);
        FAIL() << "expected an abort";
    } catch (const ingest_aborted& e) {
        EXPECT_NE(std::string(e.what()).find("took longer than"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(c->cat().find_document("mem://big").has_value());
}

TEST(IngestLimits, SizeLimitIsAnOption) {
    fixture f;
    auto c = f.open();
    write(f.docs + "/a.txt", prose(1, 2000));
    write(f.docs + "/b.txt", prose(2, 20));
    ingest_params p = small_chunks();
    p.max_document_bytes = 4096;
    const ingest_report r = c->ingest_paths({f.docs}, p);
    EXPECT_EQ(r.added, 1);
    ASSERT_EQ(r.skipped_files.size(), 1u);
    EXPECT_NE(r.skipped_files[0].second.find("limit 4096"), std::string::npos);
}

TEST(IngestLimits, RemoveReportsChunksAndKvDeleted) {
    fixture f;
    auto c = f.open();
    write(f.docs + "/a.txt", prose(1, 100));
    ingest_params p = small_chunks();
    // A KV file per chunk (distinct tokens, so each chunk has its own).
    p.precompute_kv = [kv = f.kv](const chunk_info& ch) {
        const chunk_key key = make_chunk_key(42, 1, {7}, ch.tokens);
        if (!kv->contains(key)) {
            chunk_kv_meta m;
            m.model_fingerprint = 42;
            m.n_layer = 1;
            m.n_kv_head = 1;
            m.head_dim = 2;
            m.n_tokens = static_cast<int32_t>(ch.tokens.size());
            auto w = kv->create(key, m, ch.tokens);
            std::vector<float> k(static_cast<size_t>(m.n_tokens) * 2, 0.5f);
            w->put_layer(0, k.data(), k.data(), 2);
            w->commit();
        }
        return key.hex();
    };
    const ingest_report in = c->ingest_paths({f.docs}, p);
    ASSERT_EQ(in.added, 1);
    ASSERT_GT(in.chunks_added, 1);
    ASSERT_EQ(in.kv_computed, in.chunks_added);

    const uint64_t kv_files = f.kv->stats().entries;  // identical chunks share one
    ASSERT_GT(kv_files, 1u);
    ingest_report r;
    EXPECT_TRUE(c->remove(f.docs + "/a.txt", &r));
    EXPECT_EQ(r.removed, 1);
    EXPECT_EQ(r.chunks_removed, in.chunks_added);
    EXPECT_EQ(r.kv_deleted, static_cast<int64_t>(kv_files));
    EXPECT_EQ(f.kv->stats().entries, 0u);
    ingest_report again;
    EXPECT_FALSE(c->remove(f.docs + "/a.txt", &again));
    EXPECT_EQ(again.removed + again.chunks_removed + again.kv_deleted, 0);
}

TEST(IngestLimits, AbortKeepsThePartialReport) {
    fixture f;
    auto c = f.open();
    for (int i = 0; i < 6; ++i) write(f.docs + "/d" + std::to_string(i) + ".txt", prose(i, 40));
    ingest_params p = small_chunks();
    p.progress = [](const ingest_progress& pr) {
        return !(std::string(pr.phase) == "ingest" && pr.done == 4);  // stop before the 5th
    };
    try {
        c->ingest_paths({f.docs}, p);
        FAIL() << "expected an abort";
    } catch (const ingest_aborted& e) {
        EXPECT_EQ(e.code(), status::aborted);
        EXPECT_EQ(e.report.added, 4);
        EXPECT_EQ(e.report.files_seen, 4);
        EXPECT_GT(e.report.chunks_added, 0);
        EXPECT_EQ(e.report.embedded, e.report.chunks_added);
        EXPECT_NE(std::string(e.what()).find("progress callback returned false"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(c->cat().count_documents(), 4);
}
