// `cacheblend ask`: retrieval-augmented answering over a data directory made by `ingest`
// (docs/ARCHITECTURE.md, 'Ask path'), written against the public C ABI only, as an application
// would: open a runtime, make a session, cbl_session_ask with a streaming callback, print citations
// and stats. The library searches the top-k chunks, assembles [P][C1]..[Ck][Q] in the chat template
// within the session's context (dropping the lowest-ranked chunks that do not fit), prefills with
// blending over the data directory's KV store and stores chunks it had to compute.
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>

#include "answer-json.h"
#include "cacheblend.h"
#include "blend-common.h"
#include "capi-util.h"
#include "commands.h"
#include "corpus-common.h"
#include "json-writer.h"
#include "sampling-flags.h"

namespace cacheblend::cli {
namespace {

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
                kv_budget_flag(),
                kv_remote_flag(),
                {"k", "K", "number of chunks to retrieve (default 4)"},
                mode_flag(),
                ratio_flag(),
                select_flag(),
                {"kv-format", "F",
                 "chunk KV format in the store: " + enum_names(CBL_NAMES_KV_FORMAT) + " (default " +
                     enum_name(CBL_NAMES_KV_FORMAT, CBL_KV_DEFAULT) + ")"},
                {"search", "S",
                 enum_names(CBL_NAMES_SEARCH) + " (default " +
                     enum_name(CBL_NAMES_SEARCH, CBL_SEARCH_DEFAULT) + ")"},
                {"max-tokens", "N", "maximum tokens to generate (default 128)"},
                {"top-logprobs", "K", "record the K most likely first tokens (default 5)"},
                {"ctx", "N", "session context in tokens (default: the model's, at most 8192)"},
                {"threads", "N", "CPU threads (default: all cores)"},
                device_flag(),
                {"compare-full", "",
                 "also run the same prompt in full mode and report the speed-up"},
                {"json", "", "print one JSON object instead of streaming"},
            },
            1,
            "The prompt is preamble + chunks (best first) + question in the model's chat template.\n"
            "Chunks that do not fit the context (with room for --max-tokens) are dropped,\n"
            "lowest-ranked first, and counted in stats.chunks_dropped. Citations are byte ranges\n"
            "in the source files. Generation is greedy with a repeat penalty of 1.1 over the last\n"
            "64 tokens (the library's ask defaults): answers keep to the passages' wording and do\n"
            "not loop; --repeat-penalty 1 gives plain greedy. --compare-full samples the full\n"
            "run with the same settings and seed.",
        };
        for (flag_spec& f : filter_flags()) c.flags.push_back(std::move(f));
        sampling_defaults d;
        d.repeat_penalty = "1.1";
        for (flag_spec& f : sampling_flags(d)) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

bool stream_to_stdout(const char* piece, size_t len, int32_t, void*) {
    std::fwrite(piece, 1, len, stdout);
    std::fflush(stdout);
    return true;
}

void write_json(const cbl_answer* answer, const cbl_model* model, const cbl_stats& st,
                int32_t threads, bool compare_full, uint64_t seed) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("text", std::string(cbl_answer_text(answer)));
    write_answer_tokens(w, answer);
    write_answer_top_logprobs(w, answer, model);

    w.key("stats").begin_object();
    write_blend_stats(w, st);
    w.field("chunks_used", st.chunks_used);
    w.field("chunks_dropped", st.chunks_dropped);
    w.field("prompt_tokens", st.prompt_tokens);
    w.field("generated_tokens", st.generated_tokens);
    w.field("stop_reason", std::string(stop_name(st.stop_reason)));
    w.field("search_mode", std::string(search_name(st.search_mode)));
    w.field("search_ms", st.search_ms);
    w.field("store_ms", st.store_ms);
    w.field("threads", threads);
    w.field("n_ctx", st.n_ctx);
    w.field("seed", seed);
    if (compare_full) {
        w.field("full_ttft_ms", st.full_ttft_ms);
        w.field("speedup_vs_full", st.ttft_ms > 0 ? st.full_ttft_ms / st.ttft_ms : 0.0);
    }
    w.end_object();

    w.key("citations").begin_array();
    for (size_t i = 0; i < cbl_answer_n_citations(answer); ++i) {
        cbl_hit h;
        cbl_hit_init(&h);
        check(cbl_answer_citation(answer, i, &h));
        w.begin_object();
        w.field("uri", std::string(h.uri)).field("start", h.start).field("end", h.end);
        w.field("score", h.score);
        if (h.page > 0) w.field("page", static_cast<int64_t>(h.page));
        if (h.heading && *h.heading) w.field("heading", std::string(h.heading));
        w.end_object();
    }
    w.end_array();
    if (st.notice && *st.notice) w.field("notice", std::string(st.notice));
    w.end_object();
    std::cout << "\n";
}

