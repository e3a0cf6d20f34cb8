// `cacheblend calibrate`: the quality guard (docs/ARCHITECTURE.md, 'Blended prefill'). Measures
// blending against full prefill on a QA dataset (the loop of eval-run.h) at increasing recompute
// ratios and records, in the KV store, the smallest ratio whose fidelity meets the target for this
// model and KV format. Sessions asking for the calibrated ratio (`ask`/`blend --ratio calibrated`,
// the C ABI's cbl_session_params.calibrated_ratio) use it, and run full prefill when no ratio below
// 1 met it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>

#include "blend-common.h"
#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "capi-util.h"
#include "commands.h"
#include "eval-run.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

const char k_default_ratios[] = "0.05,0.1,0.15,0.2,0.3,0.5";

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "calibrate",
            "calibrate --dataset FILE.json [--metric M] [--target X] [options]",
            "Find the smallest recompute ratio whose blended answers stay faithful to full\n"
            "prefill on a QA dataset, and record it in the KV store for this model and KV format\n"
            "(used by `ask`/`blend --ratio calibrated`).",
            {
                {"metric", "M",
                 "fidelity (answer F1 vs full, default), agreement (first token) or kl "
                 "(first-token KL)"},
                {"target", "X",
                 "fidelity/agreement at least X, kl at most X (defaults 0.90 / 0.95 / 0.05)"},
                {"ratios", "LIST",
                 std::string("ratios to try, ascending (default ") + k_default_ratios + ")"},
                {"policies", "LIST",
                 "choose among these selection policies too, e.g. hkvd,sink+hkvd (default: "
                 "--select's policy only)"},
                {"limit", "N", "records to measure (default 20)"},
                {"dry-run", "", "measure and print, record nothing"},
                {"json", "", "print the result as one JSON object"},
            },
            0,
            "Each record runs full prefill first (the reference), then blend at every ratio (of\n"
            "every policy with --policies); the metric is the mean over the records. The record\n"
            "keeps the smallest ratio that meets the target and its policy (of policies meeting\n"
            "it at that ratio, the fastest). When none does the record says so and calibrated\n"
            "requests run full prefill (with a notice in their stats).",
        };
        for (flag_spec& f : eval_flags()) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

double metric_of(const summary& s, const std::string& metric) {
    if (metric == "fidelity") return s.fidelity_f1;
    if (metric == "agreement") return s.agreement;
    return s.kl;
}

bool meets(double value, const std::string& metric, double target) {
    return metric == "kl" ? value <= target : value >= target;
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;

    const std::string metric = a.get_or("metric", "fidelity");
    double target = 0;
    if (metric == "fidelity") {
        target = a.get_double("target", 0.90, 0.0, 1.0);
    } else if (metric == "agreement") {
        target = a.get_double("target", 0.95, 0.0, 1.0);
    } else if (metric == "kl") {
        target = a.get_double("target", 0.05, 0.0, 1e6);
    } else {
        throw usage_error("--metric: expected fidelity, agreement or kl, got '" + metric + "'");
    }
    std::vector<double> ratios =
        parse_double_list("ratios", a.get_or("ratios", k_default_ratios), 0.0, 1.0);
    std::sort(ratios.begin(), ratios.end());
    ratios.erase(std::unique(ratios.begin(), ratios.end()), ratios.end());
    const blend_tuning tuning = parse_blend_tuning(a);
    std::vector<int32_t> policies{tuning.select};
    if (a.has("policies")) {
        if (a.has("select")) throw usage_error("--policies lists the policies; drop --select");
        policies = parse_enum_list(CBL_X_NAMES_SELECT, "policies", *a.get("policies"));
    }
    // Ratio-major order: the first run that meets the target is at the smallest ratio.
    std::vector<run_spec> runs{{"full", CBL_MODE_FULL, 1.f}};
    for (double r : ratios) {
        for (int32_t p : policies) {
            const std::string name = policies.size() > 1
                                         ? std::string(enum_name(CBL_X_NAMES_SELECT, p)) + "@"
                                         : std::string("blend@");
            runs.push_back({name + ratio_label(r), CBL_MODE_BLEND, static_cast<float>(r), p});
        }
    }
    const bool json = a.has("json");

    // Default limit 20: enough for a stable mean, minutes rather than hours on a CPU.
    const eval_run run = run_evaluation(a, runs, 20, "calibrate");

    // The smallest ratio that meets the target; else the record says none did (ratio 1: full).
    cbl_x_calibration c;
    cbl_x_calibration_init(&c);
    std::snprintf(c.metric, sizeof(c.metric), "%s", metric.c_str());
    c.target = target;
    c.records = static_cast<int32_t>(run.meta.records);
    c.select = tuning.select;  // the ratio holds for the policy it was measured with
    c.ratio = 1.f;
    c.met = false;
    c.value = metric_of(run.sums.back(), metric);
    size_t chosen = 0;
    for (size_t k = 1; k < runs.size(); ++k) {
        const double v = metric_of(run.sums[k], metric);
        if (!meets(v, metric, target)) continue;
        if (chosen && runs[k].ratio != runs[chosen].ratio) break;  // a larger ratio: done
        if (!chosen || run.sums[k].speedup > run.sums[chosen].speedup) chosen = k;
    }
    if (chosen) {
        c.ratio = runs[chosen].ratio;
        c.select = runs[chosen].select;
        c.met = true;
        c.value = metric_of(run.sums[chosen], metric);
    }
    const bool record = !a.has("dry-run");
    if (record) {
        check(cbl_x_kvstore_set_calibration(run.store.get(), run.model.get(), tuning.kv_format, &c));
    }

    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        w.field("metric", metric);
        w.field("target", target);
        w.field("met", c.met);
        w.field("ratio", c.ratio);
        w.field("select", enum_name(CBL_X_NAMES_SELECT, c.select));
        w.field("value", c.value);
        w.field("records", static_cast<int64_t>(c.records));
        w.field("recorded", record);
        w.field("store", run.meta.store);
        w.field("model", run.meta.model);
        w.key("points").begin_array();
        for (size_t k = 1; k < runs.size(); ++k) {
            w.begin_object();
            w.field("ratio", runs[k].ratio);
            w.field("select", enum_name(CBL_X_NAMES_SELECT, runs[k].select));
            w.field("value", metric_of(run.sums[k], metric));
            w.field("ttft_ms_mean", run.sums[k].ttft_mean);
            w.field("speedup_vs_full", run.sums[k].speedup);
            w.end_object();
        }
        w.end_array();
        w.end_object();
        std::cout << "\n";
    } else {
        print_table(run.meta, runs, run.sums);
        const char* cmp = metric == "kl" ? "<=" : ">=";
        if (c.met) {
            std::printf("\ncalibrated: r = %g, selection %s (%s %.4f %s %g on %d records)%s\n",
                        static_cast<double>(c.ratio), enum_name(CBL_X_NAMES_SELECT, c.select),
                        metric.c_str(), c.value, cmp, target, c.records,
                        record ? "" : " [dry run: not recorded]");
        } else {
            std::printf("\nno ratio up to %g meets %s %s %g (%.4f at the largest) on %d records: "
                        "calibrated requests will run full prefill%s\n",
                        ratios.back(), metric.c_str(), cmp, target, c.value, c.records,
                        record ? "" : " [dry run: not recorded]");
        }
        if (record) std::printf("recorded in %s\n", run.meta.store.c_str());
    }
    return 0;
}

}  // namespace cacheblend::cli
