// `cacheblend generate`: tokenizes a prompt (plain or chat-templated), generates and
// either streams the answer or prints one JSON object. Written against the public C ABI only:
// cbl_session_prefill_text + cbl_session_generate.
#include <cstdio>
#include <iostream>
#include <limits>

#include "answer-json.h"
#include "cacheblend.h"
#include "capi-util.h"
#include "commands.h"
#include "json-writer.h"
#include "sampling-flags.h"
#include "sigint.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "generate",
            "generate --prompt P [--chat] [--system S] [options]",
            "Generate text from a prompt. Streams the answer to stdout and prints timing stats to "
            "stderr,\nor prints one JSON object with --json.",
            {
                model_flag(),
                {"prompt", "P", "prompt text (required)"},
                {"chat", "", "render the prompt as a user message with the model's chat template"},
                {"system", "S", "system message (with --chat)"},
                {"max-tokens", "N", "maximum tokens to generate (default 128)"},
                {"top-logprobs", "K", "record the K most likely first tokens (default 0)"},
                {"threads", "N", "CPU threads (default: all cores)"},
                device_flag(),
                {"ctx", "N", "context size (default: the model's training context, at most 8192)"},
                {"parse-special", "",
                 "match special-token text such as <|im_start|> in a plain prompt"},
                {"json", "", "print one JSON object instead of streaming"},
            },
            0,
            "Plain prompts get BOS/EOS as the GGUF's add_bos_token/add_eos_token flags say;\n"
            "--chat renders [system,] user and parses the template's special tokens. Generation\n"
            "stops at an end-of-generation token or after --max-tokens.",
        };
        for (flag_spec& f : sampling_flags({})) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

bool stream_piece(const char* piece, size_t len, int32_t, void* user) {
    if (*static_cast<bool*>(user)) {  // streaming (not --json)
        std::fwrite(piece, 1, len, stdout);
        std::fflush(stdout);
    }
    return !sigint_received();
}

struct run_info {
    uint64_t seed = 0;
    int32_t threads = 0;
    const int32_t* prompt = nullptr;
    size_t n_prompt = 0;
};

void write_json(const cbl_answer* answer, const cbl_model* model, const cbl_stats& st,
                const run_info& info) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("text", std::string(cbl_answer_text(answer)));
    write_answer_tokens(w, answer);
    w.key("prompt_tokens").begin_array();
    for (size_t i = 0; i < info.n_prompt; ++i) w.value(info.prompt[i]);
    w.end_array();
    write_answer_top_logprobs(w, answer, model);
    const double prefill_tps = st.prefill_ms > 0 ? 1000.0 * static_cast<double>(info.n_prompt) / st.prefill_ms : 0;
    w.key("stats").begin_object();
    w.field("prefill_ms", st.prefill_ms);
    w.field("prefill_tokens_per_s", prefill_tps);
    w.field("decode_tokens_per_s", st.decode_tokens_per_s);
    w.field("ttft_ms", st.ttft_ms);
    w.field("prompt_tokens", static_cast<int64_t>(info.n_prompt));
    w.field("generated_tokens", st.generated_tokens);
    w.field("stop_reason", std::string(sigint_received() ? "stopped" : stop_name(st.stop_reason)));
    w.field("seed", info.seed);
    w.field("threads", info.threads);
    w.field("n_ctx", st.n_ctx);
    w.end_object();
    w.end_object();
    std::cout << "\n";
}

