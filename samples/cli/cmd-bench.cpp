// `cacheblend bench prefill|decode`: throughput of the forward pass on pseudo-random tokens, the
// median of R timed runs after one warm-up. Written against the public C ABI: prefill is
// cbl_session_prefill_tokens, decode is greedy cbl_session_generate with ignore_eog.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>

#include "cacheblend.h"
#include "capi-util.h"
#include "commands.h"
#include "json-writer.h"
#include "progress-bar.h"

namespace cacheblend::cli {
namespace {

constexpr int32_t k_decode_prompt = 16;  // decode runs after a 16-token prompt (README)
constexpr int32_t k_ctx_slack = 16;

const command_spec& spec() {
    static const command_spec s{
        "bench",
        "bench prefill|decode [options]   (bench serve --help: requests under concurrency)",
        "Measure prefill or decode throughput (tokens/s, median of --reps runs after a warm-up).\n"
        "prefill: process N prompt tokens in a fresh context. decode: generate N tokens one at a\n"
        "time (greedy) after a 16-token prompt; only the decode steps are timed.",
        {
            model_flag(),
            {"tokens", "LIST", "comma-separated sizes (default: prefill 128,512,2048; decode 128)"},
            {"threads", "N", "CPU threads (default: all cores)"},
            device_flag(),
            {"reps", "R", "timed runs per size (default 3)"},
            {"json", "", "print a JSON list of {kind, tokens, threads, device, tokens_per_s, ms}"},
        },
        1,
        "Token ids are drawn from the vocabulary's plain-text tokens with a fixed seed, so runs\n"
        "are comparable.",
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

// `n` ids drawn from the plain-text tokens (control tokens such as "<|im_start|>" and empty
// pieces left out, so the workload looks like text), with a fixed seed for repeatable runs.
std::vector<int32_t> random_tokens(const cbl_model* m, size_t n) {
    std::vector<int32_t> text_ids;
    for (int32_t id = 0; id < cbl_model_n_vocab(m); ++id) {
        const std::string piece = token_text(m, id);
        const bool control = piece.size() > 2 && piece.front() == '<' && piece.back() == '>';
        if (!piece.empty() && !control) text_ids.push_back(id);
    }
    if (text_ids.empty()) throw std::runtime_error("bench: the vocabulary has no text tokens");
    std::mt19937_64 rng(0xCB1E4D);
    std::vector<int32_t> out(n);
    for (int32_t& t : out) t = text_ids[static_cast<size_t>(rng() % text_ids.size())];
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

struct bench_setup {
    int32_t threads = 1;
    std::string device;  // "" = the CPU
};

session_ptr make_session(cbl_model* m, int64_t n_ctx, const bench_setup& b) {
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = static_cast<int32_t>(n_ctx);
    sp.n_threads = b.threads;
    if (!b.device.empty()) sp.device = b.device.c_str();
    sp.mode = CBL_MODE_FULL;
    cbl_session* s = nullptr;
    check(cbl_session_create_with(m, nullptr, &sp, &s));
    return session_ptr(s);
}

bench_row bench_prefill(cbl_model* m, int64_t n, const bench_setup& b, int64_t reps,
                        const std::vector<int32_t>& pool, bool show) {
    const session_ptr s = make_session(m, n + k_ctx_slack, b);
    progress_bar bar("prefill " + std::to_string(n), reps + 1, show);
    const double ms = time_runs(reps, bar, [&](bool) {
        cbl_stats st;
        cbl_stats_init(&st);
        check(cbl_session_prefill_tokens(s.get(), pool.data(), static_cast<size_t>(n), &st));
        return st.prefill_ms;
    });
    return {"prefill", n, b.threads, ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0, ms};
}

bench_row bench_decode(cbl_model* m, int64_t n, const bench_setup& b, int64_t reps,
                       const std::vector<int32_t>& pool, bool show) {
    const session_ptr s = make_session(m, k_decode_prompt + n + k_ctx_slack, b);
    progress_bar bar("decode " + std::to_string(n), reps + 1, show);
    const double ms = time_runs(reps, bar, [&](bool warmup) {
        check(cbl_session_prefill_tokens(s.get(), pool.data(), k_decode_prompt, nullptr));
        // Greedy, past end-of-generation: the benchmark wants exactly n steps (a short warm-up
        // is enough to fault in weights and spin up threads). n tokens take n - 1 decode steps
        // (the first comes from the prompt's logits); the rate is over those steps.
        cbl_generate_params gp;
        cbl_generate_params_init(&gp);
        gp.max_tokens = static_cast<int32_t>(warmup ? std::min<int64_t>(n, 16) : n) + 1;
        gp.ignore_eog = true;
        cbl_answer* raw = nullptr;
        check(cbl_session_generate(s.get(), &gp, &raw));
        const answer_ptr a(raw);
        cbl_stats st;
        cbl_stats_init(&st);
        check(cbl_answer_stats(a.get(), &st));
        const double steps = static_cast<double>(gp.max_tokens - 1);
        return st.decode_tokens_per_s > 0 ? 1000.0 * steps / st.decode_tokens_per_s : 0.0;
    });
    return {"decode", n, b.threads, ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0, ms};
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
    // `bench serve` has flags of its own (cmd-bench-serve.cpp).
    if (!args.empty() && args[0] == "serve") {
        return run_bench_serve(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (a.positional().empty())
        throw usage_error("bench: say what to measure: prefill, decode or serve");
    const std::string kind = a.positional()[0];
    if (kind != "prefill" && kind != "decode") {
        throw usage_error("bench: unknown benchmark '" + kind +
                          "' (expected prefill, decode or serve)");
    }
    const bool prefill = kind == "prefill";
    const std::vector<int64_t> sizes =
        a.get_int_list("tokens", prefill ? "128,512,2048" : "128", 1, 1 << 20);
    bench_setup setup;
    setup.threads = static_cast<int32_t>(
        a.get_int("threads", std::max<int64_t>(1, std::thread::hardware_concurrency()), 1, 1024));
    setup.device = device_arg(a);
    const std::string device = setup.device.empty() ? "cpu" : setup.device;
    const int64_t reps = a.get_int("reps", 3, 1, 1000);
    const bool json = a.has("json");

    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");
    cbl_model* m_raw = nullptr;
    check(cbl_model_load(model.empty() ? nullptr : model.c_str(), nullptr, &m_raw));
    const model_ptr m(m_raw);
    const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    if (max_size + k_ctx_slack > cbl_model_n_ctx_train(m.get())) {
        throw usage_error("bench: --tokens beyond the model's training context of " +
                          std::to_string(cbl_model_n_ctx_train(m.get())));
    }
    const std::vector<int32_t> pool =
        random_tokens(m.get(), static_cast<size_t>(std::max<int64_t>(max_size, k_decode_prompt)));

    if (!json) {
        std::printf("model: %s, device %s, %d threads, median of %lld runs\n",
                    model.empty() ? "(default)" : model.c_str(), device.c_str(), setup.threads,
                    static_cast<long long>(reps));
        std::printf("%-8s %8s %8s %12s %10s\n", "kind", "tokens", "threads", "tokens/s", "ms");
        std::fflush(stdout);
    }
    std::vector<bench_row> rows;
    for (int64_t n : sizes) {
        rows.push_back(prefill ? bench_prefill(m.get(), n, setup, reps, pool, !json)
                               : bench_decode(m.get(), n, setup, reps, pool, !json));
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
            w.field("device", device);
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
