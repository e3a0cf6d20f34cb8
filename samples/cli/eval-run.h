// The evaluation loop shared by `cacheblend eval` and `cacheblend calibrate` (docs/ARCHITECTURE.md,
// 'Evaluation'): every record of a QA dataset becomes the paper's musique prompt; the store is
// warmed with every passage (untimed); then for each record `full` runs first (the fidelity
// reference) and every other run after it, each prefilling and decoding greedily through the C ABI.
// Per run: answer F1 against the gold answers, fidelity to full (answer F1, first-token agreement
// and KL) and TTFT.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "args.h"
#include "cacheblend.h"
#include "capi-util.h"
#include "eval-dataset.h"
#include "json-writer.h"
#include "sampling-flags.h"

namespace cacheblend::cli {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// One mode at one ratio: a column of the comparison.
struct run_spec {
    std::string label;  // "full", "reuse", "blend", "blend@0.15" in a sweep, "sink@0.05" by policy
    int32_t mode;  // CBL_MODE_*
    float ratio;
    int32_t select = -1;  // CBL_X_SELECT_* of this blend run; -1: the --select policy
};

struct run_result {
    std::string text;
    std::string answer;  // parse_generation(text)
    double f1 = k_nan;   // NaN when the record has no gold answer
    double f1_token_ids = k_nan;
    double fidelity_f1 = 0;
    bool first_token_agree = false;
    double first_token_kl = 0;
    int32_t first_token = -1;
    double ttft_ms = 0;
    cbl_stats stats{};
    std::vector<int32_t> tokens;
};

struct record_result {
    size_t index = 0;
    int64_t prompt_tokens = 0;
    // Full's first-token logit gap, best minus second best (nats): how near a tie the reference
    // is. A run whose first token differs from full's where this is small changed a coin toss;
    // NaN in journals written before it was kept.
    double full_margin = k_nan;
    std::vector<run_result> runs;  // parallel to the run list
};

struct summary {
    int64_t n = 0, n_gold = 0;
    double f1 = k_nan, f1_token_ids = k_nan, fidelity_f1 = 0, agreement = 0, kl = 0;
    double ttft_mean = 0, ttft_p50 = 0, ttft_p95 = 0, speedup = 0;
    double recomputed_mean = 0, reused_mean = 0;
    int64_t chunks_missed = 0;  // over all records: misses after the warm-up mean evictions
    // Records whose first token differs from full's, and the largest full_margin among them
    // (NaN when none differs or a margin is unknown): "every flip was a near-tie" in one number.
    int64_t flips = 0;
    double flip_margin_max = k_nan;
    double f1_diff = k_nan;
    double f1_ci_lo = k_nan, f1_ci_hi = k_nan;
};

struct eval_meta {
    std::string dataset, model, store, kv_format;
    std::string select;  // the blend runs' selection policy ("hkvd" unless --select)
    int64_t records = 0, skipped = 0;
    double prompt_tokens_mean = 0;
    int32_t threads = 0, max_tokens = 0;
    std::string sampling;  // the sampling flags given ("" = greedy)
    int64_t warm_chunks = 0, warm_computed = 0;
    double warm_ms = 0;
};

// Everything one evaluation produced; the model and store stay open for the caller.
struct eval_run {
    eval_meta meta;
    std::vector<qa_record> data;
    std::vector<record_result> results;
    std::vector<summary> sums;  // parallel to the runs
    model_ptr model;
    kvstore_ptr store;
};

// The flags run_evaluation reads (--dataset, --limit, --threads, --max-tokens, --model, --store,
// the blend tuning flags); each command adds its own.
std::vector<flag_spec> eval_flags();
// Sampling for commands that declare the sampling flags (eval does; calibrate stays greedy):
// greedy by default, seed 0 so that every mode draws alike.
sampling_defaults eval_sampling();

// Runs `runs` (runs[0] must be full) over the first --limit records (default_limit when the flag
// is absent; 0: all). Progress: a bar when stderr is a terminal (not under --json); otherwise one
// line per record on stderr, "<log_name>: record 3/30 (full, reuse, blend), elapsed .., ETA ..".
eval_run run_evaluation(const parsed_args& a, const std::vector<run_spec>& runs,
                        int64_t default_limit = 0, const std::string& log_name = "eval");

// "0.15" for 0.15: the label part of "blend@0.15".
std::string ratio_label(double r);

void write_summary(json_writer& w, const eval_meta& meta, const std::vector<run_spec>& runs,
                   const std::vector<summary>& sums);
void write_records(json_writer& w, const std::vector<run_spec>& runs,
                   const std::vector<record_result>& results, const std::vector<qa_record>& data,
                   const cbl_model* model);
void print_table(const eval_meta& meta, const std::vector<run_spec>& runs,
                 const std::vector<summary>& sums);

}  // namespace cacheblend::cli
