// `cacheblend blend`: answers a question from document chunks with a blended prefill (DESIGN §4,
// §8). Chunk KV comes from the store; a chunk that is not there yet is computed inside the request
// (honest cold TTFT) and stored after the answer, so the next run is warm. --warm precomputes
// missing chunks before the timed request instead.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>

#include "blend-common.h"
#include "commands.h"
#include "model-common.h"
#include "core/error.h"
#include "core/rag-prompt.h"
#include "json-writer.h"
#include "progress-bar.h"

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
                {"mode", "M", "full, prefix, reuse or blend (default blend)"},
                {"ratio", "R|auto", "share of reused tokens recomputed by blend (default 0.15)"},
                store_flag(),
                direct_io_flag(),
                {"warm", "", "precompute missing chunks before the timed request"},
                {"max-tokens", "N", "maximum tokens to generate (default 128)"},
                {"top-logprobs", "K", "record the K most likely first tokens (default 5)"},
                {"threads", "N",
                 "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
                {"json", "", "print one JSON object instead of streaming"},
            },
            0,
            "Modes: full recomputes every token; prefix reuses the first chunk's cached KV; reuse\n"
            "takes every cached chunk as is (only the question is computed); blend recomputes\n"
            "also the share R of reused tokens whose KV deviates most (auto: R from measured load\n"
            "and compute rates). Without --warm, chunks missing from the store are computed\n"
            "inside the request (its TTFT is the cold one) and stored after the answer.\n"
            "Generation is greedy and stops at an end-of-generation token or after --max-tokens.",
        };
        for (flag_spec& f : blend_tuning_flags()) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

void write_json(const generation_result& r, const blend_stats& st, const tokenizer& vocab,
                int64_t prompt_tokens, int32_t threads, int32_t n_ctx, double warm_ms,
                double store_ms) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("text", r.text);
    w.key("tokens").begin_array();
    for (token_id t : r.tokens) w.value(t);
    w.end_array();
    w.key("top_logprobs").begin_array();
    for (const auto& [id, lp] : r.top_logprobs) {
        w.begin_object();
        w.field("id", id);
        w.field("text", vocab.token_to_piece(id, true));
        w.field("logprob", lp);
        w.end_object();
    }
    w.end_array();
    w.key("stats").begin_object();
    write_blend_stats(w, st, r.stats.ttft_ms, r.stats.decode_tokens_per_s);
    w.field("prompt_tokens", prompt_tokens);
    w.field("generated_tokens", r.stats.generated_tokens);
    w.field("stop_reason", r.stop_reason);
    w.field("warm_ms", warm_ms);
    w.field("store_ms", store_ms);
    w.field("threads", threads);
    w.field("n_ctx", n_ctx);
    w.end_object();
    w.end_object();
    std::cout << "\n";
}

