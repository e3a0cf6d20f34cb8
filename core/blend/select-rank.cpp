#include "core/blend/select-rank.h"

#include <algorithm>

namespace cacheblend {

void take_top_scored(const std::vector<float>& score, int64_t n, std::vector<uint8_t>* taken,
                     std::vector<int64_t>* out) {
    std::vector<int64_t> order;
    for (size_t i = 0; i < score.size(); ++i) {
        if (!(*taken)[i]) order.push_back(static_cast<int64_t>(i));
    }
    n = std::min<int64_t>(n, static_cast<int64_t>(order.size()));
    if (n <= 0) return;
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int64_t a, int64_t b) {
        const float sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
        return sa > sb || (sa == sb && a < b);
    });
    for (int64_t k = 0; k < n; ++k) {
        const int64_t i = order[static_cast<size_t>(k)];
        (*taken)[static_cast<size_t>(i)] = 1;
        out->push_back(i);
    }
}

void take_sinks(const selection_input& in, int64_t n, int64_t per_chunk,
                std::vector<uint8_t>* taken, std::vector<int64_t>* out) {
    // Rank of each candidate within its chunk by offset (candidates ascend by prompt row, so
    // offsets ascend within a chunk; ranks count candidates, not offsets: at a later check layer
    // a chunk's first remaining rows are its sinks).
    const size_t m = in.chunk.size();
    std::vector<int64_t> order(m), rank(m);
    std::vector<int64_t> seen;  // candidates seen so far per chunk
    for (size_t i = 0; i < m; ++i) {
        const auto c = static_cast<size_t>(in.chunk[i]);
        if (c >= seen.size()) seen.resize(c + 1, 0);
        rank[i] = seen[c]++;
        order[i] = static_cast<int64_t>(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
        if (rank[ua] != rank[ub]) return rank[ua] < rank[ub];
        if (in.chunk[ua] != in.chunk[ub]) return in.chunk[ua] < in.chunk[ub];
        return in.offset[ua] < in.offset[ub];
    });
    for (int64_t i : order) {
        if (n <= 0) break;
        const auto u = static_cast<size_t>(i);
        if ((*taken)[u] || (per_chunk >= 0 && rank[u] >= per_chunk)) continue;
        (*taken)[u] = 1;
        out->push_back(i);
        --n;
    }
}

}  // namespace cacheblend
