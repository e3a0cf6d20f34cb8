// The C ABI end to end on the real default model (docs/ARCHITECTURE.md, 'C ABI', issue 5): open a
// runtime in a temporary data directory, ingest text and a folder, search, ask with streaming, the
// lower-level prefill_chunks + generate, and the misuse cases: NULL arguments, old and new params
// structs, concurrent calls on one session, callbacks calling back in, cancel from another thread
// and from a callback, interrupting an ingest, freeing parents before children.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cacheblend.h"
#include "util/capi-generate.h"
#include "util/cli-runner.h"
#include "util/test-util.h"

namespace {

using cbltest::shell_quote;
using cbltest::write_file;

const char* k_docs[][2] = {
    {"mem://amazon", "The Amazon river flows through Brazil, Peru and Colombia. It carries more "
                     "water than any other river on Earth."},
    {"mem://kilimanjaro", "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, "
                          "Uhuru, rises 5,895 metres above sea level and was first climbed in 1889."},
    {"mem://sourdough", "Sourdough bread is leavened by a culture of wild yeast and lactic acid "
                        "bacteria. The dough rises slowly, which gives the bread its sour taste."},
};

class CapiRuntime : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = path;
        char tmpl[] = "/tmp/cbl-capi-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        ASSERT_NE(d, nullptr);
        dir_ = d;
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = model_.c_str();
        const std::string data = dir_ + "/data";
        p.data_dir = data.c_str();
        p.n_threads = 2;
        ASSERT_EQ(cbl_runtime_open(&p, &rt_), CBL_OK) << cbl_last_error();
        for (const auto& doc : k_docs) {
            cbl_ingest_params ip;
            cbl_ingest_params_init(&ip);
            ip.collection = "facts";
            ASSERT_EQ(cbl_runtime_ingest_text(rt_, doc[0], doc[1], std::strlen(doc[1]), &ip, nullptr),
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

    cbl_session* make_session(int32_t mode = CBL_MODE_DEFAULT, float ratio = 0.f,
                              int32_t kv_format = CBL_KV_DEFAULT) {
        cbl_session_params sp;
        cbl_session_params_init(&sp);
        sp.n_ctx = 1024;
        sp.n_threads = 2;
        sp.mode = mode;
        sp.recompute_ratio = ratio;
        sp.kv_format = kv_format;
        cbl_session* s = nullptr;
        EXPECT_EQ(cbl_session_create(rt_, &sp, &s), CBL_OK) << cbl_last_error();
        return s;
    }

    static cbl_ask_params ask_params(int32_t max_tokens = 8) {
        cbl_ask_params ap;
        cbl_ask_params_init(&ap);
        ap.k = 2;
        ap.max_tokens = max_tokens;
        return ap;
    }

    std::string model_, dir_;
    cbl_runtime* rt_ = nullptr;
};

TEST_F(CapiRuntime, SearchFindsTheMatchingDocumentWithCitationAndFilters) {
    cbl_search_params sp;
    cbl_search_params_init(&sp);
    sp.k = 3;
    sp.mode = CBL_SEARCH_BM25;
    cbl_results* res = nullptr;
    ASSERT_EQ(cbl_runtime_search(rt_, "volcano in Tanzania", &sp, &res), CBL_OK) << cbl_last_error();
    ASSERT_GE(cbl_results_count(res), 1u);
    cbl_hit h;
    cbl_hit_init(&h);
    ASSERT_EQ(cbl_results_hit(res, 0, &h), CBL_OK);
    EXPECT_STREQ(h.uri, "mem://kilimanjaro");
    EXPECT_EQ(h.start, 0);
    EXPECT_EQ(h.end, static_cast<int64_t>(std::strlen(k_docs[1][1])));
    EXPECT_EQ(std::string(h.text, h.text_len), k_docs[1][1]);
    EXPECT_GT(h.n_tokens, 10);
    EXPECT_EQ(cbl_results_hit(res, 99, &h), CBL_RANGE);
    cbl_results_free(res);

    sp.collection = "other";
    ASSERT_EQ(cbl_runtime_search(rt_, "volcano in Tanzania", &sp, &res), CBL_OK);
    EXPECT_EQ(cbl_results_count(res), 0u);
    cbl_results_free(res);
    sp.collection = nullptr;
    sp.uri_prefix = "mem://amaz";
    ASSERT_EQ(cbl_runtime_search(rt_, "river", &sp, &res), CBL_OK);
    ASSERT_EQ(cbl_results_count(res), 1u);
    ASSERT_EQ(cbl_results_hit(res, 0, &h), CBL_OK);
    EXPECT_STREQ(h.uri, "mem://amazon");
    cbl_results_free(res);

    sp.mode = 99;
    EXPECT_EQ(cbl_runtime_search(rt_, "river", &sp, &res), CBL_INVALID_ARG);
    EXPECT_EQ(res, nullptr);
    EXPECT_NE(std::strstr(cbl_last_error(), "search mode"), nullptr) << cbl_last_error();
}

struct stream_capture {
    std::string text;
    int calls = 0;
    int stop_after = -1;  // return false after this many tokens
    cbl_session* cancel = nullptr;  // cancel this session at the first token
    cbl_session* reenter = nullptr;  // call ask on this session from inside the callback
    cbl_status reenter_status = CBL_OK;
};

bool on_token(const char* piece, size_t len, int32_t, void* user) {
    auto* c = static_cast<stream_capture*>(user);
    c->text.append(piece, len);
    ++c->calls;
    if (c->cancel) cbl_session_cancel(c->cancel);
    if (c->reenter) {
        cbl_answer* a = reinterpret_cast<cbl_answer*>(1);
        cbl_ask_params ap;
        cbl_ask_params_init(&ap);
        c->reenter_status = cbl_session_ask(c->reenter, "Where is Kilimanjaro?", &ap, &a);
        if (a) c->reenter_status = CBL_INTERNAL;  // out handle must be NULL on failure
        c->reenter = nullptr;
    }
    return c->stop_after < 0 || c->calls < c->stop_after;
}

TEST_F(CapiRuntime, AskStreamsTheAnswerWithCitationsAndReusesChunkKvNextTime) {
    cbl_session* s = make_session();
    ASSERT_NE(s, nullptr);
    stream_capture cap;
    cbl_ask_params ap = ask_params(12);
    ap.on_token = on_token;
    ap.user_data = &cap;
    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_ask(s, "Where is Mount Kilimanjaro?", &ap, &a), CBL_OK) << cbl_last_error();
    EXPECT_FALSE(std::string(cbl_answer_text(a)).empty());
    EXPECT_EQ(cap.text, cbl_answer_text(a));
    ASSERT_GE(cbl_answer_n_citations(a), 1u);
    cbl_hit h;
    cbl_hit_init(&h);
    ASSERT_EQ(cbl_answer_citation(a, 0, &h), CBL_OK);
    EXPECT_STREQ(h.uri, "mem://kilimanjaro");
    EXPECT_EQ(cbl_answer_citation(a, 50, &h), CBL_RANGE);
    cbl_stats st;
    cbl_stats_init(&st);
    ASSERT_EQ(cbl_answer_stats(a, &st), CBL_OK);
    EXPECT_EQ(st.mode, CBL_MODE_BLEND);
    EXPECT_GT(st.prompt_tokens, 40);
    EXPECT_EQ(st.chunks_used, static_cast<int32_t>(cbl_answer_n_citations(a)));
    EXPECT_EQ(st.chunks_missed, st.chunks_used);  // nothing precomputed: computed and stored
    EXPECT_EQ(st.generated_tokens, cap.calls);
    EXPECT_GT(st.ttft_ms, 0.0);
    EXPECT_TRUE(st.stop_reason == CBL_STOP_EOG || st.stop_reason == CBL_STOP_LENGTH);
    cbl_answer_free(a);

    // The same question again: every chunk's KV comes from the store now.
    ASSERT_EQ(cbl_session_ask(s, "Where is Mount Kilimanjaro?", &ap, &a), CBL_OK) << cbl_last_error();
    ASSERT_EQ(cbl_answer_stats(a, &st), CBL_OK);
    EXPECT_EQ(st.chunks_missed, 0);
    EXPECT_EQ(st.chunks_hit, st.chunks_used);
    EXPECT_GT(st.tokens_reused, 0);
    EXPECT_GT(st.tokens_recomputed, 0);
    EXPECT_GT(st.bytes_loaded, 0u);
    cbl_answer_free(a);
    cbl_session_free(s);
}

TEST_F(CapiRuntime, CallbackStopsCancelsAndCannotReenterItsSession) {
    cbl_session* s = make_session();
    stream_capture stop;
    stop.stop_after = 2;
    cbl_ask_params ap = ask_params(32);
    ap.on_token = on_token;
    ap.user_data = &stop;
    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_ask(s, "Tell me about sourdough bread.", &ap, &a), CBL_OK) << cbl_last_error();
    cbl_stats st;
    cbl_stats_init(&st);
    ASSERT_EQ(cbl_answer_stats(a, &st), CBL_OK);
    if (st.stop_reason != CBL_STOP_EOG) {  // unless the model stopped on its own first
        EXPECT_EQ(st.stop_reason, CBL_STOP_CALLBACK);
        EXPECT_EQ(stop.calls, 2);
    }
    cbl_answer_free(a);

