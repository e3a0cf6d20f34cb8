// The sampling flags of every command that generates (generate, ask, blend, eval), with
// llama.cpp's names and "off" values, mapped onto the C ABI's params (whose zero fields mean
// the library default, so a flag left out keeps the call's own default).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "args.h"

namespace cacheblend::cli {

// What a command does when a flag is absent: only the help text and the seed differ.
struct sampling_defaults {
    std::string repeat_penalty = "1 = off";  // help text of the defaults
    std::string repeat_last_n = "64";
    // Without --seed: a random seed (reported in --json), or 0 where runs are compared with each
    // other (blend, eval), so that two runs of different modes draw alike.
    bool random_seed = true;
};

std::vector<flag_spec> sampling_flags(const sampling_defaults& d);

// The parsed flags as C ABI values (0 = the library default).
struct sampling_choice {
    float temperature = 0.f;
    int32_t top_k = 0;
    float top_p = 0.f;
    float min_p = 0.f;
    float repeat_penalty = 0.f;
    int32_t repeat_last_n = 0;
    float frequency_penalty = 0.f;
    float presence_penalty = 0.f;
    uint64_t seed = 0;
    std::string given;  // the sampling flags as given, e.g. "--temp 0.7 --seed 3" ("" = none)

    // cbl_generate_params or cbl_ask_params.
    template <typename P>
    void apply_to(P* p) const {
        p->temperature = temperature;
        p->top_k = top_k;
        p->top_p = top_p;
        p->min_p = min_p;
        p->repeat_penalty = repeat_penalty;
        p->repeat_last_n = repeat_last_n;
        p->frequency_penalty = frequency_penalty;
        p->presence_penalty = presence_penalty;
        p->seed = seed;
    }
};

// Throws usage_error (exit 2) for a bad value.
sampling_choice parse_sampling(const parsed_args& a, const sampling_defaults& d);

}  // namespace cacheblend::cli
