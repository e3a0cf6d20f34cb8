// Evaluation metrics for comparing prefill modes (docs/ARCHITECTURE.md, 'Evaluation'): the
// CacheBlend reference's answer parsing and SQuAD normalization (reference §1.11,
// example/utils.py), word-level and token-id F1, KL divergence of first-token distributions,
// percentiles and a paired bootstrap. Pure functions with no I/O, so they are unit-tested without a
// model. Part of the eval library (eval/CMakeLists.txt): the CLI and the tests link it; the shipped
// libcacheblend does not.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cacheblend::eval {

// Python's str.lower() for the scripts a QA dataset holds (ASCII, Latin-1, Latin Extended-A,
// Greek, Cyrillic); other code points and invalid bytes pass through unchanged.
std::string to_lower(std::string_view s);

// Python's str.split() with no argument: runs of Unicode white space separate words.
std::vector<std::string> split_words(std::string_view s);

// SQuAD normalize_answer: lowercase, drop ASCII punctuation (string.punctuation), drop the words
// a/an/the (regex \b(a|an|the)\b with Unicode word characters), collapse white space.
std::string normalize_answer(std::string_view s);

// The reference's parse_generation: strip leading newlines, keep the first line, map it to "Yes"
// when it starts with "Yes"/"yes" and to "No" when its first word starts with "No"/"no" (as the
// reference does, this also maps "Norway" or "none" to "No"; kept for comparability).
std::string parse_generation(std::string_view s);

// Multiset-overlap F1 (collections.Counter intersection). When either side is empty the score is
// 1 if both are empty, else 0.
double overlap_f1(const std::vector<std::string>& pred, const std::vector<std::string>& gold);
double overlap_f1(const std::vector<int32_t>& pred, const std::vector<int32_t>& gold);

// F1 over the words of normalize_answer(pred) and normalize_answer(gold); no parsing.
double word_f1(std::string_view pred, std::string_view gold);

// Answer F1: parse_generation(generation), then the best word_f1 over the gold answers
// (0 when there are none).
double answer_f1(std::string_view generation, const std::vector<std::string>& golds);

// KL(softmax(p) || softmax(q)) in nats over n logits, computed in double with log-sum-exp.
// Returns +inf when q gives zero probability (after underflow) where p does not.
double kl_divergence_logits(const float* p_logits, const float* q_logits, int64_t n);

double mean(const std::vector<double>& v);  // 0 for an empty vector

// Percentile with linear interpolation between order statistics (numpy's default);
// q in [0, 100]. Returns 0 for an empty vector.
double percentile(std::vector<double> v, double q);

struct interval {
    double lo = 0;
    double hi = 0;
};

// Paired bootstrap of mean(a[i] - b[i]): `resamples` resamples of the n pairs with replacement
// from a fixed-seed generator (same seed, same interval on every platform), and the central
// `level` interval of the resampled means (percentile method). a and b must have equal sizes;
// empty input gives {0, 0}.
interval paired_bootstrap_ci(const std::vector<double>& a, const std::vector<double>& b,
                             int32_t resamples = 1000, uint64_t seed = 20240527,
                             double level = 0.95);

}  // namespace cacheblend::eval
