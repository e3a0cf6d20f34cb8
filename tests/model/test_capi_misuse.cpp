// C API misuse and ingest reports on the real model (issue 17, cases 5 and 6):
//  - a session freed while its own call runs (from its token callback, or from another thread)
//    is released when the call returns: no use-after-free (run under ASan/TSan in CI);
//  - a runtime freed from inside its own ingest progress callback: the call finishes on its own
//    reference;
//  - ingest reports count embedded chunks, deleted chunks and KV files, and what an aborted
//    ingest committed; an interrupt says "interrupted";
//  - the CLI: Ctrl-C prints the partial report and "interrupted" (exit 130), and the per-file
//    limits are flags.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cacheblend.h"
#include "retrieval/catalog.h"
#include "util/cli-runner.h"
#include "util/json.h"
#include "util/test-util.h"

namespace {

using cbltest::shell_quote;
using cbltest::write_file;

const char* k_doc =
    "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, rises 5,895 "
    "metres above sea level and was first climbed in 1889.";

class CapiMisuse : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-misuse-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        data_ = dir_ + "/data";
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = model_.c_str();
        p.data_dir = data_.c_str();
        p.n_threads = 2;
        ASSERT_EQ(cbl_runtime_open(&p, &rt_), CBL_OK) << cbl_last_error();
    }
    void TearDown() override {
        cbl_runtime_free(rt_);
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }
    void ingest_doc() {
        ASSERT_EQ(cbl_runtime_ingest_text(rt_, "mem://kili", k_doc, std::strlen(k_doc), nullptr,
                                          nullptr),
                  CBL_OK)
            << cbl_last_error();
    }
    cbl_session* make_session() {
        cbl_session_params sp;
        cbl_session_params_init(&sp);
        sp.n_ctx = 1024;
        sp.n_threads = 2;
        cbl_session* s = nullptr;
        EXPECT_EQ(cbl_session_create(rt_, &sp, &s), CBL_OK) << cbl_last_error();
        return s;
    }
    std::string make_docs(int n) {
        const std::string docs = dir_ + "/docs";
        ::mkdir(docs.c_str(), 0700);
        for (int i = 0; i < n; ++i) {
            write_file(docs + "/doc" + std::to_string(100 + i) + ".txt",
                       "Document " + std::to_string(i) + " is about lighthouse number " +
                           std::to_string(i * 7) + " on the northern coast.\n");
        }
        return docs;
    }

    std::string model_, dir_, data_;
    cbl_runtime* rt_ = nullptr;
};

struct free_in_callback {
    cbl_session* session = nullptr;
    int tokens = 0;
};

bool free_own_session(const char*, size_t, int32_t, void* user) {
    auto* c = static_cast<free_in_callback*>(user);
    if (c->tokens++ == 0) cbl_session_free(c->session);  // the call is still running on it
    return true;
}

TEST_F(CapiMisuse, SessionFreedFromItsOwnTokenCallbackIsReleasedAfterTheCall) {
    ingest_doc();
    free_in_callback c;
    c.session = make_session();
    ASSERT_NE(c.session, nullptr);
    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.max_tokens = 8;
    ap.on_token = free_own_session;
    ap.user_data = &c;
    cbl_answer* a = nullptr;
    // The free cancels the call: it ends at its next token check (or completes if it was done).
    const cbl_status s = cbl_session_ask(c.session, "Where is Mount Kilimanjaro?", &ap, &a);
    EXPECT_TRUE(s == CBL_ABORTED || s == CBL_OK) << cbl_status_str(s) << ": " << cbl_last_error();
    EXPECT_EQ(c.tokens, 1);
    cbl_answer_free(a);
    // ASan: a use-after-free of the session inside the call fails this test.
}

struct free_from_thread {
    std::atomic<bool> in_call{false}, freed{false};
};

