// Eight threads share one runtime through the C ABI (docs/ARCHITECTURE.md, 'Threading and
// ownership'): each has its own session and asks, searches, ingests and deletes while the others
// do, two of them also fight over one shared session (every call either runs or returns
// CBL_MISUSE), and each thread's error message stays its own. Built and run under ThreadSanitizer
// by scripts/test.sh --tsan.
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cacheblend.h"
#include "util/fact-runtime.h"
#include "util/test-util.h"

namespace {

constexpr int k_threads = 8;

using cbltest::k_facts;

TEST(CapiThreads, EightThreadsShareOneRuntime) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.n_threads = 1;
    cbltest::fact_runtime fr;
    cbltest::open_fact_runtime(model, rp, &fr);
    ASSERT_NE(fr.rt, nullptr);
    cbl_runtime* rt = fr.rt;
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 512;
    sp.n_threads = 1;
    cbl_session* shared = nullptr;
    ASSERT_EQ(cbl_session_create(rt, &sp, &shared), CBL_OK) << cbl_last_error();

    std::atomic<int> failures{0}, shared_ok{0}, shared_misuse{0}, shared_aborted{0};
    std::vector<std::string> errors(k_threads);
    auto fail = [&](int t, const std::string& what) {
        ++failures;
        errors[static_cast<size_t>(t)] = what + ": " + cbl_last_error();
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < k_threads; ++t) {
        threads.emplace_back([&, t] {
            cbl_session* s = nullptr;
            if (cbl_session_create(rt, &sp, &s) != CBL_OK) return fail(t, "session");
            cbl_ask_params ap;
            cbl_ask_params_init(&ap);
            ap.k = 1;
            ap.max_tokens = 2;
            ap.search_mode = CBL_SEARCH_BM25;
            cbl_answer* a = nullptr;
            if (cbl_session_ask(s, k_facts[t % 4], &ap, &a) != CBL_OK) return fail(t, "ask");
            if (cbl_answer_n_citations(a) != 1) return fail(t, "citations");
            cbl_answer_free(a);

            cbl_search_params q;
            cbl_search_params_init(&q);
            q.k = 3;
            cbl_results* res = nullptr;
            if (cbl_runtime_search(rt, "volcano", &q, &res) != CBL_OK) return fail(t, "search");
            cbl_results_free(res);

            // Writers next to the readers: each thread adds and removes its own document.
            const std::string uri = "mem://thread" + std::to_string(t);
            const std::string text = "Thread " + std::to_string(t) + " wrote about harbours.";
            if (cbl_runtime_ingest_text(rt, uri.c_str(), text.data(), text.size(), nullptr,
                                        nullptr) != CBL_OK) {
                return fail(t, "ingest");
            }
            bool found = false;
            if (t % 2 == 0 && (cbl_runtime_delete(rt, uri.c_str(), &found) != CBL_OK || !found)) {
                return fail(t, "delete");
            }

            // The shared session serves one call at a time.
            for (int i = 0; i < 2; ++i) {
                cbl_answer* sa = nullptr;
                const cbl_status st = cbl_session_ask(shared, "Where is the Amazon?", &ap, &sa);
                if (st == CBL_OK) {
                    ++shared_ok;
                } else if (st == CBL_MISUSE) {
                    ++shared_misuse;
                } else if (st == CBL_ABORTED) {
                    ++shared_aborted;  // another thread's cancel landed in this call
                } else {
                    return fail(t, "shared ask");
                }
                cbl_answer_free(sa);
            }
            if (t % 3 == 0) cbl_session_cancel(shared);  // cancels from any thread are safe

            // Each thread's last error is its own.
            const std::string bad = "tpu" + std::to_string(t);
            cbl_runtime_params bp;
            cbl_runtime_params_init(&bp);
            bp.device = bad.c_str();
            cbl_runtime* none = nullptr;
            if (cbl_runtime_open(&bp, &none) != CBL_INVALID_ARG) return fail(t, "bad device");
            std::this_thread::yield();
            if (std::strstr(cbl_last_error(), bad.c_str()) == nullptr) {
                return fail(t, "thread-local message");
            }
            cbl_session_free(s);
        });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < k_threads; ++t) {
        EXPECT_TRUE(errors[static_cast<size_t>(t)].empty()) << "thread " << t << ": " << errors[static_cast<size_t>(t)];
    }
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(shared_ok.load() + shared_misuse.load() + shared_aborted.load(), 2 * k_threads);
    // Whether any of those calls got through depends on scheduling (on a loaded machine every
    // one may meet a busy session or a cancel); what must hold is that the session still serves a
    // call once the others are gone.
    {
        cbl_ask_params ap;
        cbl_ask_params_init(&ap);
        ap.k = 1;
        ap.max_tokens = 2;
        ap.search_mode = CBL_SEARCH_BM25;
        cbl_answer* sa = nullptr;
        EXPECT_EQ(cbl_session_ask(shared, "Where is the Amazon?", &ap, &sa), CBL_OK) << cbl_last_error();
        cbl_answer_free(sa);
    }

