// Two writers on one data directory (issue: concurrent ingests lost vectors for good, and on a new
// directory one of them failed on a shared temp file). Real processes (fork) ingest different
// folders into the same directory at the same time; both must succeed, one waiting for the other
// (progress phase "wait"), and afterwards catalog, vector index (in memory and on disk) and dense
// search must hold every document. Also: a reader that opened before a writer sees the writer's
// documents in dense search, dead writers' temp files are cleaned up, and the lock file itself
// cannot be hijacked with a symlink.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "core/util/error.h"
#include "retrieval/corpus.h"
#include "retrieval/writer-lock.h"
#include "util/hash-embedder.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::string temp_dir() { return cbltest::make_temp_dir("cbl-conc"); }

bool exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

void write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::unique_ptr<corpus> open_corpus(const std::string& data) {
    corpus_params p;
    p.encode = [](std::string_view s) { return cbltest::word_tokens(s); };
    p.tokenizer_id = "words";
    p.emb = std::make_shared<cbltest::hash_embedder>(32);
    return corpus::open(data, std::move(p));
}

ingest_params small_chunks() {
    ingest_params p;
    p.chunking.max_tokens = 24;
    return p;
}

// n documents of a few chunks each in root/name; every one says "shared words".
std::string make_folder(const std::string& root, const std::string& name, int n) {
    const std::string dir = root + "/" + name;
    ::mkdir(dir.c_str(), 0700);
    for (int i = 0; i < n; ++i) {
        std::string s;
        for (int p = 0; p < 3; ++p) {
            s += name + std::to_string(i) + " paragraph " + std::to_string(p) +
                 " has shared words and unique" + name + std::to_string(i * 10 + p) + ".\n\n";
        }
        write(dir + "/doc" + std::to_string(i) + ".txt", s);
    }
    return dir;
}

// Forks a writer that waits for `go` to exist, then ingests `folder` slowly (a pause per file,
// so the two runs overlap). It exits 0 on success (10 if it had to wait), 1 on error.
// With `handshake`, the overlap does not depend on timing (sanitizers slow process start more
// than the pauses): a writer that meets the lock busy creates `waiting`, and the lock holder does
// not start its first file until that file exists (or 20 s pass: with no lock, neither waits).
pid_t spawn_ingest(const std::string& data, const std::string& folder, const std::string& go,
                   bool handshake) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    int code = 1;
    try {
        while (!exists(go)) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        auto c = open_corpus(data);
        bool waited = false;
        bool first_file = true;
        const std::string waiting = go + ".waiting";
        ingest_params p = small_chunks();
        p.progress = [&](const ingest_progress& pr) {
            if (std::string(pr.phase) == "wait" && !waited) {
                waited = true;
                write(waiting, "");
            }
            if (std::string(pr.phase) == "ingest") {
                if (handshake && first_file) {
                    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                    while (!exists(waiting) && std::chrono::steady_clock::now() < until) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(5));
                    }
                }
                first_file = false;
                std::this_thread::sleep_for(std::chrono::milliseconds(15));
            }
            return true;
        };
        const ingest_report r = c->ingest_paths({folder}, p);
        code = r.added > 0 ? (waited ? 10 : 0) : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child ingest of %s failed: %s\n", folder.c_str(), e.what());
    }
    ::_exit(code);
}

