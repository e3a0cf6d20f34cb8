// `cacheblend eval`: compares prefill modes on a QA dataset (DESIGN §8, §9). Every record becomes
// the paper's musique prompt inside the model's chat template; the store is warmed with every
// passage first (untimed), then each mode prefills and decodes greedily. `full` always runs first
// on each record: it is the reference for fidelity (answer F1 against it, first-token agreement
// and KL). Reported per mode: answer F1 against the gold answers, fidelity, TTFT mean/p50/p95 and
// the speedup over full, plus a paired-bootstrap interval of the F1 difference to full.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "blend-common.h"
#include "commands.h"
#include "model-common.h"
#include "core/error.h"
#include "core/eval-metrics.h"
#include "core/rag-prompt.h"
#include "core/sampler.h"
#include "eval-dataset.h"
#include "json-writer.h"
#include "progress-bar.h"

namespace cacheblend::cli {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
const char k_sweep_ratios[] = "0.05,0.1,0.15,0.2,0.3,1.0";

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "eval",
            "eval --dataset FILE.json [--modes full,reuse,blend] [options]",
            "Compare prefill modes on a QA dataset (musique_s.json schema): answer F1, fidelity\n"
            "to full prefill (answer F1, first-token agreement and KL) and TTFT per mode.",
            {
                model_flag(),
                {"dataset", "FILE", "JSON list of {ctxs, question, answers} (required)"},
                {"modes", "LIST", "modes to compare (default full,reuse,blend; full always runs)"},
                {"ratio", "R", "recompute ratio of blend mode (default 0.15)"},
                {"ratios", "LIST", "run blend at each of these ratios (a sweep)"},
                {"sweep", "", std::string("full, reuse and blend at ") + k_sweep_ratios},
                {"limit", "N", "evaluate the first N records (default all)"},
                store_flag(),
                {"threads", "N",
                 "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
                {"max-tokens", "N", "maximum tokens per answer (default 32)"},
                {"json", "", "print the per-mode summary as one JSON object"},
                {"out", "FILE", "write the summary and every per-record result as JSON"},
            },
            0,
            "ctxs and answers may be JSON lists or strings holding Python literals. Decoding is\n"
            "greedy. F1 is SQuAD-normalized word F1 of the first answer line (the reference's\n"
            "Yes/No mapping applied) against the best gold answer; the F1 interval is a paired\n"
            "bootstrap (1000 resamples, fixed seed) of mode minus full.",
        };
        for (flag_spec& f : blend_tuning_flags()) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

// One mode at one ratio: a column of the comparison.
struct run_spec {
    std::string label;  // "full", "reuse", "blend", or "blend@0.15" in a sweep
    blend_mode mode;
    float ratio;
};

struct run_result {
    std::string text;
    std::string answer;  // parse_generation(text)
    double f1 = k_nan;   // NaN when the record has no gold answer
    double f1_token_ids = k_nan;
    double fidelity_f1 = 0;
    bool first_token_agree = false;
    double first_token_kl = 0;
    token_id first_token = -1;
    double ttft_ms = 0;
    blend_stats stats;
    std::string stop_reason;
    std::vector<token_id> tokens;
};

struct record_result {
    size_t index = 0;
    int64_t prompt_tokens = 0;
    std::vector<run_result> runs;  // parallel to the run list
};

std::string ratio_label(double r) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", r);
    return buf;
}

