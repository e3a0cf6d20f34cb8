#include "eval-metrics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "core/tokenizer/unicode.h"

namespace cacheblend::eval {
namespace {

// Decodes one well-formed UTF-8 sequence (no overlongs or surrogates); 0 when s[0..n) does not
// start with one. Invalid bytes are then handled one at a time by the callers.
size_t decode_utf8(const char* s, size_t n, uint32_t* cpt) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    const uint8_t c = b(0);
    if (c < 0x80) {
        *cpt = c;
        return 1;
    }
    size_t len = 0;
    uint32_t v = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; ++i) {
        if ((b(i) & 0xC0) != 0x80) return 0;
        v = (v << 6) | (b(i) & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cpt = v;
    return len;
}

// Simple (one-to-one) lowercase mappings of the common alphabets.
uint32_t lower_cpt(uint32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x178) return 0xFF;
        if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
        const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper) return (c & 1) ? c + 1 : c;
        return (c & 1) ? c : c + 1;
    }
    if (c >= 0x386 && c <= 0x3AB) {
        if (c == 0x386) return 0x3AC;
        if (c >= 0x388 && c <= 0x38A) return c + 37;
        if (c == 0x38C) return 0x3CC;
        if (c == 0x38E || c == 0x38F) return c + 63;
        if (c >= 0x391 && c != 0x3A2) return c + 32;
        return c;
    }
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return (c & 1) ? c : c + 1;
    if ((c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF)) return (c & 1) ? c : c + 1;
    return c;
}

// Python's str.isspace().
bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python re's \w for str patterns: alphanumeric (letters and numbers) or '_'.
bool is_word(uint32_t c) {
    if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '_';
    return (unicode::cpt_flags(c) & (unicode::flag_letter | unicode::flag_number)) != 0;
}

bool is_ascii_punct(unsigned char c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
}

// Walks s as code points; invalid bytes come as {UINT32_MAX, 1}.
template <typename F>
void for_each_cpt(std::string_view s, F&& f) {
    size_t i = 0;
    while (i < s.size()) {
        uint32_t c = 0;
        size_t n = decode_utf8(s.data() + i, s.size() - i, &c);
        if (n == 0) {
            c = std::numeric_limits<uint32_t>::max();
            n = 1;
        }
        f(c, i, n);
        i += n;
    }
}

template <typename T>
double overlap_f1_impl(const std::vector<T>& pred, const std::vector<T>& gold) {
    if (pred.empty() || gold.empty()) return pred.empty() && gold.empty() ? 1.0 : 0.0;
    std::map<T, int64_t> count;
    for (const T& g : gold) ++count[g];
    int64_t same = 0;
    for (const T& p : pred) {
        auto it = count.find(p);
        if (it != count.end() && it->second > 0) {
            --it->second;
            ++same;
        }
    }
    if (same == 0) return 0.0;
    const double precision = static_cast<double>(same) / static_cast<double>(pred.size());
    const double recall = static_cast<double>(same) / static_cast<double>(gold.size());
    return 2.0 * precision * recall / (precision + recall);
}

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

std::string to_lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for_each_cpt(s, [&](uint32_t c, size_t i, size_t n) {
        if (c == std::numeric_limits<uint32_t>::max()) {
            out.append(s.data() + i, n);
        } else if (c == 0x130) {
            out += "i\xCC\x87";  // U+0130 lowercases to "i" + combining dot above, as in Python
        } else {
            unicode::utf8_append(out, lower_cpt(c));
        }
    });
    return out;
}

std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> words;
    std::string cur;
    bool in_word = false;
    for_each_cpt(s, [&](uint32_t c, size_t i, size_t n) {
        if (c != std::numeric_limits<uint32_t>::max() && is_space(c)) {
            if (in_word) words.push_back(std::move(cur));
            cur.clear();
            in_word = false;
            return;
        }
        cur.append(s.data() + i, n);
        in_word = true;
    });
    if (in_word) words.push_back(std::move(cur));
    return words;
}

