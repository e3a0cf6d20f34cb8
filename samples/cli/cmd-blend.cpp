// `cacheblend blend`: answers a question from document chunks with a blended prefill
// (docs/ARCHITECTURE.md, 'Blended prefill'), through the C ABI and its experimental knobs
// (cacheblend_experimental.h). Chunk KV comes from the store; a chunk that is not there yet is
// computed inside the request (honest cold TTFT) and stored after the answer, so the next run is
// warm. --warm precomputes missing chunks before the timed request instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>

#include "answer-json.h"
#include "blend-common.h"
#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "capi-util.h"
#include "commands.h"
#include "json-writer.h"
#include "progress-bar.h"
#include "sampling-flags.h"

namespace cacheblend::cli {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "blend",
            "blend --chunk FILE [--chunk FILE ...] --question Q [--mode M] [options]",
            "Answer a question from document chunks, reusing each chunk's cached KV (CacheBlend).\n"
            "Streams the answer to stdout and prints stats to stderr, or prints one JSON object\n"
            "with --json.",
            {
                model_flag(),
                {"chunk", "FILE", "a document chunk (repeat; prompt order)", true},
                {"question", "Q", "the question (required)"},
                mode_flag(),
                ratio_flag(),
                store_flag(),
                store_data_flag(),
                kv_budget_flag(),
                kv_remote_flag(),
                direct_io_flag(),
                {"warm", "", "precompute missing chunks before the timed request"},
                {"max-tokens", "N", "maximum tokens to generate (default 128)"},
                {"top-logprobs", "K", "record the K most likely first tokens (default 5)"},
                {"threads", "N",
                 "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
                device_flag(),
                {"json", "", "print one JSON object instead of streaming"},
            },
            0,
            "Modes: full recomputes every token; prefix reuses the first chunk's cached KV; reuse\n"
            "takes every cached chunk as is (only the question is computed); blend recomputes\n"
            "also the share R of reused tokens whose KV deviates most (auto: R from measured load\n"
            "and compute rates; calibrated: the ratio `cacheblend calibrate` recorded in the\n"
            "store). Without --warm, chunks missing from the store are computed inside the\n"
            "request (its TTFT is the cold one) and stored after the answer.\n"
            "Generation is greedy unless the sampling flags say otherwise (the seed defaults to\n"
            "0, so runs of different modes sample alike) and stops at an end-of-generation token\n"
            "or after --max-tokens.",
        };
        for (flag_spec& f : blend_tuning_flags()) c.flags.push_back(std::move(f));
        sampling_defaults d;
        d.random_seed = false;
        for (flag_spec& f : sampling_flags(d)) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

void write_json(const cbl_answer* answer, const cbl_model* model, const cbl_stats& st,
                int32_t threads, double warm_ms, double store_ms, uint64_t seed) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("text", std::string(cbl_answer_text(answer)));
    write_answer_tokens(w, answer);
    write_answer_top_logprobs(w, answer, model);
    w.key("stats").begin_object();
    write_blend_stats(w, st);
    if (st.notice && *st.notice) w.field("fallback_reason", std::string(st.notice));
    w.field("prompt_tokens", st.prompt_tokens);
    w.field("generated_tokens", st.generated_tokens);
    w.field("stop_reason", std::string(stop_name(st.stop_reason)));
    w.field("warm_ms", warm_ms);
    w.field("store_ms", store_ms);
    w.field("threads", threads);
    w.field("n_ctx", st.n_ctx);
    w.field("seed", seed);
    w.end_object();
    w.end_object();
    std::cout << "\n";
}

void print_stats(const cbl_answer* answer, const cbl_model* model, const cbl_stats& st) {
    std::fprintf(stderr,
                 "mode %s, r = %.3g | TTFT %.1f ms (load %.1f, select %.1f, compute %.1f: on "
                 "all rows %.1f, relocate %.1f) | "
                 "%lld tokens: %lld reused, %lld recomputed, %lld missed | %.2f MiB loaded | "
                 "decode %.1f tok/s | stop: %s\n",
                 mode_name(st.mode), static_cast<double>(st.ratio), st.ttft_ms, st.load_ms,
                 st.select_ms, st.compute_ms, st.dense_ms, st.relocate_ms,
                 static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.tokens_reused),
                 static_cast<long long>(st.tokens_recomputed),
                 static_cast<long long>(st.tokens_missed),
                 static_cast<double>(st.bytes_loaded) / (1024.0 * 1024.0), st.decode_tokens_per_s,
                 stop_name(st.stop_reason));
    if (st.tokens_remote > 0) {
        std::fprintf(stderr, "shared KV: %lld tokens, %.2f MiB from kv-remote\n",
                     static_cast<long long>(st.tokens_remote),
                     static_cast<double>(st.bytes_remote) / (1024.0 * 1024.0));
    }
    if (st.notice && *st.notice) std::fprintf(stderr, "note: %s\n", st.notice);
    const size_t n_top = cbl_answer_n_top_logprobs(answer);
    if (n_top > 0) std::fprintf(stderr, "first-token top logprobs:\n");
    for (size_t i = 0; i < n_top; ++i) {
        int32_t id = 0;
        float lp = 0;
        check(cbl_answer_top_logprob(answer, i, &id, &lp));
        std::fprintf(stderr, "  %9.4f  %6d  %s\n", static_cast<double>(lp), id,
                     printable(token_text(model, id)).c_str());
    }
}