bool wait_for_free(const char*, size_t, int32_t, void* user) {
    auto* c = static_cast<free_from_thread*>(user);
    if (!c->in_call.exchange(true)) {
        while (!c->freed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

TEST_F(CapiMisuse, SessionFreedFromAnotherThreadDuringAskIsReleasedAfterTheCall) {
    ingest_doc();
    cbl_session* s = make_session();
    ASSERT_NE(s, nullptr);
    free_from_thread c;
    cbl_status st = CBL_ERROR;
    cbl_answer* a = nullptr;
    std::thread asker([&] {
        cbl_ask_params ap;
        cbl_ask_params_init(&ap);
        ap.max_tokens = 8;
        ap.on_token = wait_for_free;
        ap.user_data = &c;
        st = cbl_session_ask(s, "Where is Mount Kilimanjaro?", &ap, &a);
    });
    while (!c.in_call.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    cbl_session_free(s);  // the ask is inside its token callback on the other thread
    c.freed.store(true);
    asker.join();
    EXPECT_TRUE(st == CBL_ABORTED || st == CBL_OK) << cbl_status_str(st);
    cbl_answer_free(a);
}

struct free_runtime {
    cbl_runtime** rt = nullptr;
    int reports = 0;
};

bool free_runtime_on_progress(const cbl_progress* p, void* user) {
    auto* c = static_cast<free_runtime*>(user);
    if (std::strcmp(p->phase, "ingest") == 0 && c->reports++ == 1 && *c->rt) {
        cbl_runtime_free(*c->rt);  // the ingest running on it must go on safely
        *c->rt = nullptr;
    }
    return true;
}

TEST_F(CapiMisuse, RuntimeFreedFromItsOwnIngestCallbackFinishesTheCall) {
    const std::string docs = make_docs(3);
    free_runtime c;
    c.rt = &rt_;
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.progress = free_runtime_on_progress;
    ip.progress_user_data = &c;
    cbl_ingest_report r;
    cbl_ingest_report_init(&r);
    cbl_runtime* rt = rt_;
    ASSERT_EQ(cbl_runtime_ingest_path(rt, docs.c_str(), &ip, &r), CBL_OK) << cbl_last_error();
    EXPECT_EQ(rt_, nullptr);
    EXPECT_EQ(r.added, 3);
}

bool free_runtime_on_any_progress(const cbl_progress*, void* user) {
    auto* c = static_cast<free_runtime*>(user);
    if (c->reports++ == 0 && *c->rt) {
        cbl_runtime_free(*c->rt);  // the repair running on it must go on safely
        *c->rt = nullptr;
    }
    return true;
}

// cbl_runtime_repair reads the same progress callback; before it took its own reference, freeing
// the runtime there destroyed it under the running repair (ASan: heap-use-after-free).
TEST_F(CapiMisuse, RuntimeFreedFromItsOwnRepairCallbackFinishesTheCall) {
    ingest_doc();  // no KV yet: a repair with precompute_kv computes it and reports progress
    free_runtime c;
    c.rt = &rt_;
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.precompute_kv = true;
    ip.progress = free_runtime_on_any_progress;
    ip.progress_user_data = &c;
    char* report = nullptr;
    ASSERT_EQ(cbl_runtime_repair(rt_, &ip, &report), CBL_OK) << cbl_last_error();
    EXPECT_GT(c.reports, 0);
    EXPECT_EQ(rt_, nullptr);
    cbl_free(report);
}

struct stop_at {
    int stop = -1;  // return false at this "ingest" report
    cbl_runtime* interrupt = nullptr;
    int reports = 0;
};

bool stop_on_progress(const cbl_progress* p, void* user) {
    auto* c = static_cast<stop_at*>(user);
    if (std::strcmp(p->phase, "ingest") != 0 || c->reports++ != c->stop) return true;
    if (!c->interrupt) return false;
    cbl_runtime_interrupt(c->interrupt);
    return true;
}

TEST_F(CapiMisuse, IngestReportsAreRightAfterAbortInterruptAndDelete) {
    CBL_REQUIRE_DEFAULT_EMBEDDER(emb);
    const std::string docs = make_docs(8);
    stop_at c;
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.progress = stop_on_progress;
    ip.progress_user_data = &c;
    cbl_ingest_report r;
    cbl_ingest_report_init(&r);

    // Stopped by the callback before the 5th file: the 4 committed documents are reported.
    c.stop = 4;
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_ABORTED);
    EXPECT_NE(std::string(cbl_last_error()).find("progress callback returned false"),
              std::string::npos)
        << cbl_last_error();
    EXPECT_TRUE(std::string(cbl_last_error()).rfind("cbl_runtime_ingest_path: ", 0) == 0);
    EXPECT_EQ(r.added, 4);
    EXPECT_GT(r.chunks_added, 0);
    EXPECT_EQ(r.embedded, r.chunks_added);  // chunks embedded within each document count

    // Interrupted (no callback asked to stop): the message says so.
    c = stop_at{};
    c.stop = 2;
    c.interrupt = rt_;
    cbl_ingest_report_init(&r);
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_ABORTED);
    EXPECT_NE(std::string(cbl_last_error()).find("interrupted"), std::string::npos)
        << cbl_last_error();
    EXPECT_EQ(std::string(cbl_last_error()).find("progress callback"), std::string::npos);
    // The interrupt came in the 3rd file's report, so the call stopped at the 4th's.
    EXPECT_EQ(r.unchanged, 3);

    c = stop_at{};
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_OK) << cbl_last_error();
    EXPECT_EQ(r.added, 4);
    EXPECT_EQ(r.unchanged, 4);

    // Delete with counts, after a precompute so the document has KV files.
    ip.precompute_kv = true;
    ip.progress = nullptr;
    ASSERT_EQ(cbl_runtime_ingest_text(rt_, "mem://kili", k_doc, std::strlen(k_doc), &ip, &r),
              CBL_OK)
        << cbl_last_error();
    ASSERT_GT(r.kv_computed, 0);  // every chunk without KV, the folder's too
    ASSERT_EQ(r.chunks_added, 1);
    cbl_ingest_report d;
    cbl_ingest_report_init(&d);
    ASSERT_EQ(cbl_runtime_delete_counted(rt_, "mem://kili", &d), CBL_OK) << cbl_last_error();
    EXPECT_EQ(d.removed, 1);
    EXPECT_EQ(d.chunks_removed, r.chunks_added);
    EXPECT_EQ(d.kv_deleted, 1);  // its one chunk's KV file, no longer referenced
    ASSERT_EQ(cbl_runtime_delete_counted(rt_, "mem://kili", &d), CBL_OK);
    EXPECT_EQ(d.removed, 0);
}

TEST_F(CapiMisuse, IngestLimitsInParams) {
    const std::string docs = make_docs(2);
    write_file(docs + "/big.txt", std::string(5000, 'a') + "\n");
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.max_file_bytes = 4096;
    cbl_ingest_report r;
    cbl_ingest_report_init(&r);
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_OK) << cbl_last_error();
    EXPECT_EQ(r.added, 2);
    EXPECT_EQ(r.skipped, 1);
    ip.max_file_bytes = -1;
    EXPECT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_INVALID_ARG);
    ip.max_file_bytes = 0;
    ip.max_file_seconds = -1;
    EXPECT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_INVALID_ARG);
}

