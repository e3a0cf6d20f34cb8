// `cacheblend bench prefill|decode`: throughput of the forward pass on pseudo-random tokens, the
// median of R timed runs after one warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "commands.h"
#include "model-common.h"
#include "core/error.h"
#include "core/session.h"
#include "json-writer.h"
#include "progress-bar.h"

namespace cacheblend::cli {
namespace {

constexpr int32_t k_decode_prompt = 16;  // DESIGN §8: decode runs after a 16-token prompt
constexpr int32_t k_ctx_slack = 16;

const command_spec& spec() {
    static const command_spec s{
        "bench",
        "bench prefill|decode [options]",
        "Measure prefill or decode throughput (tokens/s, median of --reps runs after a warm-up).\n"
        "prefill: process N prompt tokens in a fresh context. decode: generate N tokens one at a\n"
        "time (greedy) after a 16-token prompt; only the decode steps are timed.",
        {
            model_flag(),
            {"tokens", "LIST", "comma-separated sizes (default: prefill 128,512,2048; decode 128)"},
            {"threads", "N",
             "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
            {"reps", "R", "timed runs per size (default 3)"},
            {"json", "", "print a JSON list of {kind, tokens, threads, tokens_per_s, ms}"},
        },
        1,
        "Token ids are drawn from the vocabulary's normal tokens with a fixed seed, so runs are\n"
        "comparable.",
    };
    return s;
}

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// `n` ids drawn from the normal (non-special, non-byte) tokens: special tokens would make the
// workload unrepresentative, and a fixed seed makes runs repeatable.
std::vector<token_id> random_tokens(const model& m, size_t n) {
    const tokenizer& vocab = m.vocab();
    const int32_t n_vocab = std::min(vocab.n_vocab(), m.hparams().n_vocab);
    std::vector<token_id> normal;
    for (token_id id = 0; id < n_vocab; ++id) {
        if (vocab.attr(id) == token_attr::normal) normal.push_back(id);
    }
    if (normal.empty()) throw error(status::format, "bench: the vocabulary has no normal tokens");
    std::mt19937_64 rng(0xCB1E4D);
    std::vector<token_id> out(n);
    for (token_id& t : out) t = normal[static_cast<size_t>(rng() % normal.size())];
    return out;
}

struct bench_row {
    std::string kind;
    int64_t tokens;
    int32_t threads;
    double tokens_per_s;
    double ms;
};

// Returns the median time in ms of `reps` runs of `run` after one warm-up run.
template <typename F>
double time_runs(int64_t reps, progress_bar& bar, F&& run) {
    run(true);
    bar.update(1);
    std::vector<double> ms;
    for (int64_t r = 0; r < reps; ++r) {
        ms.push_back(run(false));
        bar.update(r + 2);
    }
    return median(ms);
}

bench_row bench_prefill(const std::shared_ptr<const model>& m, int64_t n, int32_t threads,
                        int64_t reps, const std::vector<token_id>& pool, bool show) {
    session_params sp;
    sp.n_ctx = static_cast<int32_t>(n + k_ctx_slack);
    sp.n_threads = threads;
    session s(m, sp);
    const std::vector<token_id> ids(pool.begin(), pool.begin() + n);
    progress_bar bar("prefill " + std::to_string(n), reps + 1, show);
    const double ms = time_runs(reps, bar, [&](bool) {
        s.reset();
        const auto t0 = clock_type::now();
        s.prefill(ids);
        return ms_between(t0, clock_type::now());
    });
    return {"prefill", n, threads, ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0, ms};
}

bench_row bench_decode(const std::shared_ptr<const model>& m, int64_t n, int32_t threads,
                       int64_t reps, const std::vector<token_id>& pool, bool show) {
    session_params sp;
    sp.n_ctx = static_cast<int32_t>(k_decode_prompt + n + k_ctx_slack);
    sp.n_threads = threads;
    session s(m, sp);
    const std::vector<token_id> prompt(pool.begin(), pool.begin() + k_decode_prompt);
    const int32_t n_vocab = m->hparams().n_vocab;
    progress_bar bar("decode " + std::to_string(n), reps + 1, show);
    const double ms = time_runs(reps, bar, [&](bool warmup) {
        s.reset();
        const std::vector<float>* logits = &s.prefill(prompt);
        // A short warm-up is enough to fault in weights and spin up threads.
        const int64_t steps = warmup ? std::min<int64_t>(n, 16) : n;
        double total = 0;
        for (int64_t i = 0; i < steps; ++i) {
            // Greedy, ignoring end-of-generation: the benchmark wants exactly n steps.
            const token_id tok = argmax(logits->data(), n_vocab);
            const auto t0 = clock_type::now();
            logits = &s.decode(tok);
            total += ms_between(t0, clock_type::now());
        }
        return total;
    });
    return {"decode", n, threads, ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0, ms};
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (a.positional().empty()) throw usage_error("bench: say what to measure: prefill or decode");
    const std::string kind = a.positional()[0];
    if (kind != "prefill" && kind != "decode") {
        throw usage_error("bench: unknown benchmark '" + kind + "' (expected prefill or decode)");
    }
    const bool prefill = kind == "prefill";
    const std::vector<int64_t> sizes =
        a.get_int_list("tokens", prefill ? "128,512,2048" : "128", 1, 1 << 20);
    const auto threads =
        static_cast<int32_t>(a.get_int("threads", default_thread_count(), 1, 1024));
    const int64_t reps = a.get_int("reps", 3, 1, 1000);
    const bool json = a.has("json");

    const std::shared_ptr<const model> m = load_model(a, false);
    const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    const std::vector<token_id> pool =
        random_tokens(*m, static_cast<size_t>(std::max<int64_t>(max_size, k_decode_prompt)));

    if (!json) {
        std::printf("model: %s, %d threads, median of %lld runs\n",
                    m->name().empty() ? "(unnamed)" : m->name().c_str(), threads,
                    static_cast<long long>(reps));
        std::printf("%-8s %8s %8s %12s %10s\n", "kind", "tokens", "threads", "tokens/s", "ms");
        std::fflush(stdout);
    }
    std::vector<bench_row> rows;
    for (int64_t n : sizes) {
        rows.push_back(prefill ? bench_prefill(m, n, threads, reps, pool, !json)
                               : bench_decode(m, n, threads, reps, pool, !json));
        if (!json) {
            const bench_row& r = rows.back();
            std::printf("%-8s %8lld %8d %12.1f %10.2f\n", r.kind.c_str(),
                        static_cast<long long>(r.tokens), r.threads, r.tokens_per_s, r.ms);
            std::fflush(stdout);
        }
    }
    if (json) {
        json_writer w(std::cout);
        w.begin_array();
        for (const bench_row& r : rows) {
            w.begin_object();
            w.field("kind", r.kind);
            w.field("tokens", r.tokens);
            w.field("threads", r.threads);
            w.field("tokens_per_s", r.tokens_per_s);
            w.field("ms", r.ms);
            w.field("reps", reps);
            w.end_object();
        }
        w.end_array();
        std::cout << "\n";
    }
    return 0;
}

}  // namespace cacheblend::cli
