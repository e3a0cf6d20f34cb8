// `cacheblend ask`: retrieval-augmented answering over a data directory made by `ingest` (DESIGN
// §2, §6, §8). Search top-k chunks, assemble [P][C1]..[Ck][Q] inside the chat template within the
// model's context (dropping the lowest-ranked chunks that do not fit, reported as chunks_dropped),
// blended prefill with the data directory's KV store, streamed answer, citations and stats.
// Chunks are formatted exactly as `ingest --precompute` formats them (default_rag_prompt), so the
// KV it stored is what this request finds; chunks missing from the store are computed inside the
// request and written back after the answer.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>

#include "blend-common.h"
#include "commands.h"
#include "core/blend.h"
#include "core/error.h"
#include "core/rag-prompt.h"
#include "core/session.h"
#include "corpus-common.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "ask",
            "ask --data DIR QUESTION [options]",
            "Retrieve the chunks that best match QUESTION and answer from them, reusing each\n"
            "chunk's cached KV (CacheBlend). Streams the answer to stdout, then citations; stats\n"
            "go to stderr. --json prints one JSON object instead.",
            {
                data_flag(),
                model_flag(),
                {"k", "K", "number of chunks to retrieve (default 4)"},
                {"mode", "M", "full, prefix, reuse or blend (default blend)"},
                {"ratio", "R|auto", "share of reused tokens recomputed by blend (default 0.15)"},
                {"search", "S", "hybrid (default), dense or bm25"},
                {"collection", "C", "only documents of this collection"},
                {"max-tokens", "N", "maximum tokens to generate (default 128)"},
                {"top-logprobs", "K", "record the K most likely first tokens (default 5)"},
                {"threads", "N",
                 "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
                {"compare-full", "", "also run the same prompt in full mode and report the speed-up"},
                {"json", "", "print one JSON object instead of streaming"},
            },
            1,
            "The prompt is preamble + chunks (best first) + question in the model's chat template.\n"
            "Chunks that do not fit the model's context (with room for --max-tokens) are dropped,\n"
            "lowest-ranked first, and counted in stats.chunks_dropped. Citations are byte ranges\n"
            "in the source files. Generation is greedy.",
        };
        for (flag_spec& f : blend_tuning_flags()) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

struct ask_outcome {
    generation_result r;
    blend_stats st;
};

// One timed request: prefill (blended per the engine's params) and greedy decode.
ask_outcome run_request(session& sess, blend_engine& engine, const blend_request& req,
                        const generation_params& gp, const token_callback& on_token) {
    ask_outcome o;
    const auto t_request = clock_type::now();
    const std::vector<float>& logits = engine.prefill(req, &o.st);
    o.r = sess.generate_after_prefill(logits, gp, on_token, t_request);
    return o;
}

}  // namespace

