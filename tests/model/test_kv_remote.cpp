// The shared chunk-KV tier on a real redis-server (issue 14, items 3 and 4; core/kvstore/
// kv-tiered.h): two data directories stand for two machines. Machine A ingests with precompute,
// machine B ingests the same documents without it and its first ask reuses A's chunks from Redis
// with A's answer. Faults end in a correct answer (the one a machine without the shared tier
// gives) with a notice: Redis killed mid-request, a value overwritten with garbage, a value of
// another model, a wrong password, Redis down when the runtime opens. The CLI's --kv-remote.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "core/blend/blend.h"
#include "core/kvstore/kv-file.h"
#include "core/kvstore/kv-tiered.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "util/cli-runner.h"
#include "util/json.h"
#include "util/redis-server.h"
#include "util/scoped-env.h"
#include "util/test-util.h"

namespace {

using cbltest::redis_server;
using cbltest::shell_quote;

const char* k_docs[][2] = {
    {"mem://amazon",
     "The Amazon river flows through Brazil, Peru and Colombia. It carries more "
     "water than any other river on Earth, and its basin covers about seven "
     "million square kilometres of rainforest."},
    {"mem://kilimanjaro",
     "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, "
     "Uhuru, rises 5,895 metres above sea level and was first climbed in "
     "1889 by Hans Meyer and Ludwig Purtscheller."},
    {"mem://sourdough",
     "Sourdough bread is leavened by a culture of wild yeast and lactic acid "
     "bacteria. The dough rises slowly, which gives the bread its sour taste "
     "and a crust that keeps for days."},
};
const char k_question[] = "Who first climbed Mount Kilimanjaro, and in which year?";

struct asked {
    cbl_status status = CBL_ERROR;
    std::string error, text, notice;
    cbl_stats stats{};
};

class KvRemote : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        CBL_REQUIRE_REDIS_SERVER();
#if !CBL_HAVE_HIREDIS
        GTEST_SKIP() << "built without hiredis (CBL_REDIS): no shared KV tier";
#endif
        model_ = path;
        dir_ = cbltest::make_temp_dir("cbl-kv-remote");
        ASSERT_FALSE(dir_.empty());
    }
    void TearDown() override {
        for (cbl_runtime* rt : runtimes_) cbl_runtime_free(rt);
        if (!dir_.empty() && std::system(("rm -rf " + shell_quote(dir_)).c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }

    // A machine: its own data directory, the shared tier at url ("" = none), the documents
    // ingested (with precompute on machine A only).
    cbl_runtime* machine(const std::string& name, const std::string& url, bool precompute) {
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = model_.c_str();
        const std::string data = dir_ + "/" + name;
        p.data_dir = data.c_str();
        p.n_threads = 2;
        p.no_embedder = true;  // BM25 picks the same chunks on every machine, and fast
        if (!url.empty()) p.kv_remote = url.c_str();
        cbl_runtime* rt = nullptr;
        EXPECT_EQ(cbl_runtime_open(&p, &rt), CBL_OK) << cbl_last_error();
        if (!rt) return nullptr;
        runtimes_.push_back(rt);
        for (const auto& doc : k_docs) {
            cbl_ingest_params ip;
            cbl_ingest_params_init(&ip);
            ip.precompute_kv = precompute;
            EXPECT_EQ(cbl_runtime_ingest_text(rt, doc[0], doc[1], std::strlen(doc[1]), &ip,
                                              nullptr),
                      CBL_OK)
                << cbl_last_error();
        }
        return rt;
    }

    static asked ask(cbl_runtime* rt) {
        asked out;
        cbl_session_params sp;
        cbl_session_params_init(&sp);
        sp.n_ctx = 1024;
        sp.n_threads = 2;
        cbl_session* s = nullptr;
        EXPECT_EQ(cbl_session_create(rt, &sp, &s), CBL_OK) << cbl_last_error();
        cbl_ask_params ap;
        cbl_ask_params_init(&ap);
        ap.k = 3;
        ap.max_tokens = 12;
        cbl_answer* a = nullptr;
        out.status = cbl_session_ask(s, k_question, &ap, &a);
        if (out.status != CBL_OK) out.error = cbl_last_error();
        if (a) {
            out.text = cbl_answer_text(a);
            cbl_stats_init(&out.stats);
            EXPECT_EQ(cbl_answer_stats(a, &out.stats), CBL_OK);
            out.notice = out.stats.notice ? out.stats.notice : "";
            out.stats.notice = nullptr;  // freed with the answer
        }
        cbl_answer_free(a);
        cbl_session_free(s);
        return out;
    }

    // What a machine without the shared tier answers on its first ask (every chunk computed):
    // the correct answer of every fault case.
    std::string reference_answer() {
        const asked r = ask(machine("reference", "", false));
        EXPECT_EQ(r.status, CBL_OK) << r.error;
        EXPECT_EQ(r.stats.tokens_reused, 0);
        return r.text;
    }

    std::string model_, dir_;
    std::vector<cbl_runtime*> runtimes_;
};

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TEST_F(KvRemote, MachineBReusesMachineAChunksFromRedisWithTheSameAnswer) {
    redis_server redis;
    ASSERT_TRUE(redis.started()) << redis.error();
    cbl_runtime* a = machine("a", redis.url(), true);
    ASSERT_NE(a, nullptr);
    std::vector<std::string> hdrs;
    ASSERT_TRUE(redis.keys("cbl:kv:*:hdr", &hdrs));
    EXPECT_EQ(hdrs.size(), 3u) << "every precomputed chunk written through";
    const asked on_a = ask(a);  // A's warm local store
    ASSERT_EQ(on_a.status, CBL_OK) << on_a.error;
    EXPECT_GT(on_a.stats.tokens_reused, 0);
    EXPECT_EQ(on_a.stats.tokens_remote, 0) << "A's chunks are local";

    cbl_runtime* b = machine("b", redis.url(), false);
    ASSERT_NE(b, nullptr);
    const asked on_b = ask(b);
    ASSERT_EQ(on_b.status, CBL_OK) << on_b.error;
    EXPECT_GT(on_b.stats.tokens_reused, 0);
    EXPECT_EQ(on_b.stats.tokens_remote, on_b.stats.tokens_reused) << "all of them from Redis";
    EXPECT_EQ(on_b.stats.chunks_missed, 0);
    EXPECT_GT(on_b.stats.bytes_remote, 0u);
    EXPECT_EQ(on_b.stats.bytes_remote, on_b.stats.bytes_loaded);
    EXPECT_EQ(on_b.text, on_a.text);
    EXPECT_EQ(on_b.notice, on_a.notice);
    std::printf("TTFT: A warm local %.1f ms, B first ask from Redis %.1f ms\n", on_a.stats.ttft_ms,
                on_b.stats.ttft_ms);

    // The same through $CBL_KV_REMOTE (cbl_runtime_params.kv_remote left NULL).
    cbltest::scoped_env env("CBL_KV_REMOTE", redis.url().c_str());
    const asked on_c = ask(machine("c", "", false));
    ASSERT_EQ(on_c.status, CBL_OK) << on_c.error;
    EXPECT_EQ(on_c.stats.tokens_remote, on_b.stats.tokens_remote);
    EXPECT_EQ(on_c.text, on_a.text);
}

TEST_F(KvRemote, GarbageValuesAreMissesAndTheAnswerIsRecomputed) {
    const std::string expect = reference_answer();
    redis_server redis;
    ASSERT_TRUE(redis.started()) << redis.error();
    ASSERT_NE(machine("a", redis.url(), true), nullptr);
    std::vector<std::string> names;
    ASSERT_TRUE(redis.keys("cbl:kv:*", &names));
    ASSERT_FALSE(names.empty());
    // Every header truncated or flipped, every layer 1 (the first the blend streams) garbage of
    // its own size: both the lookup and the streaming check must catch them.
    for (const std::string& n : names) {
        std::string v;
        ASSERT_TRUE(redis.get(n, &v));
        if (contains(n, ":hdr")) {
            v[v.size() / 2] ^= 0x40;
            ASSERT_TRUE(redis.set(n, v));
        } else if (contains(n, ":L1")) {
            ASSERT_TRUE(redis.set(n, std::string(v.size(), '\x5a')));
        }
    }
    const asked b = ask(machine("b", redis.url(), false));
    ASSERT_EQ(b.status, CBL_OK) << b.error;
    EXPECT_EQ(b.stats.tokens_remote, 0);
    EXPECT_EQ(b.stats.tokens_reused, 0);
    EXPECT_EQ(b.text, expect);
    EXPECT_TRUE(contains(b.notice, "kv remote: chunk")) << b.notice;
    EXPECT_TRUE(contains(b.notice, "checksum")) << b.notice;

    // Layers only: the header verifies, the stream finds layer 1 bad, and the chunk is dropped.
    redis_server redis2;
    ASSERT_TRUE(redis2.started()) << redis2.error();
    ASSERT_NE(machine("a2", redis2.url(), true), nullptr);
    ASSERT_TRUE(redis2.keys("cbl:kv:*:L1", &names));
    ASSERT_EQ(names.size(), 3u);
    for (const std::string& n : names) {
        std::string v;
        ASSERT_TRUE(redis2.get(n, &v));
        v[7] ^= 0x01;
        ASSERT_TRUE(redis2.set(n, v));
    }
    const asked b2 = ask(machine("b2", redis2.url(), false));
    ASSERT_EQ(b2.status, CBL_OK) << b2.error;
    EXPECT_EQ(b2.stats.tokens_reused, 0);
    EXPECT_EQ(b2.text, expect);
    EXPECT_TRUE(contains(b2.notice, "fails its checksum")) << b2.notice;
    std::vector<std::string> hdrs;
    ASSERT_TRUE(redis2.keys("cbl:kv:*:hdr", &hdrs));
    EXPECT_EQ(hdrs.size(), 3u) << "the recomputed chunks were written back";
    const asked again = ask(machine("c2", redis2.url(), false));
    EXPECT_GT(again.stats.tokens_remote, 0) << "a third machine reuses the repaired values";
}

TEST_F(KvRemote, AValueOfAnotherModelIsAMiss) {
    const std::string expect = reference_answer();
    redis_server redis;
    ASSERT_TRUE(redis.started()) << redis.error();
    ASSERT_NE(machine("a", redis.url(), true), nullptr);
    std::vector<std::string> hdrs;
    ASSERT_TRUE(redis.keys("cbl:kv:*:hdr", &hdrs));
    ASSERT_EQ(hdrs.size(), 3u);
    // A well-formed header (checksum redone) claiming another model's fingerprint.
    for (const std::string& n : hdrs) {
        std::string v;
        ASSERT_TRUE(redis.get(n, &v));
        const auto* p = reinterpret_cast<const uint8_t*>(v.data());
        uint64_t file_size = 0;
        std::memcpy(&file_size, p + 48, 8);
        cacheblend::kv_file::header h = cacheblend::kv_file::decode_header(p, v.size(), file_size);
        h.meta.model_fingerprint ^= 0x1234567;
        const std::vector<uint8_t> e = cacheblend::kv_file::encode_header(h);
        ASSERT_TRUE(redis.set(n, std::string(e.begin(), e.end())));
    }
    const asked b = ask(machine("b", redis.url(), false));
    ASSERT_EQ(b.status, CBL_OK) << b.error;
    EXPECT_EQ(b.stats.tokens_reused, 0);
    EXPECT_EQ(b.text, expect);
    EXPECT_TRUE(contains(b.notice, "foreign chunk")) << b.notice;
}

TEST_F(KvRemote, WrongPasswordIsANoticeAndLocalKvOnly) {
    const std::string expect = reference_answer();
    redis_server redis("s3cret:pw@x");  // ':' and '@' in a password parse too
    ASSERT_TRUE(redis.started()) << redis.error();
    ASSERT_NE(machine("a", redis.url(), true), nullptr);
    std::vector<std::string> hdrs;
    ASSERT_TRUE(redis.keys("cbl:kv:*:hdr", &hdrs));
    EXPECT_EQ(hdrs.size(), 3u) << "AUTH with the right password works";

    const asked wrong = ask(machine("b", redis.url("not-it"), false));
    ASSERT_EQ(wrong.status, CBL_OK) << wrong.error;
    EXPECT_EQ(wrong.stats.tokens_reused, 0);
    EXPECT_EQ(wrong.text, expect);
    EXPECT_TRUE(contains(wrong.notice, "AUTH")) << wrong.notice;
    EXPECT_FALSE(contains(wrong.notice, "not-it")) << "never print a password: " << wrong.notice;

    const asked right = ask(machine("c", redis.url(), false));
    ASSERT_EQ(right.status, CBL_OK) << right.error;
    EXPECT_GT(right.stats.tokens_remote, 0);
}

TEST_F(KvRemote, RedisDownAtOpenIsANoticeAndABadUrlAnError) {
    const std::string expect = reference_answer();
    std::string url;
    {
        redis_server redis;
        ASSERT_TRUE(redis.started()) << redis.error();
        url = redis.url();
    }  // stopped: nothing listens on its port now
    cbl_runtime* b = machine("b", url + "?connect_timeout_ms=200", false);
    ASSERT_NE(b, nullptr);
    const asked r = ask(b);
    ASSERT_EQ(r.status, CBL_OK) << r.error;
    EXPECT_EQ(r.text, expect);
    EXPECT_TRUE(contains(r.notice, "kv remote: redis://127.0.0.1:")) << r.notice;
    EXPECT_TRUE(contains(r.notice, "local KV or recompute used")) << r.notice;

    for (const char* bad : {"http://127.0.0.1:6379", "redis://127.0.0.1:99999/0",
                            "redis://127.0.0.1:6379/0?timeout=1", "redis://:@127.0.0.1"}) {
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = model_.c_str();
        const std::string data = dir_ + "/bad";
        p.data_dir = data.c_str();
        p.no_embedder = true;
        p.kv_remote = bad;
        cbl_runtime* rt = nullptr;
        EXPECT_EQ(cbl_runtime_open(&p, &rt), CBL_INVALID_ARG) << bad;
        EXPECT_TRUE(contains(cbl_last_error(), "kv_remote")) << cbl_last_error();
        EXPECT_EQ(rt, nullptr);
    }
}

TEST_F(KvRemote, AFrozenRedisCostsOneTimeoutNotAHang) {
    const std::string expect = reference_answer();
    redis_server redis;
    ASSERT_TRUE(redis.started()) << redis.error();
    ASSERT_NE(machine("a", redis.url(), true), nullptr);
    cbl_runtime* b = machine("b", redis.url() + "?timeout_ms=300", false);
    ASSERT_NE(b, nullptr);
    redis.freeze();  // the kernel still accepts connections; no reply ever comes
    const auto t0 = std::chrono::steady_clock::now();
    const asked r = ask(b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    redis.thaw();
    ASSERT_EQ(r.status, CBL_OK) << r.error;
    EXPECT_EQ(r.text, expect);
    EXPECT_EQ(r.stats.tokens_reused, 0);
    EXPECT_TRUE(contains(r.notice, "kv remote:")) << r.notice;
    // One 300 ms timeout, then the server is skipped for retry_ms: lookups, the write-back of
    // three chunks and the ask's own work stay far below 3 chunks x several timeouts each.
    EXPECT_LT(s, 30.0);
    std::printf("ask with a frozen Redis: %.1f s; notice: %s\n", s, r.notice.c_str());
}

// ---- Redis killed in the middle of a request (C++: the kill lands between two layer reads) ----

// The real server's client, which kills the server just before the first layer is read: the
// header was found, the stream has begun, then the connection dies.
class killing_remote final : public cacheblend::kv_remote {
public:
    killing_remote(std::shared_ptr<cacheblend::kv_remote> real, redis_server* srv)
        : real_(std::move(real)), srv_(srv) {}
    bool get(const std::string& name, std::string* out) override {
        if (contains(name, ":L") && !killed_) {
            srv_->kill();
            killed_ = true;
        }
        return real_->get(name, out);
    }
    void set_all(const std::vector<std::pair<std::string, std::string>>& v) override {
        real_->set_all(v);
    }
    void del(const std::vector<std::string>& n) override { real_->del(n); }
    const cacheblend::kv_remote_config& config() const override { return real_->config(); }
    bool killed() const { return killed_; }

private:
    std::shared_ptr<cacheblend::kv_remote> real_;
    redis_server* srv_;
    bool killed_ = false;
};

TEST_F(KvRemote, RedisKilledMidRequestRecomputesWithTheSameLogits) {
    using namespace cacheblend;
    redis_server redis;
    ASSERT_TRUE(redis.started()) << redis.error();
    auto m = model::load(model_);
    session_params sp;
    sp.n_ctx = 1024;
    sp.n_threads = 2;
    session s(m, sp);
    const tokenizer& t = m->vocab();
    blend_request req;
    req.preamble = t.encode(
        "<|im_start|>system\nAnswer from the passages.<|im_end|>\n"
        "<|im_start|>user\n",
        false, true);
    for (const auto& d : k_docs) req.chunks.push_back(t.encode(d[1], false, false));
    req.question =
        t.encode(std::string(k_question) + "<|im_end|>\n<|im_start|>assistant\n", false, true);
    auto local = [&](const char* name) {
        kv_store_params kp;
        kp.dir = dir_ + "/" + name;
        return kv_store::open(kp);
    };
    kv_remote_config cfg =
        parse_kv_remote_url(redis.url() + "?timeout_ms=500&connect_timeout_ms=200");
    blend_params bp;
    bp.write_back = false;

    {  // machine A precomputes into its store and through to Redis
        auto a = std::make_shared<tiered_kv_store>(local("a"), open_kv_remote(cfg));
        blend_engine e(s, a, bp);
        for (const auto& c : req.chunks) EXPECT_TRUE(e.precompute_chunk(req.preamble, c));
        EXPECT_EQ(a->remote_stats().writes, 3u);
    }
    std::vector<float> expect;
    {  // the answer without the shared tier: every chunk computed
        blend_engine e(s, local("ref"), bp);
        blend_stats st;
        expect = e.prefill(req, &st);
        EXPECT_EQ(st.tokens_reused, 0);
    }
    auto killer = std::make_shared<killing_remote>(open_kv_remote(cfg), &redis);
    auto b = std::make_shared<tiered_kv_store>(local("b"), killer);
    blend_engine e(s, b, bp);
    blend_stats st;
    const std::vector<float> got = e.prefill(req, &st);
    EXPECT_TRUE(killer->killed()) << "the request reached the layer stream";
    EXPECT_EQ(st.tokens_reused, 0);
    EXPECT_EQ(st.tokens_remote, 0);
    EXPECT_TRUE(contains(st.fallback_reason, "kv remote:")) << st.fallback_reason;
    EXPECT_TRUE(contains(st.fallback_reason, "recomputed")) << st.fallback_reason;
    ASSERT_EQ(got.size(), expect.size());
    EXPECT_TRUE(got == expect) << "the same logits as a machine without the shared tier";
    // The next request does not wait for the dead server: it is skipped (retry_ms).
    blend_stats st2;
    e.prefill(req, &st2);
    EXPECT_TRUE(contains(st2.fallback_reason, "unavailable")) << st2.fallback_reason;
}

// ---- the CLI: --kv-remote on ingest and ask ----

TEST_F(KvRemote, CliMachinesShareChunksThroughKvRemote) {
    const std::string cli = cbltest::cli_path();
    ASSERT_FALSE(cli.empty());
    redis_server redis;
    ASSERT_TRUE(redis.started()) << redis.error();
    const std::string docs = dir_ + "/docs";
    ASSERT_EQ(std::system(("mkdir -p " + shell_quote(docs)).c_str()), 0);
    for (size_t i = 0; i < 3; ++i) {
        cbltest::write_file(docs + "/doc" + std::to_string(i) + ".txt", k_docs[i][1]);
    }
    auto run = [&](std::vector<std::string> args) {
        args.insert(args.begin() + 1, {"--model", model_, "--kv-remote", redis.url()});
        return cbltest::run_cli(args, dir_ + "/stderr");
    };
    auto r = run({"ingest", "--data", dir_ + "/a", docs, "--precompute"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run({"ingest", "--data", dir_ + "/b", docs});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<cbltest::json> answers;
    for (const char* m : {"a", "b"}) {
        r = run({"ask", "--data", dir_ + "/" + m, k_question, "--json", "--k", "3", "--threads",
                 "2", "--max-tokens", "8"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        answers.push_back(cbltest::json::parse(r.out));
    }
    EXPECT_EQ(answers[0]["stats"]["tokens_remote"].num, 0);
    EXPECT_GT(answers[1]["stats"]["tokens_remote"].num, 0) << r.out;
    EXPECT_GT(answers[1]["stats"]["bytes_remote"].num, 0);
    EXPECT_EQ(answers[1]["text"].str, answers[0]["text"].str);
}

}  // namespace
