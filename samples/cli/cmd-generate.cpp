// `cacheblend generate`: tokenizes a prompt (plain or chat-templated, DESIGN §8), generates and
// either streams the answer or prints one JSON object.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <limits>
#include <random>

#include "commands.h"
#include "model-common.h"
#include "core/chat-template.h"
#include "core/error.h"
#include "core/session.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) { g_interrupted = 1; }

// First Ctrl-C stops generation cleanly (stats still print); a second one kills the process
// because SA_RESETHAND restores the default action.
class sigint_guard {
public:
    sigint_guard() {
        g_interrupted = 0;
        struct sigaction sa {};
        sa.sa_handler = on_sigint;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        installed_ = sigaction(SIGINT, &sa, &old_) == 0;
    }
    ~sigint_guard() {
        if (installed_) sigaction(SIGINT, &old_, nullptr);
    }

private:
    struct sigaction old_ {};
    bool installed_ = false;
};

const command_spec& spec() {
    static const sampler_params d;
    static const command_spec s{
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
            {"temp", "T", "sampling temperature; 0 = greedy (default 0)"},
            {"top-k", "K",
             "keep the K most likely tokens; 0 = off (default " + std::to_string(d.top_k) + ")"},
            {"top-p", "P", "nucleus sampling threshold; 1 = off (default 0.95)"},
            {"min-p", "P", "drop tokens below P x the best probability; 0 = off (default 0.05)"},
            {"seed", "S", "sampling seed (default: random, reported in --json stats)"},
            {"top-logprobs", "K", "record the K most likely first tokens (default 0)"},
            {"threads", "N",
             "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
            {"ctx", "N", "context size (default: prompt + max-tokens, capped at training size)"},
            {"parse-special", "",
             "match special-token text such as <|im_start|> in a plain prompt"},
            {"json", "", "print one JSON object instead of streaming"},
        },
        0,
        "Plain prompts get BOS/EOS as the GGUF's add_bos_token/add_eos_token flags say; --chat\n"
        "renders [system,] user and parses the template's special tokens. Generation stops at an\n"
        "end-of-generation token or after --max-tokens.",
    };
    return s;
}

std::vector<token_id> tokenize_prompt(const model& m, const parsed_args& a,
                                      const std::string& prompt) {
    const tokenizer& vocab = m.vocab();
    if (!a.has("chat")) return vocab.encode(prompt, true, a.has("parse-special"));

    chat_format f = m.chat();
    if (f == chat_format::unknown) {
        if (m.file().has("tokenizer.chat_template")) {
            throw error(status::unsupported,
                        "the model's chat template is not a supported format (chatml, llama3, "
                        "mistral); run without --chat");
        }
        f = chat_format::chatml;  // llama.cpp's fallback for GGUFs without a template
    }
    std::vector<chat_message> msgs;
    if (auto sys = a.get("system")) msgs.push_back({"system", *sys});
    msgs.push_back({"user", prompt});
    // Like llama-cli's first turn: add_special=true (BOS only if the GGUF asks for it; the
    // template text carries none) and parse_special=true for the template's control tokens.
    return vocab.encode(render_chat(f, msgs, true), true, true);
}

void write_json(const generation_result& r, const std::vector<token_id>& prompt,
                const tokenizer& vocab, uint64_t seed, int32_t threads, int32_t n_ctx) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("text", r.text);
    w.key("tokens").begin_array();
    for (token_id t : r.tokens) w.value(t);
    w.end_array();
    w.key("prompt_tokens").begin_array();
    for (token_id t : prompt) w.value(t);
    w.end_array();
    w.key("top_logprobs").begin_array();
    for (const auto& [id, lp] : r.top_logprobs) {
        w.begin_object();
        w.field("id", id);
        // special=true so a likely end-of-turn token shows as "<|im_end|>" rather than "".
        w.field("text", vocab.token_to_piece(id, true));
        w.field("logprob", lp);
        w.end_object();
    }
    w.end_array();
    const generation_stats& s = r.stats;
    w.key("stats").begin_object();
    w.field("prefill_ms", s.prefill_ms);
    w.field("prefill_tokens_per_s", s.prefill_tokens_per_s);
    w.field("decode_tokens_per_s", s.decode_tokens_per_s);
    w.field("ttft_ms", s.ttft_ms);
    w.field("decode_ms", s.decode_ms);
    w.field("prompt_tokens", s.prompt_tokens);
    w.field("generated_tokens", s.generated_tokens);
    w.field("stop_reason", r.stop_reason);
    w.field("seed", seed);
    w.field("threads", threads);
    w.field("n_ctx", n_ctx);
    w.end_object();
    w.end_object();
    std::cout << "\n";
}