    stream_capture reenter;
    reenter.reenter = s;
    ap.user_data = &reenter;
    ASSERT_EQ(cbl_session_ask(s, "Tell me about sourdough bread.", &ap, &a), CBL_OK) << cbl_last_error();
    EXPECT_EQ(reenter.reenter_status, CBL_MISUSE);
    cbl_answer_free(a);

    stream_capture cancel;
    cancel.cancel = s;
    ap.user_data = &cancel;
    a = reinterpret_cast<cbl_answer*>(1);
    EXPECT_EQ(cbl_session_ask(s, "Tell me about sourdough bread.", &ap, &a), CBL_ABORTED);
    EXPECT_EQ(a, nullptr);
    EXPECT_EQ(cancel.calls, 1);

    // A cancel belongs to the call it interrupted: the next call runs normally.
    ap.on_token = nullptr;
    ASSERT_EQ(cbl_session_ask(s, "Tell me about sourdough bread.", &ap, &a), CBL_OK) << cbl_last_error();
    cbl_answer_free(a);
    cbl_session_free(s);
}

TEST_F(CapiRuntime, ConcurrentCallOnOneSessionIsMisuse) {
    // The first token's callback starts a second thread that calls into the same session while
    // the first call is still running.
    struct probe {
        cbl_session* s;
        cbl_status second = CBL_OK;
        bool done = false;
    } pr{make_session()};
    cbl_ask_params ap = ask_params(4);
    ap.user_data = &pr;
    ap.on_token = [](const char*, size_t, int32_t, void* user) {
        auto* p = static_cast<probe*>(user);
        if (!p->done) {
            std::thread t([p] {
                cbl_answer* a = nullptr;
                cbl_ask_params ap2;
                cbl_ask_params_init(&ap2);
                p->second = cbl_session_ask(p->s, "Where is the Amazon?", &ap2, &a);
                cbl_answer_free(a);
            });
            t.join();
            p->done = true;
        }
        return true;
    };
    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_ask(pr.s, "Where is Mount Kilimanjaro?", &ap, &a), CBL_OK) << cbl_last_error();
    EXPECT_TRUE(pr.done);
    EXPECT_EQ(pr.second, CBL_MISUSE);
    cbl_answer_free(a);
    // The session is free again afterwards.
    ap.on_token = nullptr;
    ASSERT_EQ(cbl_session_ask(pr.s, "Where is Mount Kilimanjaro?", &ap, &a), CBL_OK) << cbl_last_error();
    cbl_answer_free(a);
    cbl_session_free(pr.s);
}