std::string normalize_answer(std::string_view s) {
    const std::string lower = to_lower(s);
    std::string nopunct;
    nopunct.reserve(lower.size());
    for (char ch : lower) {
        if (!is_ascii_punct(static_cast<unsigned char>(ch))) nopunct.push_back(ch);
    }
    // \b(a|an|the)\b: a maximal run of word characters that is exactly an article becomes " ".
    std::string noart;
    noart.reserve(nopunct.size());
    size_t run_start = 0;
    bool in_run = false;
    const auto close_run = [&](size_t end) {
        const std::string_view w(nopunct.data() + run_start, end - run_start);
        if (w == "a" || w == "an" || w == "the") {
            noart += ' ';
        } else {
            noart.append(w);
        }
    };
    for_each_cpt(nopunct, [&](uint32_t c, size_t i, size_t n) {
        const bool word = c != std::numeric_limits<uint32_t>::max() && is_word(c);
        if (word) {
            if (!in_run) run_start = i;
            in_run = true;
            return;
        }
        if (in_run) close_run(i);
        in_run = false;
        noart.append(nopunct, i, n);
    });
    if (in_run) close_run(nopunct.size());
    std::string out;
    for (const std::string& w : split_words(noart)) {
        if (!out.empty()) out += ' ';
        out += w;
    }
    return out;
}

std::string parse_generation(std::string_view s) {
    size_t b = 0;
    while (b < s.size() && s[b] == '\n') ++b;
    s.remove_prefix(b);
    const size_t nl = s.find('\n');
    if (nl != std::string_view::npos) s = s.substr(0, nl);
    const auto starts = [](std::string_view t, std::string_view p) {
        return t.size() >= p.size() && t.compare(0, p.size(), p) == 0;
    };
    if (starts(s, "Yes") || starts(s, "yes")) return "Yes";
    const std::vector<std::string> words = split_words(s);
    // The reference raises IndexError on an empty line; an empty answer is the sane reading.
    if (!words.empty() && (starts(words[0], "No") || starts(words[0], "no"))) return "No";
    return std::string(s);
}

double overlap_f1(const std::vector<std::string>& pred, const std::vector<std::string>& gold) {
    return overlap_f1_impl(pred, gold);
}

double overlap_f1(const std::vector<int32_t>& pred, const std::vector<int32_t>& gold) {
    return overlap_f1_impl(pred, gold);
}

double word_f1(std::string_view pred, std::string_view gold) {
    return overlap_f1(split_words(normalize_answer(pred)), split_words(normalize_answer(gold)));
}

double answer_f1(std::string_view generation, const std::vector<std::string>& golds) {
    const std::string pred = parse_generation(generation);
    double best = 0;
    for (const std::string& g : golds) best = std::max(best, word_f1(pred, g));
    return best;
}

double kl_divergence_logits(const float* p_logits, const float* q_logits, int64_t n) {
    if (n <= 0) return 0;
    const auto log_sum_exp = [n](const float* x) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
        if (!std::isfinite(m)) return m;
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
        return m + std::log(s);
    };
    const double lp = log_sum_exp(p_logits);
    const double lq = log_sum_exp(q_logits);
    double kl = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double a = static_cast<double>(p_logits[i]) - lp;
        const double p = std::exp(a);
        if (p == 0) continue;
        const double b = static_cast<double>(q_logits[i]) - lq;
        if (std::isinf(b)) return std::numeric_limits<double>::infinity();
        kl += p * (a - b);
    }
    return std::max(0.0, kl);  // rounding can leave a tiny negative for identical inputs
}

double mean(const std::vector<double>& v) {
    if (v.empty()) return 0;
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    const double frac = pos - static_cast<double>(lo);
    return v[lo] + (v[hi] - v[lo]) * frac;
}

interval paired_bootstrap_ci(const std::vector<double>& a, const std::vector<double>& b,
                             int32_t resamples, uint64_t seed, double level) {
    const size_t n = std::min(a.size(), b.size());
    if (n == 0 || resamples <= 0) return {};
    std::vector<double> diff(n);
    for (size_t i = 0; i < n; ++i) diff[i] = a[i] - b[i];
    std::vector<double> means(static_cast<size_t>(resamples));
    uint64_t state = seed;
    for (double& m : means) {
        double s = 0;
        for (size_t i = 0; i < n; ++i) {
            // Multiply-shift maps 64 random bits onto [0, n) without modulo bias worth noting.
            const auto j = static_cast<size_t>(
                (static_cast<unsigned __int128>(splitmix64(state)) * n) >> 64);
            s += diff[j];
        }
        m = s / static_cast<double>(n);
    }
    const double tail = (1.0 - std::clamp(level, 0.0, 1.0)) / 2.0 * 100.0;
    return {percentile(means, tail), percentile(std::move(means), 100.0 - tail)};
}

}  // namespace cacheblend::eval
