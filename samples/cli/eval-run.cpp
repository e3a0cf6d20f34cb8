#include "eval-run.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include "answer-json.h"
#include "blend-common.h"
#include "cacheblend_experimental.h"
#include "commands.h"
#include "eval-journal.h"
#include "eval-metrics.h"
#include "musique-prompt.h"
#include "progress-bar.h"
#include "prompt-view.h"

namespace cacheblend::cli {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Token ids of a text (no BOS/EOS, no special-token parsing).
std::vector<int32_t> token_ids(const cbl_model* m, const std::string& text) {
    size_t n = 0;
    check(cbl_tokenize(m, text.data(), text.size(), false, false, nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    if (n > 0) check(cbl_tokenize(m, text.data(), text.size(), false, false, ids.data(), n, &n));
    return ids;
}

// The paper's F1 on token ids (reference §1.11), with this model's tokenizer: reported next to
// the word F1 for comparison with the paper's numbers.
double token_id_f1(const cbl_model* m, const std::string& answer,
                   const std::vector<std::string>& golds) {
    if (golds.empty()) return k_nan;
    const std::vector<int32_t> pred = token_ids(m, eval::normalize_answer(answer));
    double best = 0;
    for (const std::string& g : golds) {
        const std::vector<int32_t> ref = token_ids(m, eval::normalize_answer(g));
        best = std::max(best, eval::overlap_f1(pred, ref));
    }
    return best;
}

int argmax(const float* x, size_t n) {
    return static_cast<int>(std::max_element(x, x + n) - x);
}

// Best minus second-best logit (the log-probability gap of the two likeliest tokens).
double top2_gap(const float* x, size_t n) {
    if (n < 2) return k_nan;
    float a = std::max(x[0], x[1]), b = std::min(x[0], x[1]);
    for (size_t i = 2; i < n; ++i) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return static_cast<double>(a) - static_cast<double>(b);
}

// One record's prompt in the paper's layout (the eval library's texts, passed literally).
struct musique_request {
    eval::prompt_view prompt;
    int64_t n_tokens = 0;

    musique_request() = default;
    explicit musique_request(const qa_record& r)
        : prompt(eval::musique_prompt(passages(r), r.question)) {}

private:
    static std::vector<eval::passage> passages(const qa_record& r) {
        std::vector<eval::passage> out;
        out.reserve(r.ctxs.size());
        for (const qa_passage& p : r.ctxs) out.push_back({p.title, p.text});
        return out;
    }
};

// Dataset order, whichever run (this one or a journaled one) made each record.
std::vector<record_result> sorted_by_index(std::vector<record_result> v) {
    std::sort(v.begin(), v.end(),
              [](const record_result& x, const record_result& y) { return x.index < y.index; });
    return v;
}

std::vector<summary> summarize(const std::vector<run_spec>& runs,
                               const std::vector<record_result>& results) {
    std::vector<summary> out(runs.size());
    for (size_t k = 0; k < runs.size(); ++k) {
        summary& s = out[k];
        std::vector<double> f1, f1_full, f1_tok, fid, agree, kl, ttft, recomputed, reused;
        double flip_max = 0;
        bool margin_unknown = false;
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
            s.chunks_missed += r.stats.chunks_missed;
            if (!r.first_token_agree) {
                ++s.flips;
                if (std::isnan(rec.full_margin)) margin_unknown = true;
                flip_max = std::max(flip_max, rec.full_margin);
            }
        }
        s.flip_margin_max = s.flips == 0 || margin_unknown ? k_nan : flip_max;
        s.n = static_cast<int64_t>(results.size());
        s.n_gold = static_cast<int64_t>(f1.size());
        if (!f1.empty()) {
            s.f1 = eval::mean(f1);
            s.f1_token_ids = eval::mean(f1_tok);
            s.f1_diff = s.f1 - eval::mean(f1_full);
            if (k > 0) {
                const eval::interval ci = eval::paired_bootstrap_ci(f1, f1_full);
                s.f1_ci_lo = ci.lo;
                s.f1_ci_hi = ci.hi;
            }
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

// The journal's first line: what per-record results depend on. Flags that only pick records,
// outputs or where KV lives are left out, so a run can be resumed with a larger --limit or
// another --out; flags that change results appear resolved (model file, runs) or verbatim.
std::string journal_settings(const parsed_args& a, const eval_meta& meta,
                             const std::vector<run_spec>& runs) {
    static const std::set<std::string> not_results{"dataset",   "limit",  "out",     "json",
                                                   "resume",    "store",  "data",    "kv-budget",
                                                   "kv-remote", "model",  "modes",   "ratio",
                                                   "ratios",    "sweep",  "threads", "max-tokens",
                                                   "kv-format", "select", "policies"};
    std::ostringstream os;
    json_writer w(os);
    w.begin_object();
    w.field("journal", "cacheblend eval");
    w.field("version", 1);
    w.field("model", meta.model);
    struct stat st {};
    w.field("model_bytes",
            ::stat(meta.model.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : int64_t{-1});
    w.key("runs").begin_array();
    for (const run_spec& r : runs) {
        w.begin_object();
        w.field("label", r.label);
        w.field("mode", std::string(mode_name(r.mode)));
        w.field("ratio", r.ratio);
        if (r.select >= 0) w.field("select", enum_name(CBL_X_NAMES_SELECT, r.select));
        w.end_object();
    }
    w.end_array();
    w.field("threads", meta.threads);
    w.field("max_tokens", meta.max_tokens);
    w.field("kv_format", meta.kv_format);
    // The policy, resolved, so runs of different policies never share a journal; hkvd is left
    // out, so journals written before policies existed (all hkvd) still resume.
    if (meta.select != "hkvd") w.field("select", meta.select);
    w.key("flags").begin_object();
    for (const auto& [name, values] : a.all()) {
        if (not_results.count(name)) continue;
        w.key(name).begin_array();
        for (const std::string& v : values) w.value(v);
        w.end_array();
    }
    w.end_object();
    w.end_object();
    return os.str();
}

}  // namespace

std::vector<flag_spec> eval_flags() {
    std::vector<flag_spec> f{
        model_flag(),
        {"dataset", "FILE", "JSON list of {ctxs, question, answers} (required)"},
        store_flag(),
        store_data_flag(),
        kv_budget_flag(),
        kv_remote_flag(),
        {"threads", "N", "CPU threads (default " + std::to_string(default_thread_count()) + ")"},
        device_flag(),
        {"max-tokens", "N", "maximum tokens per answer (default 32)"},
    };
    for (flag_spec& t : blend_tuning_flags()) f.push_back(std::move(t));
    return f;
}

sampling_defaults eval_sampling() {
    sampling_defaults d;
    d.random_seed = false;
    return d;
}

std::string ratio_label(double r) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", r);
    return buf;
}

eval_run run_evaluation(const parsed_args& a, const std::vector<run_spec>& runs,
                        int64_t default_limit, const std::string& log_name) {
    const auto dataset = a.get("dataset");
    if (!dataset || dataset->empty()) throw usage_error("--dataset FILE is required");
    const blend_tuning tuning = parse_blend_tuning(a);
    const int64_t limit =
        a.get_int("limit", default_limit, 1, std::numeric_limits<int32_t>::max());
    const auto threads =
        static_cast<int32_t>(a.get_int("threads", default_thread_count(), 1, 1024));
    const std::string device = device_arg(a);
    const auto max_tokens = static_cast<int32_t>(a.get_int("max-tokens", 32, 1, 1 << 20));
    const sampling_choice sampling = parse_sampling(a, eval_sampling());
    const bool json = a.has("json");
    eval_run run;
    run.data = load_qa_dataset(*dataset);
    const std::vector<qa_record>& data = run.data;
    const size_t n_records =
        limit > 0 ? std::min(data.size(), static_cast<size_t>(limit)) : data.size();

    std::string store_dir;
    run.store = open_store(a, &store_dir);
    run.model = load_model(a.get_or("model", ""));
    const kvstore_ptr& store = run.store;
    const model_ptr& m = run.model;
    const auto n_vocab = static_cast<size_t>(cbl_model_n_vocab(m.get()));
    const auto n_train = static_cast<size_t>(cbl_model_n_ctx_train(m.get()));

    // Every record as the paper's musique prompt; the context is sized to the longest that fits.
    eval_meta& meta = run.meta;
    meta.dataset = *dataset;
    {
        // The file, also when --model is a name or absent, so the summary says what was measured.
        const std::string model_arg = a.get_or("model", "");
        char* path = nullptr;
        check(cbl_x_model_path(model_arg.empty() ? nullptr : model_arg.c_str(), &path));
        meta.model = path;
        cbl_free(path);
    }
    meta.store = store_dir;
    meta.kv_format = kv_format_name(tuning.kv_format);
    meta.select = enum_name(CBL_X_NAMES_SELECT, tuning.select);
    meta.threads = threads;
    meta.max_tokens = max_tokens;
    meta.sampling = sampling.given;
    std::vector<musique_request> reqs(n_records);
    std::vector<size_t> todo;
    size_t longest = 0, longest_at = 0;
    for (size_t i = 0; i < n_records; ++i) {
        reqs[i] = musique_request(data[i]);
        size_t n = 0;
        check(cbl_x_prompt_tokens(m.get(), reqs[i].prompt.get(), &n));
        reqs[i].n_tokens = static_cast<int64_t>(n);
        if (n >= n_train) {
            std::fprintf(stderr, "eval: skipping record %zu: %zu prompt tokens exceed the "
                         "model's context of %zu\n", i, n, n_train);
            ++meta.skipped;
            continue;
        }
        if (n > longest) {
            longest = n;
            longest_at = i;
        }
        meta.prompt_tokens_mean += static_cast<double>(n);
        todo.push_back(i);
    }
    if (todo.empty()) throw capi_error(CBL_RANGE, "eval: no record fits the model's context");
    meta.records = static_cast<int64_t>(todo.size());
    meta.prompt_tokens_mean /= static_cast<double>(todo.size());

    // --resume: records an earlier run finished come from the journal; only the rest run.
    std::vector<record_result>& results = run.results;
    results.reserve(todo.size());
    std::unique_ptr<eval_journal> journal;
    const size_t n_all = todo.size();
    if (a.has("resume")) {
        const std::string path = a.get_or("resume", "");
        if (path.empty()) throw usage_error("--resume: empty path");
        journal = std::make_unique<eval_journal>(path, journal_settings(a, meta, runs), runs.size(),
                                                 data);
        std::set<size_t> done;
        for (const record_result& rec : journal->finished()) {
            if (std::find(todo.begin(), todo.end(), rec.index) == todo.end()) continue;
            done.insert(rec.index);
            results.push_back(rec);
        }
        todo.erase(std::remove_if(todo.begin(), todo.end(),
                                  [&](size_t i) { return done.count(i) != 0; }),
                   todo.end());
        std::fprintf(stderr, "%s: resuming from %s: %zu of %zu records done\n", log_name.c_str(),
                     path.c_str(), done.size(), n_all);
    }
    if (todo.empty()) {
        results = sorted_by_index(std::move(results));
        run.sums = summarize(runs, results);
        return run;
    }

    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = static_cast<int32_t>(std::min(longest + static_cast<size_t>(max_tokens), n_train));
    sp.n_threads = threads;
    if (!device.empty()) sp.device = device.c_str();
    cbl_session* s_raw = nullptr;
    check(cbl_session_create_with(m.get(), store.get(), &sp, &s_raw));
    const session_ptr sess(s_raw);
    const auto set_run = [&](int32_t mode, float ratio, int32_t select = -1) {
        cbl_x_blend_params bp = tuning.params(mode, ratio);
        if (select >= 0) bp.select = select;
        check(cbl_x_session_set_blend(sess.get(), &bp));
    };
    set_run(CBL_MODE_BLEND, default_ratio());  // the KV format of the store's entries

    // Warm the store: every passage of every record in range, before anything is timed.
    {
        for (size_t i : todo) {
            meta.warm_chunks += static_cast<int64_t>(reqs[i].prompt.get()->n_chunks);
        }
        progress_bar bar("warming KV store", meta.warm_chunks, !json,
                         when_redirected::log_lines);
        const auto t = clock_type::now();
        int64_t done = 0;
        size_t r = 0;
        for (size_t i : todo) {
            size_t computed = 0;
            check(cbl_x_session_precompute_prompt(sess.get(), reqs[i].prompt.get(), &computed));
            meta.warm_computed += static_cast<int64_t>(computed);
            done += static_cast<int64_t>(reqs[i].prompt.get()->n_chunks);
            bar.update(done);
            bar.log_line(log_name + ": warming KV store: record " + std::to_string(++r) + "/" +
                         std::to_string(todo.size()) + ", " +
                         std::to_string(meta.warm_computed) + " chunks computed");
        }
        bar.finish();
        meta.warm_ms = ms_between(t, clock_type::now());
    }

    // Every run of every record samples with the same settings and seed (greedy by default).
    cbl_generate_params gp;
    cbl_generate_params_init(&gp);
    gp.max_tokens = max_tokens;
    sampling.apply_to(&gp);

    // One untimed request sized to the longest prompt, so no timed run pays for growing the
    // engine's scratch buffers.
    set_run(CBL_MODE_REUSE, 0.f);
    check(cbl_x_session_prefill_prompt(sess.get(), reqs[longest_at].prompt.get(), nullptr));

    std::vector<float> full_logits(n_vocab);
    // The bar counts this run's work (its ETA comes from this run's rate); labels count records
    // of the whole evaluation, journaled ones included.
    progress_bar bar("evaluating", static_cast<int64_t>(todo.size() * runs.size()), !json,
                     when_redirected::log_lines);
    std::string mode_list;
    for (const run_spec& r : runs) mode_list += (mode_list.empty() ? "" : ", ") + r.label;
    int64_t done = 0;
    for (size_t i : todo) {
        const std::string of = std::to_string(results.size() + 1) + "/" + std::to_string(n_all);
        record_result rec;
        rec.index = i;
        rec.prompt_tokens = reqs[i].n_tokens;
        const std::vector<std::string>& golds = data[i].answers;
        for (size_t k = 0; k < runs.size(); ++k) {
            bar.set_label("evaluating record " + of + " (" + runs[k].label + ")");
            set_run(runs[k].mode, runs[k].mode == CBL_MODE_BLEND ? runs[k].ratio : default_ratio(),
                    runs[k].select);
            check(cbl_x_session_prefill_prompt(sess.get(), reqs[i].prompt.get(), nullptr));
            cbl_answer* a_raw = nullptr;
            check(cbl_session_generate(sess.get(), &gp, &a_raw));
            const answer_ptr answer(a_raw);

            run_result r;
            cbl_stats_init(&r.stats);
            check(cbl_answer_stats(answer.get(), &r.stats));
            // The prompt's logits outlive decoding: they are the first token's distribution.
            size_t n_logits = 0;
            const float* logits = cbl_x_session_logits(sess.get(), &n_logits);
            if (!logits || n_logits != n_vocab) {
                throw capi_error(CBL_INTERNAL, "eval: no first-token logits after a prefill");
            }
            if (k == 0) {
                std::copy(logits, logits + n_vocab, full_logits.begin());
                rec.full_margin = top2_gap(logits, n_vocab);
            }
            r.first_token = argmax(logits, n_vocab);
            r.first_token_kl =
                k == 0 ? 0.0
                       : eval::kl_divergence_logits(full_logits.data(), logits,
                                                    static_cast<int64_t>(n_vocab));

            r.ttft_ms = r.stats.ttft_ms;
            r.text = cbl_answer_text(answer.get());
            size_t n_tok = 0;
            const int32_t* toks = cbl_answer_tokens(answer.get(), &n_tok);
            r.tokens.assign(toks, toks + n_tok);
            r.answer = eval::parse_generation(r.text);
            if (!golds.empty()) {
                r.f1 = eval::answer_f1(r.text, golds);
                r.f1_token_ids = token_id_f1(m.get(), r.answer, golds);
            }
            const run_result& full = k == 0 ? r : rec.runs[0];
            r.fidelity_f1 = eval::word_f1(r.answer, full.answer);
            r.first_token_agree = r.first_token == full.first_token;
            rec.runs.push_back(std::move(r));
            bar.update(++done);
        }
        if (journal) journal->append(rec, data[i]);
        results.push_back(std::move(rec));
        bar.log_line(log_name + ": record " + of + " (" + mode_list + ")");
    }
    bar.finish();

    results = sorted_by_index(std::move(results));
    run.sums = summarize(runs, results);
    return run;
}

void write_summary(json_writer& w, const eval_meta& meta, const std::vector<run_spec>& runs,
                   const std::vector<summary>& sums) {
    w.field("dataset", meta.dataset);
    w.field("model", meta.model);
    w.field("store", meta.store);
    w.field("kv_format", meta.kv_format);
    w.field("select", meta.select);
    w.field("records", meta.records);
    w.field("skipped", meta.skipped);
    w.field("prompt_tokens_mean", meta.prompt_tokens_mean);
    w.field("threads", meta.threads);
    w.field("max_tokens", meta.max_tokens);
    w.field("sampling", meta.sampling.empty() ? std::string("greedy") : meta.sampling);
    w.key("warm").begin_object();
    w.field("chunks", meta.warm_chunks);
    w.field("computed", meta.warm_computed);
    w.field("ms", meta.warm_ms);
    w.end_object();
    w.key("modes").begin_object();
    for (size_t k = 0; k < runs.size(); ++k) {
        const summary& s = sums[k];
        w.key(runs[k].label).begin_object();
        w.field("mode", std::string(mode_name(runs[k].mode)));
        w.field("ratio", runs[k].ratio);
        if (runs[k].mode == CBL_MODE_BLEND) {
            w.field("select", runs[k].select >= 0 ? enum_name(CBL_X_NAMES_SELECT, runs[k].select)
                                                  : meta.select);
        }
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
        w.field("chunks_missed", s.chunks_missed);
        if (k > 0) {
            w.field("first_token_flips", s.flips);
            w.field("flip_full_margin_max", s.flip_margin_max);
            w.field("f1_diff_vs_full", s.f1_diff);
            w.key("f1_diff_ci95").begin_array().value(s.f1_ci_lo).value(s.f1_ci_hi).end_array();
        }
        w.end_object();
    }
    w.end_object();
}

void write_records(json_writer& w, const std::vector<run_spec>& runs,
                   const std::vector<record_result>& results,
                   const std::vector<qa_record>& data, const cbl_model* model) {
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
        w.field("full_first_token_margin", rec.full_margin);
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
                    r.first_token >= 0 ? token_text(model, r.first_token) : "");
            w.field("first_token_agreement", r.first_token_agree);
            w.field("first_token_kl", r.first_token_kl);
            w.field("ttft_ms", r.ttft_ms);
            w.field("stop_reason", std::string(stop_name(r.stats.stop_reason)));
            w.key("tokens").begin_array();
            for (int32_t t : r.tokens) w.value(t);
            w.end_array();
            w.key("stats").begin_object();
            write_blend_stats(w, r.stats);
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
                "threads, %s <= %d tokens, KV format %s, selection %s\n",
                meta.dataset.c_str(), static_cast<long long>(meta.records),
                static_cast<long long>(meta.skipped), meta.prompt_tokens_mean, meta.threads,
                meta.sampling.empty() ? "greedy" : meta.sampling.c_str(), meta.max_tokens,
                meta.kv_format.c_str(), meta.select.c_str());
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
            std::snprintf(buf, sizeof(buf), "%+.3f [%+.3f, %+.3f]", s.f1_diff, s.f1_ci_lo,
                          s.f1_ci_hi);
            diff = buf;
        }
        std::printf("%-12s %4lld %6.3f %6.3f %6.3f %7.4f %9.1f %9.1f %9.1f %7.2fx %7.0f  %s\n",
                    runs[k].label.c_str(), static_cast<long long>(s.n), s.f1, s.fidelity_f1,
                    s.agreement, s.kl, s.ttft_mean, s.ttft_p50, s.ttft_p95, s.speedup,
                    s.recomputed_mean, diff.c_str());
    }
    std::printf("\nTTFT in ms; recomp: mean tokens recomputed; fidF1, agree, KL: against full.\n");
    // Whether the first tokens that differ from full's were near-ties of full's own choice.
    std::string flips;
    for (size_t k = 1; k < runs.size(); ++k) {
        const summary& s = sums[k];
        if (s.flips == 0) continue;
        char buf[128];
        std::snprintf(buf, sizeof(buf), "%s%s %lld (<= %.2f)", flips.empty() ? "" : ", ",
                      runs[k].label.c_str(), static_cast<long long>(s.flips), s.flip_margin_max);
        flips += buf;
    }
    if (!flips.empty()) {
        std::printf(
            "first tokens that differ from full's, and full's largest top-2 logit gap "
            "among them (nats): %s\n",
            flips.c_str());
    }
    int64_t missed = 0;
    for (const summary& s : sums) missed += s.chunks_missed;
    if (missed > 0) {
        std::printf("warning: %lld chunk lookups missed after the warm-up: the store evicted them "
                    "(raise --kv-budget), so those runs recomputed them in full\n",
                    static_cast<long long>(missed));
    }
}

}  // namespace cacheblend::cli