void print_stats(const generation_result& r, const tokenizer& vocab) {
    const generation_stats& s = r.stats;
    std::fprintf(stderr,
                 "prompt: %d tokens | prefill: %.1f ms, %.1f tok/s | decode: %d tokens, %.1f "
                 "tok/s | TTFT: %.1f ms | stop: %s\n",
                 s.prompt_tokens, s.prefill_ms, s.prefill_tokens_per_s, s.generated_tokens,
                 s.decode_tokens_per_s, s.ttft_ms, r.stop_reason.c_str());
    if (!r.top_logprobs.empty()) {
        std::fprintf(stderr, "first-token top logprobs:\n");
        for (const auto& [id, lp] : r.top_logprobs) {
            std::fprintf(stderr, "  %9.4f  %6d  %s\n", lp, id,
                         printable(vocab.token_to_piece(id, true)).c_str());
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
    generation_params gp;
    gp.max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 128, 0, 1 << 24));
    gp.sampling.temperature = static_cast<float>(a.get_double("temp", 0.0, 0.0, 1e6));
    gp.sampling.top_k = static_cast<int32_t>(a.get_int("top-k", gp.sampling.top_k, 0, i32_max));
    gp.sampling.top_p = static_cast<float>(a.get_double("top-p", gp.sampling.top_p, 0.0, 1.0));
    gp.sampling.min_p = static_cast<float>(a.get_double("min-p", gp.sampling.min_p, 0.0, 1.0));
    gp.sampling.seed = a.has("seed") ? a.get_u64("seed", 0) : std::random_device{}();
    gp.top_logprobs = static_cast<int32_t>(a.get_int("top-logprobs", 0, 0, i32_max));
    const auto threads =
        static_cast<int32_t>(a.get_int("threads", default_thread_count(), 1, 1024));
    const int64_t ctx = a.get_int("ctx", 0, 0, i32_max);
    const bool json = a.has("json");

    const std::shared_ptr<const model> m = load_model(a, false);
    const tokenizer& vocab = m->vocab();
    const std::vector<token_id> prompt_ids = tokenize_prompt(*m, a, *prompt);
    if (prompt_ids.empty()) throw usage_error("--prompt: the prompt has no tokens");

    const auto n_prompt = static_cast<int64_t>(prompt_ids.size());
    const int64_t n_train = m->hparams().n_ctx_train;
    int64_t n_ctx = ctx;
    if (n_ctx == 0) {
        // Size the KV cache to the request: a full training context would cost memory and
        // start-up time for nothing.
        if (n_prompt > n_train) {
            throw error(status::range,
                        fmt("the prompt has %lld tokens but the model's context "
                            "holds %lld (pass --ctx to go beyond it)",
                            static_cast<long long>(n_prompt), static_cast<long long>(n_train)));
        }
        n_ctx = std::min(n_prompt + gp.max_tokens, n_train);
    } else if (n_prompt > n_ctx) {
        throw error(status::range,
                    fmt("the prompt has %lld tokens but --ctx is %lld",
                        static_cast<long long>(n_prompt), static_cast<long long>(n_ctx)));
    }
    gp.top_logprobs = std::min(gp.top_logprobs, m->hparams().n_vocab);

    session_params sp;
    sp.n_ctx = static_cast<int32_t>(n_ctx);
    sp.n_threads = threads;
    session sess(m, sp);

    sigint_guard guard;
    const token_callback on_token = [json](token_id, const std::string& piece) {
        if (!json) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
        return g_interrupted == 0;
    };
    const generation_result r = sess.generate(prompt_ids, gp, on_token);

    if (json) {
        write_json(r, prompt_ids, vocab, gp.sampling.seed, threads, sp.n_ctx);
    } else {
        if (r.text.empty() || r.text.back() != '\n') std::fputc('\n', stdout);
        std::fflush(stdout);
        print_stats(r, vocab);
    }
    return 0;
}

}  // namespace cacheblend::cli