void write_human(const cbl_answer* answer, const cbl_stats& st, bool compare_full) {
    const std::string text = cbl_answer_text(answer);
    if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
    std::printf("\ncitations:\n");
    for (size_t i = 0; i < cbl_answer_n_citations(answer); ++i) {
        cbl_hit h;
        cbl_hit_init(&h);
        check(cbl_answer_citation(answer, i, &h));
        std::string where;
        if (h.page > 0) where += " page " + std::to_string(h.page);
        if (h.heading && *h.heading) where += std::string(" \"") + h.heading + "\"";
        std::printf("[%zu] %s:%lld-%lld%s %.4f\n", i + 1, h.uri, static_cast<long long>(h.start),
                    static_cast<long long>(h.end), where.c_str(), h.score);
    }
    std::fflush(stdout);
    if (st.chunks_dropped > 0) {
        std::fprintf(stderr,
                     "cacheblend: note: %d lowest-ranked chunk(s) dropped to fit the context of "
                     "%d tokens\n",
                     st.chunks_dropped, st.n_ctx);
    }
    std::fprintf(stderr,
                 "mode %s, r = %.3g | TTFT %.1f ms (load %.1f, select %.1f, compute %.1f) | "
                 "%lld tokens: %lld reused, %lld recomputed, %lld missed | %.2f MiB loaded | "
                 "%d chunks used, %d dropped | decode %.1f tok/s | stop: %s\n",
                 mode_name(st.mode), static_cast<double>(st.ratio), st.ttft_ms, st.load_ms,
                 st.select_ms, st.compute_ms, static_cast<long long>(st.prompt_tokens),
                 static_cast<long long>(st.tokens_reused),
                 static_cast<long long>(st.tokens_recomputed),
                 static_cast<long long>(st.tokens_missed),
                 static_cast<double>(st.bytes_loaded) / (1024.0 * 1024.0), st.chunks_used,
                 st.chunks_dropped, st.decode_tokens_per_s, stop_name(st.stop_reason));
    if (st.tokens_remote > 0) {
        std::fprintf(stderr, "shared KV: %lld tokens, %.2f MiB from kv-remote\n",
                     static_cast<long long>(st.tokens_remote),
                     static_cast<double>(st.bytes_remote) / (1024.0 * 1024.0));
    }
    if (st.notice && *st.notice) std::fprintf(stderr, "note: %s\n", st.notice);
    if (compare_full) {
        std::fprintf(stderr, "full mode TTFT %.1f ms: %s TTFT is %.2fx faster\n", st.full_ttft_ms,
                     mode_name(st.mode), st.ttft_ms > 0 ? st.full_ttft_ms / st.ttft_ms : 0.0);
    }
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
    if (!a.has("data") || a.get("data")->empty()) throw usage_error("ask: --data DIR is required");
    const std::string data = *a.get("data");
    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");

    // Validate every flag before loading anything.
    constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    const std::string mode = a.get_or("mode", "blend");
    sp.mode = parse_enum(CBL_NAMES_MODE, "mode", mode);
    if (a.get_or("ratio", "") == "auto") {
        sp.auto_ratio = true;
    } else if (a.get_or("ratio", "") == "calibrated") {
        sp.calibrated_ratio = true;  // `cacheblend calibrate` recorded it in the store
    } else if (a.has("ratio")) {
        const double r = a.get_double("ratio", default_ratio(), 0.0, 1.0);
        if (r == 0.0) {
            throw usage_error("--ratio 0 recomputes nothing: use --mode reuse");
        }
        sp.recompute_ratio = static_cast<float>(r);
    }
    if (auto f = a.get("kv-format"))
        sp.kv_format = parse_enum(CBL_NAMES_KV_FORMAT, "kv-format", *f);
    const int32_t select = parse_select(a);
    sp.n_ctx = static_cast<int32_t>(a.get_int("ctx", 0, 0, i32_max));
    const auto threads = static_cast<int32_t>(a.get_int("threads", 0, 0, 1024));
    sp.n_threads = threads;

    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.k = static_cast<int32_t>(a.get_int("k", 4, 1, 1000));
    ap.search_mode = parse_enum(CBL_NAMES_SEARCH, "search", a.get_or("search", "hybrid"));
    const doc_filter filter = parse_filter_flags(a, "ask");
    filter.apply_to(&ap);
    ap.max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 128, 1, 1 << 24));
    ap.top_logprobs = static_cast<int32_t>(a.get_int("top-logprobs", 5, 0, i32_max));
    ap.compare_full = a.has("compare-full");
    const sampling_choice sampling = parse_sampling(a, {});
    sampling.apply_to(&ap);  // flags left out keep the library's ask defaults
    const bool json = a.has("json");
    if (!json) ap.on_token = stream_to_stdout;

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = data.c_str();
    if (!model.empty()) rp.model_path = model.c_str();
    rp.n_threads = threads;
    const std::string device = device_arg(a);
    if (!device.empty()) rp.device = device.c_str();
    rp.kv_budget_bytes = parse_kv_budget(a);
    rp.kv_remote = kv_remote_of(a);
    const runtime_ptr rt = open_existing_runtime(&rp);
    cbl_model* m_raw = nullptr;
    check(cbl_runtime_model(rt.get(), &m_raw));
    const model_ptr m(m_raw);
    // Top alternatives beyond the vocabulary are all there is.
    const int32_t n_vocab = cbl_model_n_vocab(m.get());
    if (ap.top_logprobs > n_vocab) ap.top_logprobs = n_vocab;

    cbl_session* s_raw = nullptr;
    check(cbl_session_create(rt.get(), &sp, &s_raw));
    const session_ptr sess(s_raw);
    if (a.has("select")) {
        // The policy is an experimental knob: the session's blending as the stable params set it,
        // with the policy added.
        cbl_x_blend_params bp;
        cbl_x_blend_params_init(&bp);
        bp.mode = sp.mode;
        if (sp.recompute_ratio > 0) bp.recompute_ratio = sp.recompute_ratio;
        bp.auto_ratio = sp.auto_ratio;
        bp.calibrated_ratio = sp.calibrated_ratio;
        bp.kv_format = sp.kv_format;
        bp.select = select;
        check(cbl_x_session_set_blend(sess.get(), &bp));
    }
    cbl_answer* a_raw = nullptr;
    check(cbl_session_ask(sess.get(), question.c_str(), &ap, &a_raw));
    const answer_ptr answer(a_raw);
    cbl_stats st;
    cbl_stats_init(&st);
    check(cbl_answer_stats(answer.get(), &st));

    if (json) {
        write_json(answer.get(), m.get(), st, threads, ap.compare_full, sampling.seed);
    } else {
        write_human(answer.get(), st, ap.compare_full);
    }
    return 0;
}

}  // namespace cacheblend::cli