TEST_F(CapiRuntime, CancelFromAnotherThreadAbortsTheRunningCall) {
    cbl_session* s = make_session(CBL_MODE_FULL);
    std::atomic<bool> done{false};
    std::atomic<cbl_status> result{CBL_OK};
    std::thread worker([&] {
        cbl_ask_params ap = ask_params(200);
        ap.k = 3;
        // A cancel that lands between two calls is dropped by the next one: try a few times.
        for (int i = 0; i < 20 && result.load() == CBL_OK; ++i) {
            cbl_answer* a = reinterpret_cast<cbl_answer*>(1);
            const cbl_status st = cbl_session_ask(s, "What do we know about rivers and bread?", &ap, &a);
            if (st != CBL_OK) {
                EXPECT_EQ(a, nullptr);
                result = st;
            }
            if (st == CBL_OK) cbl_answer_free(a);
        }
        done = true;
    });
    while (!done) {
        cbl_session_cancel(s);  // any thread, any time
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    worker.join();
    EXPECT_EQ(result.load(), CBL_ABORTED);
    cbl_session_free(s);
}

TEST_F(CapiRuntime, PrefillChunksThenGenerateMatchesFullAtRatioOne) {
    const char* chunks[] = {k_docs[0][1], k_docs[1][1], k_docs[2][1]};
    const char* q = "Which river carries the most water?";
    std::string texts[2];
    const int32_t modes[2] = {CBL_MODE_FULL, CBL_MODE_BLEND};
    for (int i = 0; i < 2; ++i) {
        cbl_session* s = make_session(modes[i], 1.0f);
        // Twice: the second blended run reuses the stored KV and recomputes every token (r = 1).
        for (int rep = 0; rep < 2; ++rep) {
            cbl_stats st;
            cbl_stats_init(&st);
            ASSERT_EQ(cbl_session_prefill_chunks(s, chunks, nullptr, 3, q, &st), CBL_OK) << cbl_last_error();
            if (i == 1 && rep == 1) EXPECT_EQ(st.chunks_hit, 3);
            cbl_generate_params gp;
            cbl_generate_params_init(&gp);
            gp.max_tokens = 10;
            cbl_answer* a = nullptr;
            ASSERT_EQ(cbl_session_generate(s, &gp, &a), CBL_OK) << cbl_last_error();
            texts[i] = cbl_answer_text(a);
            cbl_answer_free(a);
            EXPECT_EQ(cbl_session_generate(s, &gp, &a), CBL_MISUSE);  // once per prefill
            EXPECT_EQ(a, nullptr);
        }
        cbl_session_free(s);
    }
    EXPECT_FALSE(texts[0].empty());
    EXPECT_EQ(texts[0], texts[1]);
}

// CBL_KV_EXACT keeps K in f32: prefix mode over a stored first chunk is full prefill bit for bit
// (tests/model/test_blend.cpp checks the cache and logits), so the answers are the same text.
TEST_F(CapiRuntime, ExactKvFormatPrefixAnswersLikeFull) {
    const char* chunks[] = {k_docs[2][1], k_docs[0][1], k_docs[1][1]};
    const char* q = "Which river carries the most water?";
    std::string texts[2];
    const int32_t modes[2] = {CBL_MODE_FULL, CBL_MODE_PREFIX};
    for (int i = 0; i < 2; ++i) {
        cbl_session* s = make_session(modes[i], 0.f, CBL_KV_EXACT);
        for (int rep = 0; rep < 2; ++rep) {  // the first prefix run stores its miss
            cbl_stats st;
            cbl_stats_init(&st);
            ASSERT_EQ(cbl_session_prefill_chunks(s, chunks, nullptr, 3, q, &st), CBL_OK) << cbl_last_error();
            if (i == 1) EXPECT_EQ(st.chunks_hit, rep);
        }
        cbl_generate_params gp;
        cbl_generate_params_init(&gp);
        gp.max_tokens = 16;
        cbl_answer* a = nullptr;
        ASSERT_EQ(cbl_session_generate(s, &gp, &a), CBL_OK) << cbl_last_error();
        texts[i] = cbl_answer_text(a);
        cbl_answer_free(a);
        cbl_session_free(s);
    }
    EXPECT_FALSE(texts[0].empty());
    EXPECT_EQ(texts[0], texts[1]);
}

TEST_F(CapiRuntime, SessionOverOwnModelAndStoreServesPrefillChunksOnly) {
    cbl_model* m = nullptr;
    ASSERT_EQ(cbl_runtime_model(rt_, &m), CBL_OK);
    cbl_kvstore* kv = nullptr;
    ASSERT_EQ(cbl_kvstore_open((dir_ + "/own-kv").c_str(), nullptr, &kv), CBL_OK) << cbl_last_error();
    cbl_session* s = nullptr;
    ASSERT_EQ(cbl_session_create_with(m, kv, nullptr, &s), CBL_OK) << cbl_last_error();
    // Parents may go first: the session holds its own references.
    cbl_model_free(m);
    cbl_kvstore_free(kv);
    cbl_answer* a = nullptr;
    EXPECT_EQ(cbl_session_ask(s, "Where?", nullptr, &a), CBL_INVALID_ARG);
    const char* chunk = k_docs[1][1];
    const size_t len = std::strlen(chunk);
    ASSERT_EQ(cbl_session_prefill_chunks(s, &chunk, &len, 1, "How high is Uhuru?", nullptr), CBL_OK)
        << cbl_last_error();
    ASSERT_EQ(cbl_session_generate(s, nullptr, &a), CBL_OK) << cbl_last_error();
    cbl_answer_free(a);
    const char* blank = "   ";
    EXPECT_EQ(cbl_session_prefill_chunks(s, &blank, nullptr, 1, "q?", nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_session_prefill_chunks(s, &chunk, nullptr, 1, "", nullptr), CBL_INVALID_ARG);
    cbl_session_free(s);
}

TEST_F(CapiRuntime, FreeingTheRuntimeFirstKeepsItsSessionsWorking) {
    cbl_session* s = make_session();
    cbl_runtime_free(rt_);
    rt_ = nullptr;
    cbl_answer* a = nullptr;
    cbl_ask_params ap = ask_params(4);
    ASSERT_EQ(cbl_session_ask(s, "Where is Mount Kilimanjaro?", &ap, &a), CBL_OK) << cbl_last_error();
    cbl_answer_free(a);
    cbl_session_free(s);
}

struct progress_log {
    std::vector<std::string> phases, skipped;
    std::vector<std::string> reasons;
    int stop_at_ingest = -1;  // return false at this "ingest" report
    cbl_runtime* interrupt = nullptr;
    int ingest_reports = 0;
};

bool on_progress(const cbl_progress* p, void* user) {
    auto* log = static_cast<progress_log*>(user);
    log->phases.emplace_back(p->phase);
    if (std::strcmp(p->phase, "skip") == 0) {
        log->skipped.emplace_back(p->current);
        log->reasons.emplace_back(p->message);
    }
    if (std::strcmp(p->phase, "ingest") == 0 && log->ingest_reports++ == log->stop_at_ingest) {
        if (log->interrupt) {
            cbl_runtime_interrupt(log->interrupt);
            return true;
        }
        return false;
    }
    return true;
}

TEST_F(CapiRuntime, IngestFolderReportsSkipsAndCanBeAbortedOrInterrupted) {
    const std::string docs = dir_ + "/docs";
    ASSERT_EQ(std::system(("mkdir -p " + shell_quote(docs)).c_str()), 0);
    for (int i = 0; i < 4; ++i) {
        write_file(docs + "/doc" + std::to_string(i) + ".txt",
                   "Document number " + std::to_string(i) + " talks about lighthouses.\n");
    }
    write_file(docs + "/bad.txt", std::string("invalid \x81\x9d utf-8\n"));
    progress_log log;
    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.progress = on_progress;
    ip.progress_user_data = &log;
    cbl_ingest_report r;
    cbl_ingest_report_init(&r);
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_OK) << cbl_last_error();
    EXPECT_EQ(r.added, 4);
    EXPECT_EQ(r.skipped, 1);
    ASSERT_EQ(log.skipped.size(), 1u);
    EXPECT_NE(log.skipped[0].find("bad.txt"), std::string::npos);
    EXPECT_FALSE(log.reasons[0].empty());

    // Unchanged files are skipped by content hash.
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_OK);
    EXPECT_EQ(r.added, 0);
    EXPECT_EQ(r.unchanged, 4);

    // Aborted by the callback, then by an interrupt: committed documents stay, a re-run finishes.
    for (int i = 4; i < 8; ++i) {
        write_file(docs + "/doc" + std::to_string(i) + ".txt",
                   "Document number " + std::to_string(i) + " talks about harbours.\n");
    }
    log = progress_log{};
    log.stop_at_ingest = 1;
    EXPECT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_ABORTED);
    log = progress_log{};
    log.stop_at_ingest = 2;
    log.interrupt = rt_;
    EXPECT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_ABORTED);
    log = progress_log{};
    ASSERT_EQ(cbl_runtime_ingest_path(rt_, docs.c_str(), &ip, &r), CBL_OK) << cbl_last_error();
    EXPECT_EQ(r.added + r.unchanged, 8);
    EXPECT_GE(r.unchanged, 4);
    cbl_search_params sp;
    cbl_search_params_init(&sp);
    sp.k = 20;
    sp.mode = CBL_SEARCH_BM25;
    sp.uri_prefix = docs.c_str();
    cbl_results* res = nullptr;
    ASSERT_EQ(cbl_runtime_search(rt_, "Document number", &sp, &res), CBL_OK);
    EXPECT_EQ(cbl_results_count(res), 8u);  // nothing lost or duplicated
    cbl_results_free(res);

    bool found = false;
    ASSERT_EQ(cbl_runtime_delete(rt_, (docs + "/doc0.txt").c_str(), &found), CBL_OK);
    EXPECT_TRUE(found);
    ASSERT_EQ(cbl_runtime_delete(rt_, (docs + "/doc0.txt").c_str(), &found), CBL_OK);
    EXPECT_FALSE(found);
}