std::vector<run_spec> plan_runs(const parsed_args& a) {
    const bool sweep = a.has("sweep");
    std::string modes = a.get_or("modes", "full,reuse,blend");
    if (sweep && a.has("modes")) throw usage_error("--sweep sets the modes; drop --modes");
    const double ratio = a.get_double("ratio", 0.15, 0.0, 1.0);
    std::vector<double> ratios;
    if (a.has("ratio") && (a.has("ratios") || sweep)) {
        throw usage_error("--ratio applies to a single blend run; drop it with --ratios/--sweep");
    }
    if (a.has("ratios")) {
        ratios = parse_double_list("ratios", *a.get("ratios"), 0.0, 1.0);
    } else if (sweep) {
        ratios = parse_double_list("ratios", k_sweep_ratios, 0.0, 1.0);
    }
    std::vector<run_spec> runs{{"full", blend_mode::full, 1.f}};
    std::set<std::string> seen{"full"};
    bool has_blend = false;
    size_t pos = 0;
    while (true) {
        const size_t comma = modes.find(',', pos);
        const std::string m =
            modes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        blend_mode bm;
        if (!parse_blend_mode(m, &bm)) {
            throw usage_error("--modes: unknown mode '" + m + "' (full, prefix, reuse, blend)");
        }
        if (bm == blend_mode::blend) {
            has_blend = true;
        } else if (seen.insert(m).second) {
            runs.push_back({m, bm, bm == blend_mode::full ? 1.f : 0.f});
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (!ratios.empty()) {
        // A ratio list is a blend sweep: it implies blend even when --modes left it out.
        for (double r : ratios) {
            const std::string label = "blend@" + ratio_label(r);
            if (seen.insert(label).second) {
                runs.push_back({label, blend_mode::blend, static_cast<float>(r)});
            }
        }
    } else if (has_blend) {
        runs.push_back({"blend", blend_mode::blend, static_cast<float>(ratio)});
    }
    return runs;
}

// The paper's F1 on token ids (reference §1.11), with this model's tokenizer: reported next to
// the word F1 for comparison with the paper's numbers.
double token_id_f1(const tokenizer& vocab, const std::string& answer,
                   const std::vector<std::string>& golds) {
    if (golds.empty()) return k_nan;
    const auto ids = [&](const std::string& s) {
        return vocab.encode(eval::normalize_answer(s), false, false);
    };
    const std::vector<token_id> pred = ids(answer);
    double best = 0;
    for (const std::string& g : golds) best = std::max(best, eval::overlap_f1(pred, ids(g)));
    return best;
}

struct summary {
    int64_t n = 0, n_gold = 0;
    double f1 = k_nan, f1_token_ids = k_nan, fidelity_f1 = 0, agreement = 0, kl = 0;
    double ttft_mean = 0, ttft_p50 = 0, ttft_p95 = 0, speedup = 0;
    double recomputed_mean = 0, reused_mean = 0;
    double f1_diff = k_nan;
    eval::interval f1_ci{k_nan, k_nan};
};

std::vector<summary> summarize(const std::vector<run_spec>& runs,
                               const std::vector<record_result>& results) {
    std::vector<summary> out(runs.size());
    for (size_t k = 0; k < runs.size(); ++k) {
        summary& s = out[k];
        std::vector<double> f1, f1_full, f1_tok, fid, agree, kl, ttft, recomputed, reused;
        for (const record_result& rec : results) {
            const run_result& r = rec.runs[k];
            if (!std::isnan(r.f1)) {
                f1.push_back(r.f1);
                f1_full.push_back(rec.runs[0].f1);
                f1_tok.push_back(r.f1_token_ids);
            }
            fid.push_back(r.fidelity_f1);
            agree.push_back(r.first_token_agree ? 1.0 : 0.0);
            kl.push_back(r.first_token_kl);
            ttft.push_back(r.ttft_ms);
            recomputed.push_back(static_cast<double>(r.stats.tokens_recomputed));
            reused.push_back(static_cast<double>(r.stats.tokens_reused));
        }
        s.n = static_cast<int64_t>(results.size());
        s.n_gold = static_cast<int64_t>(f1.size());
        if (!f1.empty()) {
            s.f1 = eval::mean(f1);
            s.f1_token_ids = eval::mean(f1_tok);
            s.f1_diff = s.f1 - eval::mean(f1_full);
            if (k > 0) s.f1_ci = eval::paired_bootstrap_ci(f1, f1_full);
        }
        s.fidelity_f1 = eval::mean(fid);
        s.agreement = eval::mean(agree);
        s.kl = eval::mean(kl);
        s.ttft_mean = eval::mean(ttft);
        s.ttft_p50 = eval::percentile(ttft, 50);
        s.ttft_p95 = eval::percentile(ttft, 95);
        s.recomputed_mean = eval::mean(recomputed);
        s.reused_mean = eval::mean(reused);
    }
    for (summary& s : out) s.speedup = s.ttft_mean > 0 ? out[0].ttft_mean / s.ttft_mean : 0;
    return out;
}

struct eval_meta {
    std::string dataset, model, store;
    int64_t records = 0, skipped = 0;
    double prompt_tokens_mean = 0;
    int32_t threads = 0, max_tokens = 0;
    int64_t warm_chunks = 0, warm_computed = 0;
    double warm_ms = 0;
};

void write_summary(json_writer& w, const eval_meta& meta, const std::vector<run_spec>& runs,
                   const std::vector<summary>& sums) {
    w.field("dataset", meta.dataset);
    w.field("model", meta.model);
    w.field("store", meta.store);
    w.field("records", meta.records);
    w.field("skipped", meta.skipped);
    w.field("prompt_tokens_mean", meta.prompt_tokens_mean);
    w.field("threads", meta.threads);
    w.field("max_tokens", meta.max_tokens);
    w.key("warm").begin_object();
    w.field("chunks", meta.warm_chunks);
    w.field("computed", meta.warm_computed);
    w.field("ms", meta.warm_ms);
    w.end_object();
    w.key("modes").begin_object();
    for (size_t k = 0; k < runs.size(); ++k) {
        const summary& s = sums[k];
        w.key(runs[k].label).begin_object();
        w.field("mode", blend_mode_name(runs[k].mode));
        w.field("ratio", runs[k].ratio);
        w.field("f1", s.f1);
        w.field("fidelity_f1", s.fidelity_f1);
        w.field("first_token_agreement", s.agreement);
        w.field("first_token_kl", s.kl);
        w.field("ttft_ms_mean", s.ttft_mean);
        w.field("ttft_ms_p50", s.ttft_p50);
        w.field("ttft_ms_p95", s.ttft_p95);
        w.field("speedup_vs_full", s.speedup);
        w.field("n", s.n);
        w.field("n_gold", s.n_gold);
        w.field("f1_token_ids", s.f1_token_ids);
        w.field("tokens_reused_mean", s.reused_mean);
        w.field("tokens_recomputed_mean", s.recomputed_mean);
        if (k > 0) {
            w.field("f1_diff_vs_full", s.f1_diff);
            w.key("f1_diff_ci95").begin_array().value(s.f1_ci.lo).value(s.f1_ci.hi).end_array();
        }
        w.end_object();
    }
    w.end_object();
}

void write_records(json_writer& w, const std::vector<run_spec>& runs,
                   const std::vector<record_result>& results,
                   const std::vector<qa_record>& data, const tokenizer& vocab) {
    w.key("results").begin_array();
    for (const record_result& rec : results) {
        const qa_record& q = data[rec.index];
        w.begin_object();
        w.field("index", static_cast<int64_t>(rec.index));
        w.field("question", q.question);
        w.key("answers").begin_array();
        for (const std::string& g : q.answers) w.value(g);
        w.end_array();
        w.field("prompt_tokens", rec.prompt_tokens);
        w.key("runs").begin_object();
        for (size_t k = 0; k < runs.size(); ++k) {
            const run_result& r = rec.runs[k];
            w.key(runs[k].label).begin_object();
            w.field("text", r.text);
            w.field("answer", r.answer);
            w.field("f1", r.f1);
            w.field("f1_token_ids", r.f1_token_ids);
            w.field("fidelity_f1", r.fidelity_f1);
            w.field("first_token", r.first_token);
            w.field("first_token_text",
                    r.first_token >= 0 ? vocab.token_to_piece(r.first_token, true) : "");
            w.field("first_token_agreement", r.first_token_agree);
            w.field("first_token_kl", r.first_token_kl);
            w.field("ttft_ms", r.ttft_ms);
            w.field("stop_reason", r.stop_reason);
            w.key("tokens").begin_array();
            for (token_id t : r.tokens) w.value(t);
            w.end_array();
            w.key("stats").begin_object();
            write_blend_stats(w, r.stats, r.ttft_ms, 0.0);
            w.end_object();
            w.end_object();
        }
        w.end_object();
        w.end_object();
    }
    w.end_array();
}

void print_table(const eval_meta& meta, const std::vector<run_spec>& runs,
                 const std::vector<summary>& sums) {
    std::printf("dataset %s: %lld records (%lld skipped), %.0f prompt tokens on average, %d "
                "threads, greedy <= %d tokens\n",
                meta.dataset.c_str(), static_cast<long long>(meta.records),
                static_cast<long long>(meta.skipped), meta.prompt_tokens_mean, meta.threads,
                meta.max_tokens);
    std::printf("warm-up: %lld chunks, %lld computed in %.1f s (untimed)\n\n",
                static_cast<long long>(meta.warm_chunks),
                static_cast<long long>(meta.warm_computed), meta.warm_ms / 1000.0);
    std::printf("%-12s %4s %6s %6s %6s %7s %9s %9s %9s %8s %7s  %s\n", "mode", "n", "F1",
                "fidF1", "agree", "KL", "TTFTmean", "TTFTp50", "TTFTp95", "speedup", "recomp",
                "F1-full [95% CI]");
    for (size_t k = 0; k < runs.size(); ++k) {
        const summary& s = sums[k];
        std::string diff = "-";
        if (k > 0 && !std::isnan(s.f1_diff)) {
            char buf[96];
            std::snprintf(buf, sizeof(buf), "%+.3f [%+.3f, %+.3f]", s.f1_diff, s.f1_ci.lo,
                          s.f1_ci.hi);
            diff = buf;
        }
        std::printf("%-12s %4lld %6.3f %6.3f %6.3f %7.4f %9.1f %9.1f %9.1f %7.2fx %7.0f  %s\n",
                    runs[k].label.c_str(), static_cast<long long>(s.n), s.f1, s.fidelity_f1,
                    s.agreement, s.kl, s.ttft_mean, s.ttft_p50, s.ttft_p95, s.speedup,
                    s.recomputed_mean, diff.c_str());
    }
    std::printf("\nTTFT in ms; recomp: mean tokens recomputed; fidF1, agree, KL: against full.\n");
}

}  // namespace

int run_eval(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;

    const auto dataset = a.get("dataset");
    if (!dataset || dataset->empty()) throw usage_error("eval: --dataset FILE is required");
    const std::vector<run_spec> runs = plan_runs(a);
    blend_params bp;
    apply_blend_tuning(a, &bp);
    const int64_t limit = a.get_int("limit", 0, 1, std::numeric_limits<int32_t>::max());
    const auto threads =
        static_cast<int32_t>(a.get_int("threads", default_thread_count(), 1, 1024));
    const auto max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 32, 1, 1 << 20));
    const bool json = a.has("json");
    const std::string out_path = a.get_or("out", "");
    if (a.has("out") && out_path.empty()) throw usage_error("--out: empty path");

    // Open --out now: a bad path must fail before the long run, not after it.
    std::ofstream out_file;
    if (!out_path.empty()) {
        out_file.open(out_path, std::ios::binary | std::ios::trunc);
        if (!out_file) {
            throw error(status::io, "cannot write " + out_path + ": " + std::strerror(errno));
        }
    }

    const std::vector<qa_record> data = load_qa_dataset(*dataset);
    const size_t n_records =
        limit > 0 ? std::min(data.size(), static_cast<size_t>(limit)) : data.size();

    const std::shared_ptr<const model> m = load_model(a, false);
    const tokenizer& vocab = m->vocab();
    const int32_t n_vocab = m->hparams().n_vocab;
    const int64_t n_train = m->hparams().n_ctx_train;
    const chat_format chat = rag_chat_format(*m);

    // Build every prompt first: the context is sized to the longest one that fits.
    eval_meta meta;
    meta.dataset = *dataset;
    meta.model = a.has("model") ? *a.get("model") : default_model_path();
    meta.threads = threads;
    meta.max_tokens = max_tokens;
    std::vector<blend_request> reqs(n_records);
    std::vector<size_t> todo;
    int64_t longest = 0;
    for (size_t i = 0; i < n_records; ++i) {
        reqs[i] = build_blend_request(vocab, chat, musique_prompt(data[i].ctxs, data[i].question));
        const int64_t n = request_tokens(reqs[i]);
        if (n >= n_train) {
            std::fprintf(stderr, "eval: skipping record %zu: %lld prompt tokens exceed the "
                         "model's context of %lld\n", i, static_cast<long long>(n),
                         static_cast<long long>(n_train));
            ++meta.skipped;
            continue;
        }
        longest = std::max(longest, n);
        meta.prompt_tokens_mean += static_cast<double>(n);
        todo.push_back(i);
    }
    if (todo.empty()) throw error(status::range, "eval: no record fits the model's context");
    meta.records = static_cast<int64_t>(todo.size());
    meta.prompt_tokens_mean /= static_cast<double>(todo.size());

    session_params sp;
    sp.n_ctx = static_cast<int32_t>(std::min(longest + max_tokens, n_train));
    sp.n_threads = threads;
    session sess(m, sp);
    std::shared_ptr<kv_store> store = open_store(a);
    meta.store = store->dir();
    blend_engine engine(sess, store, bp);

    // Warm the store: every passage of every record in range, before anything is timed.
    {
        for (size_t i : todo) meta.warm_chunks += static_cast<int64_t>(reqs[i].chunks.size());
        progress_bar bar("warming KV store", meta.warm_chunks, !json);
        const auto t = clock_type::now();
        int64_t done = 0;
        for (size_t i : todo) {
            for (const auto& c : reqs[i].chunks) {
                if (engine.precompute_chunk(reqs[i].preamble, c)) ++meta.warm_computed;
                bar.update(++done);
            }
        }
        bar.finish();
        meta.warm_ms = ms_between(t, clock_type::now());
    }

    generation_params gp;
    gp.max_tokens = max_tokens;  // greedy: the default sampler_params temperature is 0
    gp.sampling.temperature = 0.f;

    // One untimed request sized to the longest prompt, so no timed run pays for growing the
    // engine's scratch buffers.
    {
        const auto it = std::max_element(todo.begin(), todo.end(), [&](size_t x, size_t y) {
            return request_tokens(reqs[x]) < request_tokens(reqs[y]);
        });
        blend_params wp = bp;
        wp.mode = blend_mode::reuse;
        engine.set_params(wp);
        engine.prefill(reqs[*it], nullptr);
    }

    std::vector<record_result> results;
    results.reserve(todo.size());
    std::vector<float> full_logits(static_cast<size_t>(n_vocab));
    progress_bar bar("evaluating", static_cast<int64_t>(todo.size() * runs.size()), !json);
    int64_t done = 0;
    for (size_t i : todo) {
        record_result rec;
        rec.index = i;
        rec.prompt_tokens = request_tokens(reqs[i]);
        const std::vector<std::string>& golds = data[i].answers;
        for (size_t k = 0; k < runs.size(); ++k) {
            blend_params p = bp;
            p.mode = runs[k].mode;
            p.ratio = runs[k].mode == blend_mode::blend ? runs[k].ratio : 0.15f;
            engine.set_params(p);

            run_result r;
            const auto t0 = clock_type::now();
            const std::vector<float>& logits = engine.prefill(reqs[i], &r.stats);
            const generation_result g = sess.generate_after_prefill(logits, gp, nullptr, t0);
            // After the timed part: decoding runs on the session's own logits, so the engine's
            // first-token logits are still those of the prompt.
            if (k == 0) std::copy(logits.begin(), logits.end(), full_logits.begin());
            r.first_token = argmax(logits.data(), n_vocab);
            r.first_token_kl =
                k == 0 ? 0.0 : eval::kl_divergence_logits(full_logits.data(), logits.data(),
                                                          n_vocab);
            engine.write_back_misses();  // only after a corrupt file was dropped (store is warm)

            r.ttft_ms = g.stats.ttft_ms;
            r.text = g.text;
            r.tokens = g.tokens;
            r.stop_reason = g.stop_reason;
            r.answer = eval::parse_generation(g.text);
            if (!golds.empty()) {
                r.f1 = eval::answer_f1(g.text, golds);
                r.f1_token_ids = token_id_f1(vocab, r.answer, golds);
            }
            const run_result& full = k == 0 ? r : rec.runs[0];
            r.fidelity_f1 = eval::word_f1(r.answer, full.answer);
            r.first_token_agree = r.first_token == full.first_token;
            rec.runs.push_back(std::move(r));
            bar.update(++done);
        }
        results.push_back(std::move(rec));
    }
    bar.finish();

    const std::vector<summary> sums = summarize(runs, results);
    if (out_file.is_open()) {
        std::ofstream& f = out_file;
        json_writer w(f, 2);
        w.begin_object();
        write_summary(w, meta, runs, sums);
        write_records(w, runs, results, data, vocab);
        w.end_object();
        f << "\n";
        f.flush();
        if (!f) throw error(status::io_write, "writing " + out_path + " failed");
    }
    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        write_summary(w, meta, runs, sums);
        w.end_object();
        std::cout << "\n";
    } else {
        print_table(meta, runs, sums);
        if (!out_path.empty()) std::printf("per-record results: %s\n", out_path.c_str());
    }
    return 0;
}

}  // namespace cacheblend::cli