void print_stats(const generation_result& r, const blend_stats& st, const tokenizer& vocab) {
    std::fprintf(stderr,
                 "mode %s, r = %.3g | TTFT %.1f ms (load %.1f, select %.1f, compute %.1f) | "
                 "%lld tokens: %lld reused, %lld recomputed, %lld missed | %.2f MiB loaded | "
                 "decode %.1f tok/s | stop: %s\n",
                 st.mode.c_str(), static_cast<double>(st.ratio), r.stats.ttft_ms, st.load_ms,
                 st.select_ms, st.compute_ms, static_cast<long long>(st.tokens_total),
                 static_cast<long long>(st.tokens_reused),
                 static_cast<long long>(st.tokens_recomputed),
                 static_cast<long long>(st.tokens_missed),
                 static_cast<double>(st.bytes_loaded) / (1024.0 * 1024.0),
                 r.stats.decode_tokens_per_s, r.stop_reason.c_str());
    if (!st.fallback_reason.empty()) std::fprintf(stderr, "note: %s\n", st.fallback_reason.c_str());
    if (!r.top_logprobs.empty()) {
        std::fprintf(stderr, "first-token top logprobs:\n");
        for (const auto& [id, lp] : r.top_logprobs) {
            std::fprintf(stderr, "  %9.4f  %6d  %s\n", lp, id,
                         printable(vocab.token_to_piece(id, true)).c_str());
        }
    }
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
    blend_params bp;
    const std::string mode = a.get_or("mode", "blend");
    if (!parse_blend_mode(mode, &bp.mode)) {
        throw usage_error("--mode: expected full, prefix, reuse or blend, got '" + mode + "'");
    }
    if (a.get_or("ratio", "") == "auto") {
        bp.ratio_auto = true;
    } else {
        bp.ratio = static_cast<float>(a.get_double("ratio", bp.ratio, 0.0, 1.0));
    }
    apply_blend_tuning(a, &bp);
    constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();
    generation_params gp;
    gp.max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 128, 0, 1 << 24));
    gp.top_logprobs = static_cast<int32_t>(a.get_int("top-logprobs", 5, 0, i32_max));
    const auto threads =
        static_cast<int32_t>(a.get_int("threads", default_thread_count(), 1, 1024));
    const bool json = a.has("json");
    std::vector<std::string> passages;
    for (const std::string& f : chunk_files) {
        passages.push_back(read_text_file(f));
        if (passages.back().find_first_not_of(" \t\r\n") == std::string::npos) {
            throw error(status::invalid_arg, "chunk file " + f + " is empty");
        }
    }

    const std::shared_ptr<const model> m = load_model(a, false);
    const tokenizer& vocab = m->vocab();
    const blend_request req = build_blend_request(*m, default_rag_prompt(passages, *question));
    const int64_t n_prompt = request_tokens(req);
    const int64_t n_train = m->hparams().n_ctx_train;
    if (n_prompt > n_train) {
        throw error(status::range,
                    fmt("the prompt has %lld tokens (%zu chunks) but the model's context holds "
                        "%lld: pass fewer or shorter chunks",
                        static_cast<long long>(n_prompt), req.chunks.size(),
                        static_cast<long long>(n_train)));
    }
    gp.top_logprobs = std::min(gp.top_logprobs, m->hparams().n_vocab);

    session_params sp;
    // Sized to the request: a full training context would cost memory and start-up time.
    sp.n_ctx = static_cast<int32_t>(std::min(n_prompt + gp.max_tokens, n_train));
    sp.n_threads = threads;
    session sess(m, sp);
    blend_engine engine(sess, open_store(a), bp);

    double warm_ms = 0;
    if (a.has("warm")) {
        const auto t = clock_type::now();
        progress_bar bar("precomputing chunks", static_cast<int64_t>(req.chunks.size()), !json);
        for (size_t i = 0; i < req.chunks.size(); ++i) {
            engine.precompute_chunk(req.preamble, req.chunks[i]);
            bar.update(static_cast<int64_t>(i + 1));
        }
        bar.finish();
        warm_ms = ms_between(t, clock_type::now());
    }

    const token_callback on_token = [json](token_id, const std::string& piece) {
        if (!json) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
        return true;
    };
    blend_stats st;
    const auto t_request = clock_type::now();
    const std::vector<float>& logits = engine.prefill(req, &st);
    const generation_result r = sess.generate_after_prefill(logits, gp, on_token, t_request);

    // Store what this request computed from scratch, outside the timed path, so the next run
    // finds every chunk (full and prefix modes look up none or only the first one).
    const auto t_store = clock_type::now();
    engine.write_back_misses();
    for (const auto& c : req.chunks) engine.precompute_chunk(req.preamble, c);
    const double store_ms = ms_between(t_store, clock_type::now());

    if (json) {
        write_json(r, st, vocab, n_prompt, threads, sp.n_ctx, warm_ms, store_ms);
    } else {
        if (r.text.empty() || r.text.back() != '\n') std::fputc('\n', stdout);
        std::fflush(stdout);
        print_stats(r, st, vocab);
    }
    return 0;
}

}  // namespace cacheblend::cli