void print_stats(const cbl_answer* answer, const cbl_model* model, const cbl_stats& st,
                 size_t n_prompt) {
    const double prefill_tps = st.prefill_ms > 0 ? 1000.0 * static_cast<double>(n_prompt) / st.prefill_ms : 0;
    std::fprintf(stderr,
                 "prompt: %zu tokens | prefill: %.1f ms, %.1f tok/s | decode: %d tokens, %.1f "
                 "tok/s | TTFT: %.1f ms | stop: %s\n",
                 n_prompt, st.prefill_ms, prefill_tps, st.generated_tokens, st.decode_tokens_per_s,
                 st.ttft_ms, stop_name(st.stop_reason));
    if (cbl_answer_n_top_logprobs(answer) > 0) {
        std::fprintf(stderr, "first-token top logprobs:\n");
        for (size_t i = 0; i < cbl_answer_n_top_logprobs(answer); ++i) {
            int32_t id = 0;
            float lp = 0;
            check(cbl_answer_top_logprob(answer, i, &id, &lp));
            std::fprintf(stderr, "  %9.4f  %6d  %s\n", lp, id, printable(token_text(model, id)).c_str());
        }
    }
}

}  // namespace

int run_generate(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;

    // Validate every flag before the (slow) model load.
    const auto prompt = a.get("prompt");
    if (!prompt) throw usage_error("generate: --prompt is required");
    if (a.has("system") && !a.has("chat")) throw usage_error("--system needs --chat");
    constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 128, 1, 1 << 24));
    const sampling_choice sampling = parse_sampling(a, {});
    sampling.apply_to(&gp);
    run_info info;
    info.seed = sampling.seed;
    gp.top_logprobs = static_cast<int32_t>(a.get_int("top-logprobs", 0, 0, i32_max));
    info.threads = static_cast<int32_t>(a.get_int("threads", 0, 0, 1024));
    const std::string device = device_arg(a);
    const auto ctx = static_cast<int32_t>(a.get_int("ctx", 0, 0, i32_max));
    bool stream = !a.has("json");
    gp.on_token = stream_piece;
    gp.user_data = &stream;
    cbl_prompt_params pp;
    cbl_prompt_params_init(&pp);
    pp.chat = a.has("chat");
    pp.parse_special = a.has("parse-special");
    const std::string system = a.get_or("system", "");
    if (a.has("system")) pp.system = system.c_str();
    const std::string model_path = a.get_or("model", "");
    if (a.has("model") && model_path.empty()) throw usage_error("--model: empty path");

    cbl_model* m_raw = nullptr;
    check(cbl_model_load(model_path.empty() ? nullptr : model_path.c_str(), nullptr, &m_raw));
    const model_ptr m(m_raw);
    if (gp.top_logprobs > cbl_model_n_vocab(m.get())) gp.top_logprobs = cbl_model_n_vocab(m.get());
    if (ctx > cbl_model_n_ctx_train(m.get())) {
        throw usage_error("--ctx: the model's training context is " +
                          std::to_string(cbl_model_n_ctx_train(m.get())) + " tokens");
    }
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = ctx;
    sp.n_threads = info.threads;
    sp.mode = CBL_MODE_FULL;
    if (!device.empty()) sp.device = device.c_str();
    cbl_session* s_raw = nullptr;
    check(cbl_session_create_with(m.get(), nullptr, &sp, &s_raw));  // plain prefill: no store
    const session_ptr sess(s_raw);

    check(cbl_session_prefill_text(sess.get(), prompt->data(), prompt->size(), &pp, nullptr));
    info.prompt = cbl_session_prompt_tokens(sess.get(), &info.n_prompt);
    const std::vector<int32_t> prompt_ids(info.prompt, info.prompt + info.n_prompt);
    info.prompt = prompt_ids.data();
    sigint_guard guard;
    cbl_answer* a_raw = nullptr;
    check(cbl_session_generate(sess.get(), &gp, &a_raw));
    const answer_ptr answer(a_raw);
    cbl_stats st;
    cbl_stats_init(&st);
    check(cbl_answer_stats(answer.get(), &st));

    if (!stream) {
        write_json(answer.get(), m.get(), st, info);
    } else {
        const std::string text = cbl_answer_text(answer.get());
        if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
        std::fflush(stdout);
        print_stats(answer.get(), m.get(), st, info.n_prompt);
    }
    return 0;
}

}  // namespace cacheblend::cli
