// `cacheblend bench serve`: a load generator on the public C ABI (issue 14, item 2). One runtime
// over a data directory; at each concurrency level c, c client threads, each with its own
// session, take the next question from a shared counter and ask it until --requests asks have
// finished. Per level it reports requests per minute over the wall time, TTFT percentiles as the
// client sees them (from the call to the first token: waiting for a turn at the runtime's
// request gate, retrieval and prefill) next to the library's own stats.ttft_ms (from the turn
// on), and the decode speed the requests saw. All sessions share the runtime's thread pool. With
// several --mode values each level runs once per mode on the same questions, so full and blend
// are compared in one run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "blend-common.h"
#include "cacheblend.h"
#include "capi-util.h"
#include "commands.h"
#include "corpus-common.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s{
        "bench serve",
        "bench serve --data DIR --questions FILE [options]",
        "Serve --requests asks at each --concurrency level (one session per client thread, one\n"
        "runtime) and report requests/min, TTFT p50/p95/p99 and decode tokens/s per level. FILE\n"
        "holds one question per line (blank lines and lines starting with # are skipped). Before\n"
        "the timed levels every question is asked once, untimed, so chunks missing from the KV\n"
        "store are computed then and not inside a level (--no-warmup skips that).",
        {
            data_flag(),
            model_flag(),
            kv_budget_flag(),
            {"questions", "FILE", "questions, one per line"},
            {"concurrency", "LIST", "client threads per level (default 1,2,4,8)"},
            {"requests", "N", "asks per level and mode (default 16)"},
            {"mode", "LIST", "prefill modes to compare, e.g. full,blend (default blend)"},
            {"max-tokens", "N", "tokens per answer (default 32, as in the paper's evaluation)"},
            {"k", "K", "chunks retrieved per question (default 4)"},
            {"threads", "N",
             "compute threads of the runtime, shared by all sessions (default: all cores)"},
            {"max-active", "N", "requests running at once (default: the library's, 4)"},
            {"max-queued", "N",
             "requests waiting beyond those (default: the library's, 64; -1 none)"},
            {"no-warmup", "", "skip the untimed pass over the questions"},
            {"json", "", "one JSON object on stdout"},
        }};
    return s;
}

std::vector<std::string> read_questions(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw usage_error("bench serve: cannot read --questions " + path);
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
        out.push_back(line);
    }
    if (out.empty()) throw usage_error("bench serve: no questions in " + path);
    return out;
}

// What one level of one mode measured.
struct level_result {
    std::string mode;
    int64_t concurrency = 0, requests = 0, failed = 0;
    int64_t busy = 0;  // of failed: refused with CBL_BUSY (the runtime's queue was full)
    double wall_s = 0, requests_per_min = 0;
    // As the client sees it (queue wait included); library_ttft_mean: stats.ttft_ms.
    double ttft_p50 = 0, ttft_p95 = 0, ttft_p99 = 0, ttft_mean = 0, library_ttft_mean = 0;
    double decode_tokens_per_s = 0;  // mean over the requests that decoded
    int64_t generated_tokens = 0, tokens_reused = 0, prompt_tokens = 0;
    std::string first_error;
};

// Nearest-rank percentile of sorted values (p in (0, 100]).
double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    const auto rank =
        static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

struct serve_setup {
    cbl_runtime* rt = nullptr;
    std::vector<std::string> questions;
    int32_t max_tokens = 32, k = 4, threads = 0;
    int32_t max_active = 0, max_queued = 0;
};

struct one_ask {
    bool ok = false;
    cbl_status status = CBL_OK;
    std::string error;
    cbl_stats st{};
    double client_ttft_ms = 0;  // from the call to the first token (0: no token came)
};

struct first_token_clock {
    std::chrono::steady_clock::time_point t0, first;
    bool seen = false;
};

