// A runtime's admission and memory budget through the C ABI (issue 14, item 1): a call beyond
// max_active_requests + max_queued_requests returns CBL_BUSY at once, a waiting call returns
// CBL_ABORTED when its session is cancelled, a nested call from a token callback runs on its
// caller's turn, and sessions past session_memory_bytes fail with CBL_NOMEM, not an OOM kill.
// Built and run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cacheblend.h"
#include "util/fact-runtime.h"
#include "util/test-util.h"

namespace {

const char* k_question = "Where is Mount Kilimanjaro?";

cbl_ask_params short_ask() {
    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.k = 2;
    ap.max_tokens = 4;
    ap.search_mode = CBL_SEARCH_BM25;
    return ap;
}

cbl_session* make_session(cbl_runtime* rt, int32_t n_ctx = 512) {
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    cbl_session* s = nullptr;
    EXPECT_EQ(cbl_session_create(rt, &sp, &s), CBL_OK) << cbl_last_error();
    return s;
}

// Asks and returns the status; *message gets this thread's error message.
cbl_status ask(cbl_session* s, const cbl_ask_params& ap, std::string* message = nullptr) {
    cbl_answer* a = nullptr;
    const cbl_status st = cbl_session_ask(s, k_question, &ap, &a);
    if (message) *message = st == CBL_OK ? "" : cbl_last_error();
    cbl_answer_free(a);
    return st;
}

// A one-thread runtime that runs one request at a time and lets max_queued wait.
void open_one_slot_runtime(const std::string& model, int32_t max_queued,
                           cbltest::fact_runtime* fr) {
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.n_threads = 1;
    rp.max_active_requests = 1;
    rp.max_queued_requests = max_queued;
    cbltest::open_fact_runtime(model, rp, fr);
}

struct callback_probe {
    cbl_session* other = nullptr;   // asked from another thread during the first token
    cbl_session* nested = nullptr;  // asked on the callback's own thread
    cbl_status other_status = CBL_OK, nested_status = CBL_ERROR;
    std::string other_message;
    bool done = false;
};

TEST(CapiAdmission, AFullRuntimeAnswersBusyAtOnce) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbltest::fact_runtime fr;
    open_one_slot_runtime(model, -1, &fr);  // nobody waits
    ASSERT_NE(fr.rt, nullptr);
    cbl_session* a = make_session(fr.rt);
    cbl_session* b = make_session(fr.rt);
    cbl_session* c = make_session(fr.rt);
    ASSERT_TRUE(a && b && c);

    callback_probe probe;
    probe.other = b;
    probe.nested = c;
    cbl_ask_params ap = short_ask();
    ap.user_data = &probe;
    ap.on_token = [](const char*, size_t, int32_t, void* ud) {
        auto* p = static_cast<callback_probe*>(ud);
        if (p->done) return true;
        p->done = true;
        // While this request holds the only slot, a request from another thread is refused...
        std::thread([p] {
            p->other_status = ask(p->other, short_ask(), &p->other_message);
        }).join();
        // ...and one that this callback starts on another session runs on this turn.
        p->nested_status = ask(p->nested, short_ask());
        return true;
    };
    EXPECT_EQ(ask(a, ap), CBL_OK) << cbl_last_error();
    ASSERT_TRUE(probe.done);
    EXPECT_EQ(probe.other_status, CBL_BUSY);
    EXPECT_NE(probe.other_message.find("runtime busy: 1 requests running and 0 waiting"),
              std::string::npos)
        << probe.other_message;
    EXPECT_EQ(probe.nested_status, CBL_OK);
    EXPECT_STREQ(cbl_status_str(CBL_BUSY), "busy");
    // The slot is free again.
    EXPECT_EQ(ask(b, short_ask()), CBL_OK) << cbl_last_error();
    for (cbl_session* s : {a, b, c}) cbl_session_free(s);
}

TEST(CapiAdmission, AWaitingCallIsCancelledWithItsSession) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbltest::fact_runtime fr;
    open_one_slot_runtime(model, 4, &fr);
    ASSERT_NE(fr.rt, nullptr);
    cbl_session* a = make_session(fr.rt);
    cbl_session* b = make_session(fr.rt);
    ASSERT_TRUE(a && b);
    // A stale cancel (made while b ran nothing) must not abort b's next call.
    cbl_session_cancel(b);

    struct probe_t {
        cbl_session* waiting;
        std::atomic<int> status{-1};
        bool done = false;
    } probe{b};
    cbl_ask_params ap = short_ask();
    ap.user_data = &probe;
    ap.on_token = [](const char*, size_t, int32_t, void* ud) {
        auto* p = static_cast<probe_t*>(ud);
        if (p->done) return true;
        p->done = true;
        // b's ask queues behind this one; cancel it until it gives up (it clears a cancel made
        // before it reached the gate, so keep cancelling), holding the slot all along.
        std::thread t([p] { p->status = ask(p->waiting, short_ask()); });
        for (int i = 0; i < 1000 && p->status.load() < 0; ++i) {
            cbl_session_cancel(p->waiting);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        t.join();
        return true;
    };
    EXPECT_EQ(ask(a, ap), CBL_OK) << cbl_last_error();
    EXPECT_EQ(probe.status.load(), CBL_ABORTED);
    EXPECT_EQ(ask(b, short_ask()), CBL_OK) << cbl_last_error();
    cbl_session_free(a);
    cbl_session_free(b);
}