TEST_F(CapiRuntime, ParamsStructsOldNewAndInvalid) {
    // An older caller's struct that ends before n_ctx: every later field takes its default.
    cbl_session_params old;
    cbl_session_params_init(&old);
    old.n_threads = 1;
    old.mode = 42;  // beyond the old struct: must not be read
    old.struct_size = offsetof(cbl_session_params, n_ctx);
    cbl_session* s = nullptr;
    ASSERT_EQ(cbl_session_create(rt_, &old, &s), CBL_OK) << cbl_last_error();
    cbl_session_free(s);

    // A newer caller's struct with a field this library does not know.
    struct newer {
        cbl_session_params p;
        int64_t future;
    } n{};
    cbl_session_params_init(&n.p);
    n.p.struct_size = sizeof(n);
    ASSERT_EQ(cbl_session_create(rt_, &n.p, &s), CBL_OK) << "zero unknown fields are fine";
    cbl_session_free(s);
    n.future = 7;
    s = reinterpret_cast<cbl_session*>(1);
    EXPECT_EQ(cbl_session_create(rt_, &n.p, &s), CBL_UNSUPPORTED);
    EXPECT_EQ(s, nullptr);

    cbl_session_params bad;
    cbl_session_params_init(&bad);
    bad.struct_size = 0;
    EXPECT_EQ(cbl_session_create(rt_, &bad, &s), CBL_INVALID_ARG);
    cbl_session_params_init(&bad);
    bad.recompute_ratio = 1.5f;
    EXPECT_EQ(cbl_session_create(rt_, &bad, &s), CBL_INVALID_ARG);
    cbl_session_params_init(&bad);
    bad.n_ctx = 1 << 30;
    EXPECT_EQ(cbl_session_create(rt_, &bad, &s), CBL_INVALID_ARG);
    cbl_session_params_init(&bad);
    bad.kv_format = 9;
    EXPECT_EQ(cbl_session_create(rt_, &bad, &s), CBL_INVALID_ARG);

    // An output struct from an older caller gets only the fields it has.
    cbl_session* ok = make_session();
    cbl_answer* a = nullptr;
    cbl_ask_params ap = ask_params(2);
    ASSERT_EQ(cbl_session_ask(ok, "Where is the Amazon?", &ap, &a), CBL_OK) << cbl_last_error();
    cbl_stats small;
    std::memset(&small, 0xab, sizeof(small));
    small.struct_size = offsetof(cbl_stats, prefill_ms);
    ASSERT_EQ(cbl_answer_stats(a, &small), CBL_OK);
    EXPECT_EQ(small.mode, CBL_MODE_BLEND);
    double untouched;
    std::memset(&untouched, 0xab, sizeof(untouched));
    EXPECT_EQ(std::memcmp(&small.prefill_ms, &untouched, sizeof(double)), 0);
    cbl_answer_free(a);
    cbl_session_free(ok);

    // Devices.
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.model_path = model_.c_str();
    const std::string data = dir_ + "/data";
    rp.data_dir = data.c_str();
    rp.device = "cuda:0";
    cbl_runtime* r2 = reinterpret_cast<cbl_runtime*>(1);
    EXPECT_EQ(cbl_runtime_open(&rp, &r2), CBL_UNSUPPORTED);
    EXPECT_EQ(r2, nullptr);
    rp.device = "tpu";
    EXPECT_EQ(cbl_runtime_open(&rp, &r2), CBL_INVALID_ARG);
    EXPECT_GE(cbl_device_count(), 1);
    EXPECT_STREQ(cbl_device_name(0), "cpu");
    EXPECT_EQ(cbl_device_name(cbl_device_count()), nullptr);
}