one_ask ask_once(cbl_session* s, const serve_setup& su, const std::string& q) {
    one_ask r;
    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.k = su.k;
    ap.max_tokens = su.max_tokens;
    first_token_clock clock;
    ap.user_data = &clock;
    ap.on_token = [](const char*, size_t, int32_t, void* ud) {
        auto* c = static_cast<first_token_clock*>(ud);
        if (!c->seen) {
            c->seen = true;
            c->first = std::chrono::steady_clock::now();
        }
        return true;
    };
    clock.t0 = std::chrono::steady_clock::now();
    cbl_answer* a_raw = nullptr;
    if ((r.status = cbl_session_ask(s, q.c_str(), &ap, &a_raw)) != CBL_OK) {
        r.error = cbl_last_error();
        return r;
    }
    if (clock.seen) {
        r.client_ttft_ms =
            std::chrono::duration<double, std::milli>(clock.first - clock.t0).count();
    }
    const answer_ptr answer(a_raw);
    cbl_stats_init(&r.st);
    if (cbl_answer_stats(answer.get(), &r.st) != CBL_OK) {
        r.error = cbl_last_error();
        return r;
    }
    r.ok = true;
    return r;
}

session_ptr make_serve_session(const serve_setup& su, int32_t mode) {
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.mode = mode;  // n_threads 0: the runtime's, so every session runs on its one pool
    cbl_session* raw = nullptr;
    check(cbl_session_create(su.rt, &sp, &raw));
    return session_ptr(raw);
}

level_result run_level(const serve_setup& su, int32_t mode, int64_t concurrency, int64_t requests) {
    std::vector<session_ptr> sessions;
    for (int64_t i = 0; i < concurrency; ++i) sessions.push_back(make_serve_session(su, mode));
    std::atomic<int64_t> next{0};
    std::mutex mu;
    std::vector<one_ask> done;
    level_result out;
    out.mode = mode_name(mode);
    out.concurrency = concurrency;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> clients;
    for (int64_t c = 0; c < concurrency; ++c) {
        clients.emplace_back([&, c] {
            for (int64_t i = next++; i < requests; i = next++) {
                const std::string& q = su.questions[static_cast<size_t>(i) % su.questions.size()];
                one_ask r = ask_once(sessions[static_cast<size_t>(c)].get(), su, q);
                std::lock_guard<std::mutex> lock(mu);
                if (r.ok) {
                    done.push_back(r);
                } else {
                    if (r.status == CBL_BUSY) ++out.busy;
                    if (out.failed++ == 0) out.first_error = r.error;
                }
            }
        });
    }
    for (auto& t : clients) t.join();
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.requests = static_cast<int64_t>(done.size());
    out.requests_per_min =
        out.wall_s > 0 ? 60.0 * static_cast<double>(out.requests) / out.wall_s : 0;
    std::vector<double> ttft;
    double decode_sum = 0;
    int64_t decode_n = 0;
    for (const one_ask& a : done) {
        const cbl_stats& st = a.st;
        // An answer without tokens (end of generation at once) has no client-side first token.
        const double t = a.client_ttft_ms > 0 ? a.client_ttft_ms : st.ttft_ms;
        ttft.push_back(t);
        out.ttft_mean += t;
        out.library_ttft_mean += st.ttft_ms;
        out.generated_tokens += st.generated_tokens;
        out.tokens_reused += st.tokens_reused;
        out.prompt_tokens += st.prompt_tokens;
        if (st.decode_tokens_per_s > 0) {
            decode_sum += st.decode_tokens_per_s;
            ++decode_n;
        }
    }
    std::sort(ttft.begin(), ttft.end());
    if (!ttft.empty()) {
        out.ttft_mean /= static_cast<double>(ttft.size());
        out.library_ttft_mean /= static_cast<double>(ttft.size());
    }
    out.ttft_p50 = percentile(ttft, 50);
    out.ttft_p95 = percentile(ttft, 95);
    out.ttft_p99 = percentile(ttft, 99);
    out.decode_tokens_per_s = decode_n > 0 ? decode_sum / static_cast<double>(decode_n) : 0;
    return out;
}

void print_json(const std::vector<level_result>& rows, const serve_setup& su, bool warmed) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("questions", static_cast<int64_t>(su.questions.size()));
    w.field("max_tokens", su.max_tokens);
    w.field("k", su.k);
    w.field("threads", su.threads);
    w.field("max_active_requests", su.max_active);
    w.field("max_queued_requests", su.max_queued);
    w.field("warmup", warmed);
    w.key("levels").begin_array();
    for (const level_result& r : rows) {
        w.begin_object();
        w.field("mode", r.mode);
        w.field("concurrency", r.concurrency);
        w.field("requests", r.requests);
        w.field("failed", r.failed);
        w.field("busy", r.busy);
        if (!r.first_error.empty()) w.field("first_error", r.first_error);
        w.field("wall_s", r.wall_s);
        w.field("requests_per_min", r.requests_per_min);
        w.field("ttft_ms_p50", r.ttft_p50);
        w.field("ttft_ms_p95", r.ttft_p95);
        w.field("ttft_ms_p99", r.ttft_p99);
        w.field("ttft_ms_mean", r.ttft_mean);
        w.field("library_ttft_ms_mean", r.library_ttft_mean);
        w.field("decode_tokens_per_s", r.decode_tokens_per_s);
        w.field("generated_tokens", r.generated_tokens);
        w.field("prompt_tokens", r.prompt_tokens);
        w.field("tokens_reused", r.tokens_reused);
        w.end_object();
    }
    w.end_array();
    w.end_object();
    std::cout << "\n";
}

}  // namespace