// A call that waited for its turn says how long (stats.queue_ms, not part of its TTFT); one
// that went in at once says 0.
TEST(CapiAdmission, AQueuedCallReportsItsWait) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbltest::fact_runtime fr;
    open_one_slot_runtime(model, 4, &fr);
    ASSERT_NE(fr.rt, nullptr);
    cbl_session* a = make_session(fr.rt);
    cbl_session* b = make_session(fr.rt);
    ASSERT_TRUE(a && b);
    struct probe_t {
        cbl_session* waiting;
        std::thread t;
        double queue_ms = -1;
        cbl_status status = CBL_ERROR;
        bool done = false;
    } probe{b, {}};
    cbl_ask_params ap = short_ask();
    ap.user_data = &probe;
    ap.on_token = [](const char*, size_t, int32_t, void* ud) {
        auto* p = static_cast<probe_t*>(ud);
        if (p->done) return true;
        p->done = true;
        p->t = std::thread([p] {
            const cbl_ask_params q = short_ask();
            cbl_answer* ans = nullptr;
            p->status = cbl_session_ask(p->waiting, k_question, &q, &ans);
            cbl_stats st;
            cbl_stats_init(&st);
            if (p->status == CBL_OK && cbl_answer_stats(ans, &st) == CBL_OK) {
                p->queue_ms = st.queue_ms;
            }
            cbl_answer_free(ans);
        });
        // Hold the only slot a while: b queues behind it.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return true;
    };
    cbl_answer* first = nullptr;
    ASSERT_EQ(cbl_session_ask(a, k_question, &ap, &first), CBL_OK) << cbl_last_error();
    cbl_stats st;
    cbl_stats_init(&st);
    ASSERT_EQ(cbl_answer_stats(first, &st), CBL_OK);
    EXPECT_EQ(st.queue_ms, 0) << "a went in at once";
    cbl_answer_free(first);
    probe.t.join();
    EXPECT_EQ(probe.status, CBL_OK);
    EXPECT_GE(probe.queue_ms, 100.0) << "b waited for a's turn";
    cbl_session_free(a);
    cbl_session_free(b);
}

// A one-thread runtime whose sessions share a 64 MB budget.
void open_64mb_runtime(const std::string& model, cbltest::fact_runtime* fr) {
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.n_threads = 1;
    rp.session_memory_bytes = 64ull << 20;
    cbltest::open_fact_runtime(model, rp, fr);
}

TEST(CapiAdmission, SessionsPastTheMemoryBudgetFailWithNomem) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbltest::fact_runtime fr;
    open_64mb_runtime(model, &fr);
    ASSERT_NE(fr.rt, nullptr);

    // One session with a long context does not fit at all: the message says what it needed.
    cbl_session_params big;
    cbl_session_params_init(&big);
    big.n_ctx = 8192;
    cbl_session* s = nullptr;
    EXPECT_EQ(cbl_session_create(fr.rt, &big, &s), CBL_NOMEM);
    EXPECT_EQ(s, nullptr);
    const std::string msg = cbl_last_error();
    EXPECT_NE(msg.find("KV cache of 8192 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("session_memory_bytes"), std::string::npos) << msg;

    // Short sessions fit until the budget is spent; the ones made still answer.
    std::vector<cbl_session*> made;
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 512;
    for (int i = 0; i < 16; ++i) {
        cbl_session* x = nullptr;
        const cbl_status st = cbl_session_create(fr.rt, &sp, &x);
        if (st != CBL_OK) {
            EXPECT_EQ(st, CBL_NOMEM) << cbl_last_error();
            EXPECT_NE(std::string(cbl_last_error()).find("other session(s) hold"),
                      std::string::npos)
                << cbl_last_error();
            break;
        }
        made.push_back(x);
    }
    EXPECT_GE(made.size(), 1u);
    EXPECT_LT(made.size(), 16u) << "64 MB held 16 sessions: nothing is accounted";
    ASSERT_FALSE(made.empty());
    EXPECT_EQ(ask(made.back(), short_ask()), CBL_OK) << cbl_last_error();
    // Freeing one gives its memory back.
    cbl_session_free(made.back());
    made.pop_back();
    made.push_back(make_session(fr.rt));
    EXPECT_NE(made.back(), nullptr);
    for (cbl_session* x : made) cbl_session_free(x);
}

// How many 512-token sessions the runtime's budget admits now (all freed again).
size_t sessions_that_fit(cbl_runtime* rt) {
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 512;
    std::vector<cbl_session*> made;
    for (int i = 0; i < 16; ++i) {
        cbl_session* x = nullptr;
        if (cbl_session_create(rt, &sp, &x) != CBL_OK) break;
        made.push_back(x);
    }
    for (cbl_session* x : made) cbl_session_free(x);
    return made.size();
}

TEST(CapiAdmission, IngestPrecomputeFitsTheBudgetAndGivesItBack) {
    CBL_REQUIRE_DEFAULT_MODEL(model);
    cbltest::fact_runtime fr;
    open_64mb_runtime(model, &fr);
    ASSERT_NE(fr.rt, nullptr);
    const size_t before = sessions_that_fit(fr.rt);
    ASSERT_GE(before, 1u) << cbl_last_error();

    // Precompute runs in a session sized to the chunk (a whole-context one, 8192 tokens, would
    // not fit this budget) and frees it when the ingest returns.
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.precompute_kv = true;
    const char* text = "The Rhine flows from the Swiss Alps to the North Sea.";
    ASSERT_EQ(cbl_runtime_ingest_text(fr.rt, "mem://rhine", text, std::strlen(text), &ip, nullptr),
              CBL_OK)
        << cbl_last_error();
    cbl_corpus_stats st;
    cbl_corpus_stats_init(&st);
    ASSERT_EQ(cbl_runtime_stats(fr.rt, &st), CBL_OK);
    EXPECT_EQ(st.kv_entries, 5) << "every chunk without KV is precomputed";
    EXPECT_EQ(sessions_that_fit(fr.rt), before) << "the precompute session still holds memory";
}

}  // namespace
