// Generated Unicode tables for the BERT normalizer (core/tokenizer/wordpiece-data-*.cpp, one file
// per table group, from scripts/gen-wordpiece-data.py). All arrays are sorted by codepoint.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cacheblend {
namespace wordpiece_data {

struct decomposition {
    uint32_t cpt;
    uint16_t offset;  // into k_nfd_data
    uint16_t len;
};
struct cpt_range {
    uint32_t first, last;  // inclusive
};
struct cpt_pair {
    uint32_t cpt, to;
};
struct cpt_triple {
    uint32_t cpt, to0, to1;
};

extern const char k_unicode_version[];
// Full canonical decompositions (Hangul syllables excluded: they are algorithmic).
extern const decomposition k_nfd[];
extern const size_t k_n_nfd;
extern const uint32_t k_nfd_data[];
// (first codepoint << 8) | canonical combining class; a range runs to the next entry.
extern const uint32_t k_ccc_ranges[];
extern const size_t k_n_ccc_ranges;
// General category Mn.
extern const cpt_range k_mn_ranges[];
extern const size_t k_n_mn_ranges;
// Lower case of one codepoint (str.lower() of that character) where it differs.
extern const cpt_pair k_lower[];
extern const size_t k_n_lower;
extern const cpt_triple k_lower2[];
extern const size_t k_n_lower2;

}  // namespace wordpiece_data
}  // namespace cacheblend