// The CLI, run in the background and sent SIGINT once it has committed something.
TEST_F(CapiMisuse, CliCtrlCPrintsThePartialReportAndSaysInterrupted) {
    // The thread-sanitizer build has no CLI (samples off): the library tests above still run.
    if (!cbltest::file_exists(cbltest::cli_path())) {
        GTEST_SKIP() << "no CLI at " << cbltest::cli_path();
    }
    cbl_runtime_free(rt_);  // the CLI opens the data dir itself
    rt_ = nullptr;
    const std::string docs = make_docs(300);
    const std::string out = dir_ + "/out.json", err = dir_ + "/err.txt";
    const std::string cli = cbltest::cli_path();
    ASSERT_FALSE(cli.empty());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::execl(cli.c_str(), cli.c_str(), "ingest", "--data", data_.c_str(), "--model",
                model_.c_str(), "--threads", "2", "--json", docs.c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // Interrupt once the first document is committed (the CLI handles SIGINT from then on).
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
        struct stat st {};
        if (::stat((data_ + "/catalog.db").c_str(), &st) == 0 &&
            cacheblend::catalog::open(data_ + "/catalog.db")->count_documents() > 0) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGINT);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const std::string e = cbltest::read_all(err);
    ASSERT_TRUE(WIFEXITED(status)) << e;
    EXPECT_EQ(WEXITSTATUS(status), 130) << e;
    EXPECT_NE(e.find("interrupted"), std::string::npos) << e;
    EXPECT_EQ(e.find("progress callback"), std::string::npos) << e;
    const cbltest::json j = cbltest::json::parse(cbltest::read_all(out));
    EXPECT_TRUE(j["interrupted"].b);
    // The report counts exactly what the catalog holds.
    EXPECT_EQ(j["added"].as_int(), j["documents"].as_int());
    EXPECT_LT(j["added"].as_int(), 300);
}

TEST_F(CapiMisuse, CliMaxFileSizeAndSecondsFlags) {
    // The thread-sanitizer build has no CLI (samples off): the library tests above still run.
    if (!cbltest::file_exists(cbltest::cli_path())) {
        GTEST_SKIP() << "no CLI at " << cbltest::cli_path();
    }
    cbl_runtime_free(rt_);
    rt_ = nullptr;
    const std::string docs = make_docs(1);
    write_file(docs + "/big.txt", std::string(3000, 'b') + "\n");
    const std::string err = dir_ + "/err.txt";
    auto r = cbltest::run_cli({"ingest", "--help"}, err);
    EXPECT_NE(r.out.find("--max-file-size"), std::string::npos);
    EXPECT_NE(r.out.find("default 16M"), std::string::npos);
    EXPECT_NE(r.out.find("--max-file-seconds"), std::string::npos);
    r = cbltest::run_cli({"ingest", "--data", data_, "--model", model_, "--json",
                          "--max-file-size", "2K", "--max-file-seconds", "600", docs},
                         err);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const cbltest::json j = cbltest::json::parse(r.out);
    EXPECT_EQ(j["added"].as_int(), 1);
    ASSERT_EQ(j["skipped"].size(), 1u);
    EXPECT_NE(j["skipped"][0]["reason"].str.find("limit 2048"), std::string::npos);
    r = cbltest::run_cli({"ingest", "--data", data_, "--model", model_, "--max-file-size", "2X",
                          docs},
                         err);
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