    // Odd threads' documents stay, even threads' are gone.
    cbl_search_params q;
    cbl_search_params_init(&q);
    q.k = 20;
    q.mode = CBL_SEARCH_BM25;
    q.uri_prefix = "mem://thread";
    cbl_results* res = nullptr;
    ASSERT_EQ(cbl_runtime_search(rt, "harbours", &q, &res), CBL_OK);
    EXPECT_EQ(cbl_results_count(res), static_cast<size_t>(k_threads / 2));
    cbl_results_free(res);

    cbl_session_free(shared);
}

}  // namespace

namespace {

// Threads of this process, from /proc/self/task.
int count_threads() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/task")) {
        while (const dirent* e = ::readdir(d)) {
            if (e->d_name[0] != '.') ++n;
        }
        ::closedir(d);
    }
    return n;
}

// One thread pool per runtime (issue 14, item 1): sessions made with the runtime's thread count
// start no compute threads of their own, and four of them asking at once on those shared threads
// (taking turns per job) answer exactly what one session answers alone; a session asking for
// another thread count gets a pool of its own.
TEST(CapiThreads, SessionsShareTheRuntimesThreadPool) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.n_threads = 2;
    cbltest::fact_runtime fr;
    cbltest::open_fact_runtime(model, rp, &fr);
    ASSERT_NE(fr.rt, nullptr);
    cbl_runtime* rt = fr.rt;
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 512;  // n_threads 0: the runtime's
    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.k = 2;
    ap.max_tokens = 4;
    ap.search_mode = CBL_SEARCH_BM25;
    const char* question = "Where is Mount Kilimanjaro?";

    const int before = count_threads();
    constexpr int k_sessions = 4;
    cbl_session* sessions[k_sessions] = {};
    for (auto& s : sessions) ASSERT_EQ(cbl_session_create(rt, &sp, &s), CBL_OK) << cbl_last_error();
    EXPECT_EQ(count_threads(), before) << "sessions started compute threads of their own";

    auto ask = [&](cbl_session* s, std::string* text) {
        cbl_answer* a = nullptr;
        if (cbl_session_ask(s, question, &ap, &a) != CBL_OK) return false;
        *text = cbl_answer_text(a);
        cbl_answer_free(a);
        return true;
    };
    std::string alone;
    ASSERT_TRUE(ask(sessions[0], &alone)) << cbl_last_error();
    ASSERT_FALSE(alone.empty());
    std::string texts[k_sessions];
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < k_sessions; ++i) {
        threads.emplace_back([&, i] {
            if (!ask(sessions[i], &texts[i])) ++failed;
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failed.load(), 0);
    for (const std::string& t : texts) EXPECT_EQ(t, alone) << "a shared pool changed an answer";

    cbl_session_params own = sp;
    own.n_threads = 3;
    cbl_session* separate = nullptr;
    ASSERT_EQ(cbl_session_create(rt, &own, &separate), CBL_OK) << cbl_last_error();
    EXPECT_EQ(count_threads(), before + 2) << "a 3-thread session has its own two workers";
    cbl_session_free(separate);
    for (cbl_session* s : sessions) cbl_session_free(s);
}

}  // namespace