int wait_exit(pid_t pid) {
    int st = 0;
    if (::waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

std::set<std::string> dense_uris(corpus& c) {
    search_params sp;
    sp.k = 1000;
    sp.candidates = 1000;
    sp.mode = search_mode::dense;
    std::set<std::string> out;
    for (const search_hit& h : c.search("shared words", sp).hits) out.insert(h.uri);
    return out;
}

void two_writers(bool existing_dir) {
    const std::string root = temp_dir();
    const std::string data = root + "/data";
    const int n = 8;
    const std::string a = make_folder(root, "alpha", n);
    const std::string b = make_folder(root, "beta", n);
    int expected_docs = 2 * n;
    if (existing_dir) {
        const std::string pre = make_folder(root, "gamma", 4);
        open_corpus(data)->ingest_paths({pre}, small_chunks());
        expected_docs += 4;
    }
    const std::string go = root + "/go";
    // In a new directory the second writer may instead block while its open records the
    // embedder (a write, under the same lock but with no progress callback), so "wait" is seen
    // for sure only in an existing one.
    const pid_t pa = spawn_ingest(data, a, go, existing_dir);
    const pid_t pb = spawn_ingest(data, b, go, existing_dir);
    write(go, "");
    const int ea = wait_exit(pa), eb = wait_exit(pb);
    EXPECT_TRUE(ea == 0 || ea == 10) << "first writer exit " << ea;
    EXPECT_TRUE(eb == 0 || eb == 10) << "second writer exit " << eb;
    if (existing_dir) {
        EXPECT_NE(ea == 10, eb == 10) << "exactly one writer must wait for the other (exits "
                                      << ea << ", " << eb << ")";
    }

    auto c = open_corpus(data);
    EXPECT_EQ(c->cat().count_documents(), expected_docs);
    const consistency_report r = c->check();
    EXPECT_TRUE(r.problems.empty()) << (r.problems.empty() ? "" : r.problems[0]);
    EXPECT_EQ(r.vectors, r.chunks);
    EXPECT_EQ(static_cast<int>(dense_uris(*c).size()), expected_docs);
    c.reset();
    // The saved index is stamped with the version its contents match: reopening uses it as is.
    bool rebuilt = true;
    std::string why;
    open_vector_index(corpus_index_path(data), *catalog::open(corpus_catalog_path(data)), 32, {},
                      &rebuilt, &why);
    EXPECT_FALSE(rebuilt) << why;
    // No temp file is left behind.
    EXPECT_FALSE(exists(corpus_index_path(data) + ".tmp"));
    std::system(("rm -rf " + root).c_str());
}

}  // namespace

TEST(ConcurrentIngest, TwoProcessesIntoAnExistingDirectoryLoseNothing) { two_writers(true); }

TEST(ConcurrentIngest, TwoProcessesIntoANewDirectoryBothSucceed) { two_writers(false); }

TEST(ConcurrentIngest, AnOpenReaderSeesAnotherWritersDocumentsInDenseSearch) {
    const std::string root = temp_dir();
    const std::string data = root + "/data";
    open_corpus(data)->ingest_paths({make_folder(root, "first", 3)}, small_chunks());
    auto reader = open_corpus(data);
    EXPECT_EQ(dense_uris(*reader).size(), 3u);
    {
        auto writer = open_corpus(data);  // another handle: as another process would
        writer->ingest_paths({make_folder(root, "second", 5)}, small_chunks());
        writer->remove(root + "/first/doc0.txt");
    }
    EXPECT_EQ(dense_uris(*reader).size(), 7u);
    std::system(("rm -rf " + root).c_str());
}

TEST(ConcurrentIngest, DeadWritersTempFilesAreRemoved) {
    const std::string root = temp_dir();
    const std::string data = root + "/data";
    ::mkdir(data.c_str(), 0700);
    // What a writer killed between create and rename leaves (old and new naming).
    write(corpus_index_path(data) + ".tmp", "partial");
    write(corpus_index_path(data) + ".tmp.999999.0", "partial");
    open_corpus(data)->ingest_paths({make_folder(root, "docs", 2)}, small_chunks());
    EXPECT_FALSE(exists(corpus_index_path(data) + ".tmp"));
    EXPECT_FALSE(exists(corpus_index_path(data) + ".tmp.999999.0"));
    std::system(("rm -rf " + root).c_str());
}

TEST(WriterLock, ExcludesAnotherHolderAndReportsWhoHoldsIt) {
    const std::string dir = temp_dir();
    auto held = writer_lock::acquire(dir);
    ASSERT_NE(held, nullptr);
    EXPECT_EQ(writer_lock::try_acquire(dir), nullptr);  // another open file description
    std::string holder;
    int calls = 0;
    EXPECT_THROW(
        {
            try {
                writer_lock::acquire(dir, [&](const std::string& h, bool first) {
                    if (first) holder = h;
                    return ++calls < 3;
                });
            } catch (const error& e) {
                EXPECT_EQ(e.code(), status::aborted);
                throw;
            }
        },
        error);
    EXPECT_EQ(holder, "pid " + std::to_string(::getpid()));
    held.reset();
    EXPECT_NE(writer_lock::try_acquire(dir), nullptr);
    std::system(("rm -rf " + dir).c_str());
}

TEST(WriterLock, ASymlinkOrFifoAtTheLockPathIsRefused) {
    const std::string dir = temp_dir();
    const std::string target = dir + "/elsewhere";
    write(target, "keep me");
    ASSERT_EQ(::symlink(target.c_str(), writer_lock_path(dir).c_str()), 0);
    EXPECT_THROW(writer_lock::acquire(dir), error);
    std::ifstream in(target);
    std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(kept, "keep me");
    ::unlink(writer_lock_path(dir).c_str());
    ASSERT_EQ(::mkfifo(writer_lock_path(dir).c_str(), 0600), 0);
    EXPECT_THROW(writer_lock::acquire(dir), error);  // and does not hang
    std::system(("rm -rf " + dir).c_str());
}