TEST_F(CapiRuntime, NullArgumentsAreErrorsNeverCrashes) {
    cbl_session* s = reinterpret_cast<cbl_session*>(1);
    EXPECT_EQ(cbl_session_create(nullptr, nullptr, &s), CBL_INVALID_ARG);
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(cbl_session_create(rt_, nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_session_ask(nullptr, "q", nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_session_prefill_chunks(nullptr, nullptr, nullptr, 0, nullptr, nullptr),
              CBL_INVALID_ARG);
    EXPECT_EQ(cbl_session_generate(nullptr, nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_runtime_search(rt_, nullptr, nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_runtime_ingest_text(rt_, nullptr, "x", 1, nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_runtime_ingest_text(rt_, "u", nullptr, 5, nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_runtime_ingest_path(nullptr, "/tmp", nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_runtime_delete(nullptr, "u", nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_runtime_model(nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_answer_stats(nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_answer_citation(nullptr, 0, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_results_hit(nullptr, 0, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_results_count(nullptr), 0u);
    EXPECT_EQ(cbl_answer_n_citations(nullptr), 0u);
    EXPECT_STREQ(cbl_answer_text(nullptr), "");
    EXPECT_STREQ(cbl_results_notice(nullptr), "");
    EXPECT_STREQ(cbl_runtime_notice(nullptr), "");
    cbl_session_cancel(nullptr);
    cbl_runtime_interrupt(nullptr);
    cbl_session_free(nullptr);
    cbl_runtime_free(nullptr);
    cbl_answer_free(nullptr);
    cbl_results_free(nullptr);
    cbl_kvstore_free(nullptr);
    // An unset output struct_size is refused rather than overrun.
    cbl_search_params sp;
    cbl_search_params_init(&sp);
    cbl_results* res = nullptr;
    ASSERT_EQ(cbl_runtime_search(rt_, "river", &sp, &res), CBL_OK);
    ASSERT_GE(cbl_results_count(res), 1u);
    cbl_hit h{};
    EXPECT_EQ(cbl_results_hit(res, 0, &h), CBL_INVALID_ARG);
    cbl_results_free(res);
    // Bad model paths fail cleanly.
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.model_path = "/nonexistent/model.gguf";
    cbl_runtime* r = reinterpret_cast<cbl_runtime*>(1);
    EXPECT_EQ(cbl_runtime_open(&rp, &r) & 0xff, CBL_IO);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::strstr(cbl_last_error(), "/nonexistent/model.gguf"), nullptr) << cbl_last_error();
}

}  // namespace

namespace {

TEST_F(CapiRuntime, PlainPrefillFromTextOrTokensWithoutAStore) {
    cbl_model* m = nullptr;
    ASSERT_EQ(cbl_runtime_model(rt_, &m), CBL_OK);
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 256;
    cbl_session* s = nullptr;
    ASSERT_EQ(cbl_session_create_with(m, nullptr, &sp, &s), CBL_OK) << cbl_last_error();
    cbl_model_free(m);
    const char* chunk = k_docs[0][1];
    EXPECT_EQ(cbl_session_prefill_chunks(s, &chunk, nullptr, 1, "Which river?", nullptr),
              CBL_INVALID_ARG);  // no store
    EXPECT_NE(std::strstr(cbl_last_error(), "no KV store"), nullptr) << cbl_last_error();

    const std::string prompt = "The capital of France is";
    cbl_stats st;
    cbl_stats_init(&st);
    ASSERT_EQ(cbl_session_prefill_text(s, prompt.data(), prompt.size(), nullptr, &st), CBL_OK)
        << cbl_last_error();
    EXPECT_EQ(st.mode, CBL_MODE_FULL);
    size_t n = 0;
    const int32_t* ids = cbl_session_prompt_tokens(s, &n);
    ASSERT_GT(n, 3u);
    EXPECT_EQ(st.prompt_tokens, static_cast<int64_t>(n));
    const std::vector<int32_t> prompt_ids(ids, ids + n);
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = 12;
    gp.ignore_eog = true;
    gp.top_logprobs = 3;
    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_generate(s, &gp, &a), CBL_OK) << cbl_last_error();
    const std::string from_text = cbl_answer_text(a);
    size_t n_gen = 0;
    cbl_answer_tokens(a, &n_gen);
    EXPECT_EQ(n_gen, 12u);  // ignore_eog: exactly max_tokens
    EXPECT_EQ(cbl_answer_n_top_logprobs(a), 3u);
    int32_t best = -1;
    float lp = 1.f;
    ASSERT_EQ(cbl_answer_top_logprob(a, 0, &best, &lp), CBL_OK);
    EXPECT_LE(lp, 0.f);
    cbl_answer_free(a);

    // The same ids give the same greedy continuation.
    ASSERT_EQ(cbl_session_prefill_tokens(s, prompt_ids.data(), prompt_ids.size(), nullptr), CBL_OK);
    ASSERT_EQ(cbl_session_generate(s, &gp, &a), CBL_OK) << cbl_last_error();
    EXPECT_EQ(from_text, cbl_answer_text(a));
    cbl_answer_free(a);

    const int32_t bad[] = {1, 1 << 30};
    EXPECT_EQ(cbl_session_prefill_tokens(s, bad, 2, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_session_prefill_tokens(s, nullptr, 0, nullptr), CBL_INVALID_ARG);
    cbl_prompt_params pp;
    cbl_prompt_params_init(&pp);
    pp.system = "Be brief.";
    EXPECT_EQ(cbl_session_prefill_text(s, "Hi", 2, &pp, nullptr), CBL_INVALID_ARG);  // chat only
    pp.chat = true;
    ASSERT_EQ(cbl_session_prefill_text(s, "Hi", 2, &pp, nullptr), CBL_OK) << cbl_last_error();
    ids = cbl_session_prompt_tokens(s, &n);
    EXPECT_GT(n, 6u);  // the template's turns around "Hi"
    cbl_session_free(s);
}

// cbl_session_params.device: NULL is the runtime's device (a model's own session: the CPU),
// "cpu" answers in every build (a CUDA build on a machine without a GPU too: CI runs this test
// in build-cuda/), and a device this build or machine lacks is a clear error before anything
// loads. Where a GPU is, its session answers as the CPU's does.
TEST_F(CapiRuntime, SessionDeviceIsTheRuntimesOrItsOwn) {
    cbl_model* m = nullptr;
    ASSERT_EQ(cbl_runtime_model(rt_, &m), CBL_OK);
    auto open = [&](const char* device, bool on_runtime, cbl_session** s) {
        cbl_session_params sp;
        cbl_session_params_init(&sp);
        sp.n_ctx = 256;
        sp.n_threads = 2;
        sp.device = device;
        return on_runtime ? cbl_session_create(rt_, &sp, s)
                          : cbl_session_create_with(m, nullptr, &sp, s);
    };
    auto greedy = [](cbl_session* s) {
        const std::string prompt = "The Amazon river flows through";
        EXPECT_EQ(cbl_session_prefill_text(s, prompt.data(), prompt.size(), nullptr, nullptr),
                  CBL_OK)
            << cbl_last_error();
        return cbltest::greedy_tokens(s, 8);
    };

    cbl_session* s = nullptr;
    EXPECT_EQ(open("tpu:0", false, &s), CBL_INVALID_ARG);
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(std::strstr(cbl_last_error(), "device 'tpu:0'"), nullptr) << cbl_last_error();

    ASSERT_EQ(open("cpu", false, &s), CBL_OK) << cbl_last_error();
    const std::vector<int32_t> cpu = greedy(s);
    cbl_session_free(s);
    ASSERT_EQ(cpu.size(), 8u);
    ASSERT_EQ(open(nullptr, true, &s), CBL_OK) << cbl_last_error();  // the runtime's: the CPU
    EXPECT_EQ(greedy(s), cpu);
    cbl_session_free(s);

    bool gpu = false;
    for (int32_t i = 0; i < cbl_device_count(); ++i) {
        gpu = gpu || std::strcmp(cbl_device_name(i), "cuda:0") == 0;
    }
    const bool cuda_build = std::strstr(cbl_build_info(), " cuda=1") != nullptr;
    for (const bool on_runtime : {false, true}) {
        const cbl_status st = open("cuda:0", on_runtime, &s);
        if (!gpu) {
            EXPECT_EQ(st & 0xff, cuda_build ? CBL_DEVICE : CBL_UNSUPPORTED) << cbl_last_error();
            EXPECT_EQ(s, nullptr);
            EXPECT_NE(std::strstr(cbl_last_error(), "'cuda:0'"), nullptr) << cbl_last_error();
            continue;
        }
        ASSERT_EQ(st, CBL_OK) << cbl_last_error();
        const std::vector<int32_t> dev = greedy(s);
        cbl_session_free(s);
        ASSERT_EQ(dev.size(), cpu.size());
        EXPECT_EQ(dev[0], cpu[0]);  // later tokens may part at a near-tie (f16 on the GPU)
    }
    cbl_model_free(m);
}

}  // namespace