int run_bench_serve(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (!a.has("data") || a.get("data")->empty()) {
        throw usage_error("bench serve: --data DIR is required");
    }
    if (!a.has("questions")) throw usage_error("bench serve: --questions FILE is required");
    const std::string data = *a.get("data");
    const std::string model = a.get_or("model", "");
    serve_setup su;
    su.questions = read_questions(*a.get("questions"));
    const std::vector<int64_t> levels = a.get_int_list("concurrency", "1,2,4,8", 1, 256);
    const int64_t requests = a.get_int("requests", 16, 1, 1 << 20);
    su.max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 32, 1, 1 << 20));
    su.k = static_cast<int32_t>(a.get_int("k", 4, 1, 1000));
    su.threads = static_cast<int32_t>(a.get_int("threads", 0, 0, 1024));
    su.max_active = static_cast<int32_t>(a.get_int("max-active", 0, 0, 4096));
    su.max_queued = static_cast<int32_t>(a.get_int("max-queued", 0, -1, 1000000));
    const std::vector<int32_t> modes =
        parse_enum_list(CBL_NAMES_MODE, "mode", a.get_or("mode", "blend"));
    const bool json = a.has("json");

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = data.c_str();
    if (!model.empty()) rp.model_path = model.c_str();
    rp.kv_budget_bytes = parse_kv_budget(a);
    rp.n_threads = su.threads;
    rp.max_active_requests = su.max_active;
    rp.max_queued_requests = su.max_queued;
    const runtime_ptr rt = open_existing_runtime(&rp);
    su.rt = rt.get();

    const bool warm = !a.has("no-warmup");
    if (warm) {
        // Every question once, in blend mode: chunks the store lacks are computed and written
        // back here, so the levels measure serving, not first-time precompute.
        const session_ptr s = make_serve_session(su, CBL_MODE_BLEND);
        for (const std::string& q : su.questions) {
            const one_ask r = ask_once(s.get(), su, q);
            if (!r.ok) throw std::runtime_error("bench serve: warm-up: " + r.error);
        }
    }
    if (!json) {
        std::printf("%zu questions, %d tokens per answer, k %d, %lld requests per level\n",
                    su.questions.size(), su.max_tokens, su.k, static_cast<long long>(requests));
        std::printf("%-6s %5s %8s %6s %9s %10s %10s %10s %10s\n", "mode", "conc", "requests",
                    "failed", "req/min", "ttft p50", "ttft p95", "ttft p99", "decode t/s");
        std::fflush(stdout);
    }
    std::vector<level_result> rows;
    for (int64_t c : levels) {
        for (int32_t m : modes) {
            rows.push_back(run_level(su, m, c, requests));
            const level_result& r = rows.back();
            if (!json) {
                std::printf("%-6s %5lld %8lld %6lld %9.1f %8.0fms %8.0fms %8.0fms %10.1f\n",
                            r.mode.c_str(), static_cast<long long>(r.concurrency),
                            static_cast<long long>(r.requests), static_cast<long long>(r.failed),
                            r.requests_per_min, r.ttft_p50, r.ttft_p95, r.ttft_p99,
                            r.decode_tokens_per_s);
                if (!r.first_error.empty()) {
                    std::printf("  first error (%lld of them busy): %s\n",
                                static_cast<long long>(r.busy), r.first_error.c_str());
                }
                std::fflush(stdout);
            }
        }
    }
    if (json) print_json(rows, su, warm);
    int64_t failed = 0;
    for (const level_result& r : rows) failed += r.failed;
    return failed > 0 ? 1 : 0;
}

}  // namespace cacheblend::cli