int run_ask(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (a.positional().size() != 1) throw usage_error("ask: give exactly one QUESTION");
    const std::string question = a.positional()[0];
    if (question.find_first_not_of(" \t\r\n") == std::string::npos) {
        throw usage_error("ask: QUESTION is empty");
    }

    // Validate every flag before loading anything.
    search_params sp;
    sp.k = static_cast<int32_t>(a.get_int("k", 4, 1, 1000));
    if (!parse_search_mode(a.get_or("search", "hybrid"), &sp.mode)) {
        throw usage_error("ask: --search must be hybrid, dense or bm25");
    }
    sp.filter.collection = a.get_or("collection", "");
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
    const bool compare_full = a.has("compare-full");

    // Retrieve.
    cli_corpus c = open_cli_corpus(a, "ask");
    const auto t_search = clock_type::now();
    const search_result found = c.docs->search(question, sp);
    const double search_ms = ms_between(t_search, clock_type::now());
    if (!found.notice.empty() && !json) {
        std::fprintf(stderr, "cacheblend: note: %s\n", found.notice.c_str());
    }
    std::vector<search_hit> hits;
    for (const search_hit& h : found.hits) {
        if (h.text.find_first_not_of(" \t\r\n") != std::string::npos) hits.push_back(h);
    }
    if (hits.empty()) {
        throw error(status::invalid_arg, "no chunk of " + *a.get("data") +
                                           " matches the question (ingest documents first)");
    }

    // Assemble within the context budget: drop the lowest-ranked chunks until it fits.
    const std::shared_ptr<const model> m = load_model(a, false);
    const tokenizer& vocab = m->vocab();
    gp.top_logprobs = std::min(gp.top_logprobs, m->hparams().n_vocab);
    const int64_t n_train = m->hparams().n_ctx_train;
    const int64_t gen_room = std::min<int64_t>(gp.max_tokens, n_train / 4);
    std::vector<std::string> passages;
    for (const search_hit& h : hits) passages.push_back(h.text);
    blend_request req = build_blend_request(*m, default_rag_prompt(passages, question));
    int64_t n_prompt = request_tokens(req);
    int64_t chunks_dropped = 0;
    while (n_prompt + gen_room > n_train && !passages.empty()) {
        passages.pop_back();
        hits.pop_back();
        ++chunks_dropped;
        req = build_blend_request(*m, default_rag_prompt(passages, question));
        n_prompt = request_tokens(req);
    }
    if (passages.empty() || n_prompt > n_train) {
        throw error(status::range,
                    fmt("the question and the best chunk do not fit the model's context of %lld "
                        "tokens: ask a shorter question or re-ingest with smaller --chunk-tokens",
                        static_cast<long long>(n_train)));
    }
    if (chunks_dropped > 0 && !json) {
        std::fprintf(stderr,
                     "cacheblend: note: %lld lowest-ranked chunk(s) dropped to fit the model's "
                     "context of %lld tokens\n",
                     static_cast<long long>(chunks_dropped), static_cast<long long>(n_train));
    }

    session_params sesp;
    sesp.n_ctx = static_cast<int32_t>(std::min<int64_t>(n_prompt + gp.max_tokens, n_train));
    sesp.n_threads = threads;
    session sess(m, sesp);
    blend_engine engine(sess, c.kv, bp);

    const token_callback on_token = [json](token_id, const std::string& piece) {
        if (!json) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
        return true;
    };
    const ask_outcome main_run = run_request(sess, engine, req, gp, on_token);
    if (!json) {
        if (main_run.r.text.empty() || main_run.r.text.back() != '\n') std::fputc('\n', stdout);
        std::fflush(stdout);
    }

    // Store what this request computed from scratch (outside the timed path) and record the keys
    // in the catalog, so the next request finds every chunk and removals delete their KV.
    const auto t_store = clock_type::now();
    engine.write_back_misses();
    for (size_t i = 0; i < req.chunks.size(); ++i) {
        engine.precompute_chunk(req.preamble, req.chunks[i]);
        c.docs->cat().set_kv_key(hits[i].chunk_id, engine.key_of(req.preamble, req.chunks[i]).hex());
    }
    const double store_ms = ms_between(t_store, clock_type::now());

    // The same prompt in full mode: its TTFT is the baseline of the speed-up.
    double full_ttft_ms = 0;
    if (compare_full) {
        blend_params fp = bp;
        fp.mode = blend_mode::full;
        engine.set_params(fp);
        generation_params fgp = gp;
        fgp.max_tokens = 1;  // only the first token is timed
        const ask_outcome full_run =
            run_request(sess, engine, req, fgp, [](token_id, const std::string&) { return true; });
        full_ttft_ms = full_run.r.stats.ttft_ms;
    }
    const double ttft = main_run.r.stats.ttft_ms;
    const double speedup = compare_full && ttft > 0 ? full_ttft_ms / ttft : 0;

    const generation_result& r = main_run.r;
    const blend_stats& st = main_run.st;
    if (json) {
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
        write_blend_stats(w, st, ttft, r.stats.decode_tokens_per_s);
        w.field("chunks_used", static_cast<int64_t>(hits.size()));
        w.field("chunks_dropped", chunks_dropped);
        w.field("prompt_tokens", n_prompt);
        w.field("generated_tokens", r.stats.generated_tokens);
        w.field("stop_reason", r.stop_reason);
        w.field("search_mode", search_mode_name(found.mode));
        w.field("search_ms", search_ms);
        w.field("store_ms", store_ms);
        w.field("threads", threads);
        w.field("n_ctx", sesp.n_ctx);
        if (compare_full) {
            w.field("full_ttft_ms", full_ttft_ms);
            w.field("speedup_vs_full", speedup);
        }
        w.end_object();
        w.key("citations").begin_array();
        for (const search_hit& h : hits) {
            w.begin_object();
            w.field("uri", h.uri).field("start", h.start).field("end", h.end);
            w.field("score", h.score);
            w.end_object();
        }
        w.end_array();
        if (!found.notice.empty()) w.field("notice", found.notice);
        w.end_object();
        std::cout << "\n";
        return 0;
    }

    std::printf("\ncitations:\n");
    for (size_t i = 0; i < hits.size(); ++i) {
        const search_hit& h = hits[i];
        std::printf("[%zu] %s:%lld-%lld %.4f\n", i + 1, h.uri.c_str(),
                    static_cast<long long>(h.start), static_cast<long long>(h.end), h.score);
    }
    std::fflush(stdout);
    std::fprintf(stderr,
                 "mode %s, r = %.3g | TTFT %.1f ms (load %.1f, select %.1f, compute %.1f) | "
                 "%lld tokens: %lld reused, %lld recomputed, %lld missed | %.2f MiB loaded | "
                 "%zu chunks used, %lld dropped | decode %.1f tok/s | stop: %s\n",
                 st.mode.c_str(), static_cast<double>(st.ratio), ttft, st.load_ms, st.select_ms,
                 st.compute_ms, static_cast<long long>(st.tokens_total),
                 static_cast<long long>(st.tokens_reused),
                 static_cast<long long>(st.tokens_recomputed),
                 static_cast<long long>(st.tokens_missed),
                 static_cast<double>(st.bytes_loaded) / (1024.0 * 1024.0), hits.size(),
                 static_cast<long long>(chunks_dropped), r.stats.decode_tokens_per_s,
                 r.stop_reason.c_str());
    if (!st.fallback_reason.empty()) std::fprintf(stderr, "note: %s\n", st.fallback_reason.c_str());
    if (compare_full) {
        std::fprintf(stderr, "full mode TTFT %.1f ms: %s TTFT is %.2fx faster\n", full_ttft_ms,
                     st.mode.c_str(), speedup);
    }
    return 0;
}

}  // namespace cacheblend::cli
