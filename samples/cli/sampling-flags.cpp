#include "sampling-flags.h"

#include <limits>
#include <random>

namespace cacheblend::cli {

std::vector<flag_spec> sampling_flags(const sampling_defaults& d) {
    return {
        {"temp", "T", "sampling temperature; 0 = greedy (default 0)"},
        {"top-k", "K", "with --temp: keep the K most likely tokens; 0 = off (default 40)"},
        {"top-p", "P", "with --temp: nucleus sampling threshold; 1 = off (default 0.95)"},
        {"min-p", "P",
         "with --temp: drop tokens below P x the best probability; 0 = off (default 0.05)"},
        {"repeat-penalty", "F",
         "penalize tokens seen in the last --repeat-last-n (logit / F), greedy too; 1 = off "
         "(default " + d.repeat_penalty + ")"},
        {"repeat-last-n", "N",
         "penalty window in tokens, prompt included; 0 = no penalties, -1 = whole context "
         "(default " + d.repeat_last_n + ")"},
        {"frequency-penalty", "F",
         "lower a token's logit by F x its count in the window; 0 = off (default 0)"},
        {"presence-penalty", "F",
         "lower the logit of a token in the window by F; 0 = off (default 0)"},
        {"seed", "S",
         d.random_seed ? "sampling seed (default: random, reported in --json stats)"
                       : "sampling seed (default 0: runs of different modes draw alike)"},
    };
}

sampling_choice parse_sampling(const parsed_args& a, const sampling_defaults& d) {
    constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();
    sampling_choice c;
    c.temperature = static_cast<float>(a.get_double("temp", 0.0, 0.0, 1e6));
    // The C ABI's zero means "default": the CLI's "0 = off" maps to its "off" values.
    if (a.has("top-k")) {
        const int64_t k = a.get_int("top-k", 40, 0, i32_max);
        c.top_k = k == 0 ? -1 : static_cast<int32_t>(k);
    }
    if (a.has("top-p")) {
        c.top_p = static_cast<float>(a.get_double("top-p", 0.95, 0.0, 1.0));
        if (c.top_p == 0.f) throw usage_error("--top-p 0 keeps nothing; use --temp 0 for greedy");
    }
    if (a.has("min-p")) {
        const double p = a.get_double("min-p", 0.05, 0.0, 1.0);
        c.min_p = p == 0.0 ? -1.f : static_cast<float>(p);
    }
    if (a.has("repeat-penalty")) {
        c.repeat_penalty = static_cast<float>(a.get_double("repeat-penalty", 1.0, 0.0, 1e6));
        if (c.repeat_penalty == 0.f) {
            throw usage_error("--repeat-penalty must be above 0 (1 = off)");
        }
    }
    c.frequency_penalty =
        static_cast<float>(a.get_double("frequency-penalty", 0.0, -1e6, 1e6));
    c.presence_penalty = static_cast<float>(a.get_double("presence-penalty", 0.0, -1e6, 1e6));
    if (a.has("repeat-last-n")) {
        c.repeat_last_n = static_cast<int32_t>(a.get_int("repeat-last-n", 64, -1, i32_max));
        if (c.repeat_last_n == 0) {
            // llama.cpp's "no window": no penalty of any kind (the C ABI's 0 is the default).
            c.repeat_penalty = 1.f;
            c.frequency_penalty = 0.f;
            c.presence_penalty = 0.f;
        }
    }
    for (const flag_spec& f : sampling_flags(d)) {
        if (!a.has(f.name)) continue;
        if (!c.given.empty()) c.given += ' ';
        c.given += "--" + f.name + ' ' + *a.get(f.name);
    }
    if (a.has("seed")) {
        c.seed = a.get_u64("seed", 0);
    } else if (d.random_seed) {
        c.seed = std::random_device{}();
    }
    return c;
}

}  // namespace cacheblend::cli
