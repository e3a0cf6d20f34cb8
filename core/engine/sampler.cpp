#include "core/engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace cacheblend {

token_id argmax(const float* logits, int32_t n) {
    token_id best = 0;
    for (int32_t i = 1; i < n; ++i) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

std::vector<std::pair<token_id, float>> top_logprobs(const float* logits, int32_t n, int32_t k) {
    std::vector<std::pair<token_id, float>> out;
    if (n <= 0 || k <= 0) return out;
    float mx = logits[0];
    for (int32_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    std::vector<token_id> idx(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i;
    const int32_t kk = std::min(k, n);
    std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), [&](token_id a, token_id b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int32_t i = 0; i < kk; ++i) out.emplace_back(idx[static_cast<size_t>(i)], logits[idx[static_cast<size_t>(i)]] - lse);
    return out;
}

sampler::sampler(const sampler_params& p, token_filter exempt)
    : p_(p), exempt_(std::move(exempt)), rng_(p.seed) {}

void sampler::accept(token_id t) {
    if (!p_.penalties_on()) return;
    window_.push_back(t);
    ++count_[t];
    if (p_.repeat_last_n > 0 && window_.size() > static_cast<size_t>(p_.repeat_last_n)) {
        const token_id old = window_.front();
        window_.pop_front();
        if (--count_[old] == 0) count_.erase(old);
    }
}

void sampler::penalize(float* logits, int32_t n) const {
    if (!p_.penalties_on()) return;
    for (const auto& [t, c] : count_) {
        if (t < 0 || t >= n || (exempt_ && exempt_(t))) continue;
        float& l = logits[t];
        // llama.cpp's rule: dividing a negative logit would raise it, so those are multiplied.
        l = l <= 0.f ? l * p_.repeat_penalty : l / p_.repeat_penalty;
        l -= static_cast<float>(c) * p_.frequency_penalty + p_.presence_penalty;
    }
}

token_id sampler::sample(const float* raw, int32_t n) {
    const float* logits = raw;
    if (p_.penalties_on() && !count_.empty()) {
        work_.assign(raw, raw + n);
        penalize(work_.data(), n);
        logits = work_.data();
    }
    if (p_.temperature <= 0.f) return argmax(logits, n);
    cand_.clear();
    cand_.reserve(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) cand_.emplace_back(logits[i] / p_.temperature, i);
    auto by_logit = [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t keep = cand_.size();
    if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < keep) {
        keep = static_cast<size_t>(p_.top_k);
        std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep), cand_.end(), by_logit);
    } else {
        std::sort(cand_.begin(), cand_.end(), by_logit);
    }
    cand_.resize(keep);
    // Softmax over the kept candidates, then min-p and top-p cuts (candidates are sorted).
    const float mx = cand_[0].first;
    std::vector<double> prob(keep);
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp(static_cast<double>(cand_[i].first - mx));
    size_t n_keep = keep;
    if (p_.min_p > 0.f) {
        const double floor = prob[0] * p_.min_p;
        n_keep = 1;
        while (n_keep < keep && prob[n_keep] >= floor) ++n_keep;
    }
    if (p_.top_p < 1.f) {
        double acc = 0.0;
        size_t i = 0;
        for (; i < n_keep; ++i) {
            acc += prob[i] / sum;
            if (acc >= p_.top_p) { ++i; break; }
        }
        n_keep = std::max<size_t>(1, std::min(n_keep, i));
    }
    double total = 0.0;
    for (size_t i = 0; i < n_keep; ++i) total += prob[i];
    std::uniform_real_distribution<double> u(0.0, total);
    double r = u(rng_);
    for (size_t i = 0; i < n_keep; ++i) {
        r -= prob[i];
        if (r <= 0.0) return cand_[i].second;
    }
    return cand_[n_keep - 1].second;
}

}  // namespace cacheblend