bool stream_to_stdout(const char* piece, size_t len, int32_t, void*) {
    std::fwrite(piece, 1, len, stdout);
    std::fflush(stdout);
    return true;
}

}  // namespace

int run_blend(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;

    // Validate every flag and read the chunks before the model load.
    const std::vector<std::string> chunk_files = a.get_all("chunk");
    if (chunk_files.empty()) throw usage_error("blend: at least one --chunk FILE is required");
    const auto question = a.get("question");
    if (!question || question->empty()) throw usage_error("blend: --question is required");
    const int32_t mode = parse_enum(CBL_NAMES_MODE, "mode", a.get_or("mode", "blend"));
    const bool ratio_auto = a.get_or("ratio", "") == "auto";
    const bool ratio_calibrated = a.get_or("ratio", "") == "calibrated";
    const auto ratio = ratio_auto || ratio_calibrated
                           ? default_ratio()
                           : static_cast<float>(a.get_double("ratio", default_ratio(), 0.0, 1.0));
    const blend_tuning tuning = parse_blend_tuning(a);
    constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 128, 0, 1 << 24));
    gp.top_logprobs = static_cast<int32_t>(a.get_int("top-logprobs", 5, 0, i32_max));
    sampling_defaults sd;
    sd.random_seed = false;
    const sampling_choice sampling = parse_sampling(a, sd);
    sampling.apply_to(&gp);
    const auto threads =
        static_cast<int32_t>(a.get_int("threads", default_thread_count(), 1, 1024));
    const std::string device = device_arg(a);
    const bool json = a.has("json");
    std::vector<std::string> passages;
    for (const std::string& f : chunk_files) {
        passages.push_back(read_text_file(f));
        if (passages.back().find_first_not_of(" \t\r\n") == std::string::npos) {
            throw capi_error(CBL_INVALID_ARG, "chunk file " + f + " is empty");
        }
    }
    std::vector<const char*> chunk_ptrs;
    std::vector<size_t> chunk_lens;
    for (const std::string& p : passages) {
        chunk_ptrs.push_back(p.data());
        chunk_lens.push_back(p.size());
    }
    cbl_x_prompt prompt;
    cbl_x_prompt_init(&prompt);
    prompt.format = CBL_X_PROMPT_CHUNKS;
    prompt.chunks = chunk_ptrs.data();
    prompt.lens = chunk_lens.data();
    prompt.n_chunks = chunk_ptrs.size();
    prompt.question = question->c_str();

    std::string store_dir;
    const kvstore_ptr store = open_store(a, &store_dir);
    const model_ptr m = load_model(a.get_or("model", ""));
    size_t n_prompt = 0;
    check(cbl_x_prompt_tokens(m.get(), &prompt, &n_prompt));
    const auto n_train = static_cast<size_t>(cbl_model_n_ctx_train(m.get()));
    if (n_prompt > n_train) {
        throw capi_error(CBL_RANGE, "the prompt has " + std::to_string(n_prompt) + " tokens (" +
                                        std::to_string(passages.size()) +
                                        " chunks) but the model's context holds " +
                                        std::to_string(n_train) +
                                        ": pass fewer or shorter chunks");
    }
    gp.top_logprobs = std::min(gp.top_logprobs, cbl_model_n_vocab(m.get()));

    cbl_session_params sp;
    cbl_session_params_init(&sp);
    // Sized to the request: a full training context would cost memory and start-up time.
    sp.n_ctx = static_cast<int32_t>(
        std::min(n_prompt + static_cast<size_t>(std::max(gp.max_tokens, 1)), n_train));
    sp.n_threads = threads;
    if (!device.empty()) sp.device = device.c_str();
    cbl_session* s_raw = nullptr;
    check(cbl_session_create_with(m.get(), store.get(), &sp, &s_raw));
    const session_ptr sess(s_raw);
    cbl_x_blend_params bp = tuning.params(mode, ratio, ratio_auto);
    bp.calibrated_ratio = ratio_calibrated;
    check(cbl_x_session_set_blend(sess.get(), &bp));

    double warm_ms = 0;
    if (a.has("warm")) {
        const auto t = clock_type::now();
        progress_bar bar("precomputing chunks", 1, !json);
        check(cbl_x_session_precompute_prompt(sess.get(), &prompt, nullptr));
        bar.update(1);
        bar.finish();
        warm_ms = ms_between(t, clock_type::now());
    }

    if (!json) gp.on_token = stream_to_stdout;
    check(cbl_x_session_prefill_prompt(sess.get(), &prompt, nullptr));
    cbl_answer* a_raw = nullptr;
    check(cbl_session_generate(sess.get(), &gp, &a_raw));
    const answer_ptr answer(a_raw);

    // Store what this request computed from scratch, outside the timed path, so the next run
    // finds every chunk (full and prefix modes look up none or only the first one).
    const auto t_store = clock_type::now();
    check(cbl_x_session_precompute_prompt(sess.get(), &prompt, nullptr));
    const double store_ms = ms_between(t_store, clock_type::now());

    cbl_stats st;
    cbl_stats_init(&st);
    check(cbl_answer_stats(answer.get(), &st));
    if (json) {
        write_json(answer.get(), m.get(), st, threads, warm_ms, store_ms, sampling.seed);
    } else {
        const std::string text = cbl_answer_text(answer.get());
        if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
        std::fflush(stdout);
        print_stats(answer.get(), m.get(), st);
    }
    return 0;
}

}  // namespace cacheblend::cli
