// `cacheblend eval`: compares prefill modes on a QA dataset (docs/ARCHITECTURE.md, 'Evaluation')
// with the loop of eval-run.h: per mode, answer F1 against the gold answers, fidelity to full
// (answer F1, first-token agreement and KL), TTFT mean/p50/p95 and the speedup over full, plus a
// paired-bootstrap interval of the F1 difference to full.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "blend-common.h"
#include "capi-util.h"
#include "commands.h"
#include "eval-run.h"
#include "json-writer.h"
#include "sampling-flags.h"

namespace cacheblend::cli {
namespace {

const char k_sweep_ratios[] = "0.05,0.1,0.15,0.2,0.3,1.0";

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "eval",
            "eval --dataset FILE.json [--modes full,reuse,blend] [options]",
            "Compare prefill modes on a QA dataset (musique_s.json schema): answer F1, fidelity\n"
            "to full prefill (answer F1, first-token agreement and KL) and TTFT per mode.",
            {
                {"modes", "LIST", "modes to compare (default full,reuse,blend; full always runs)"},
                {"ratio", "R",
                 "recompute ratio of blend mode (default " + default_ratio_text() + ")"},
                {"ratios", "LIST", "run blend at each of these ratios (a sweep)"},
                {"sweep", "", std::string("full, reuse and blend at ") + k_sweep_ratios},
                {"policies", "LIST",
                 "run blend with each of these selection policies (at --ratio or each of "
                 "--ratios), e.g. hkvd,sink,query+hkvd: runs named POLICY@RATIO"},
                {"limit", "N", "evaluate the first N records (default all)"},
                {"json", "", "print the per-mode summary as one JSON object"},
                {"out", "FILE", "write the summary and every per-record result as JSON"},
                {"resume", "FILE", "keep finished records in FILE; a rerun with it skips them"},
            },
            0,
            "ctxs and answers may be JSON lists or strings holding Python literals. Decoding is\n"
            "greedy unless the sampling flags say otherwise; every mode then samples with the\n"
            "same settings and seed (default 0). F1 is SQuAD-normalized word F1 of the first\n"
            "answer line (the reference's Yes/No mapping applied) against the best gold answer;\n"
            "the F1 interval is a paired bootstrap (1000 resamples, fixed seed) of mode minus\n"
            "full. With --resume FILE every finished record is written to FILE at once; a run\n"
            "stopped or killed is continued by the same command (--limit may grow, --out may\n"
            "change; other settings must match, or FILE is refused; the model is matched by\n"
            "file name and size, so FILE may move to another machine).",
        };
        for (flag_spec& f : eval_flags()) c.flags.push_back(std::move(f));
        for (flag_spec& f : sampling_flags(eval_sampling())) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

std::vector<run_spec> plan_runs(const parsed_args& a) {
    const bool sweep = a.has("sweep");
    std::string modes = a.get_or("modes", "full,reuse,blend");
    if (sweep && a.has("modes")) throw usage_error("--sweep sets the modes; drop --modes");
    const double ratio = a.get_double("ratio", default_ratio(), 0.0, 1.0);
    std::vector<double> ratios;
    if (a.has("ratio") && (a.has("ratios") || sweep)) {
        throw usage_error("--ratio applies to a single blend run; drop it with --ratios/--sweep");
    }
    if (a.has("ratios")) {
        ratios = parse_double_list("ratios", *a.get("ratios"), 0.0, 1.0);
    } else if (sweep) {
        ratios = parse_double_list("ratios", k_sweep_ratios, 0.0, 1.0);
    }
    std::vector<run_spec> runs{{"full", CBL_MODE_FULL, 1.f}};
    std::set<std::string> seen{"full"};
    bool has_blend = false;
    size_t pos = 0;
    while (true) {
        const size_t comma = modes.find(',', pos);
        const std::string m =
            modes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const int32_t bm = parse_enum(CBL_NAMES_MODE, "modes", m);
        if (bm == CBL_MODE_BLEND) {
            has_blend = true;
        } else if (seen.insert(m).second) {
            runs.push_back({m, bm, bm == CBL_MODE_FULL ? 1.f : 0.f});
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (a.has("policies")) {
        // Policies x ratios, one full run as the reference of them all: the comparison of
        // selection policies (issue 15) in one pass over the records.
        if (a.has("select")) throw usage_error("--policies lists the policies; drop --select");
        if (ratios.empty()) ratios.push_back(ratio);
        for (int32_t sel : parse_enum_list(CBL_X_NAMES_SELECT, "policies", *a.get("policies"))) {
            for (double r : ratios) {
                const std::string label =
                    std::string(enum_name(CBL_X_NAMES_SELECT, sel)) + "@" + ratio_label(r);
                if (seen.insert(label).second) {
                    runs.push_back({label, CBL_MODE_BLEND, static_cast<float>(r), sel});
                }
            }
        }
    } else if (!ratios.empty()) {
        // A ratio list is a blend sweep: it implies blend even when --modes left it out.
        for (double r : ratios) {
            const std::string label = "blend@" + ratio_label(r);
            if (seen.insert(label).second) {
                runs.push_back({label, CBL_MODE_BLEND, static_cast<float>(r)});
            }
        }
    } else if (has_blend) {
        runs.push_back({"blend", CBL_MODE_BLEND, static_cast<float>(ratio)});
    }
    return runs;
}
}  // namespace

int run_eval(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;

    const auto dataset = a.get("dataset");
    if (!dataset || dataset->empty()) throw usage_error("eval: --dataset FILE is required");
    const std::vector<run_spec> runs = plan_runs(a);
    a.get_int("limit", 0, 1, std::numeric_limits<int32_t>::max());  // bad values: usage, now
    const bool json = a.has("json");
    const std::string out_path = a.get_or("out", "");
    if (a.has("out") && out_path.empty()) throw usage_error("--out: empty path");

    // Open --out now: a bad path must fail before the long run, not after it.
    std::ofstream out_file;
    if (!out_path.empty()) {
        out_file.open(out_path, std::ios::binary | std::ios::trunc);
        if (!out_file) {
            throw capi_error(CBL_IO, "cannot write " + out_path + ": " + std::strerror(errno));
        }
    }
    const eval_run run = run_evaluation(a, runs);

    const std::vector<summary>& sums = run.sums;
    const eval_meta& meta = run.meta;
    if (out_file.is_open()) {
        std::ofstream& f = out_file;
        json_writer w(f, 2);
        w.begin_object();
        write_summary(w, meta, runs, sums);
        write_records(w, runs, run.results, run.data, run.model.get());
        w.end_object();
        f << "\n";
        f.flush();
        if (!f) throw capi_error(CBL_IO_WRITE, "writing " + out_path + " failed");
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
