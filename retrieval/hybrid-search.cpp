#include "retrieval/hybrid-search.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/util/error.h"

namespace cacheblend {

const char* search_mode_name(search_mode m) {
    switch (m) {
        case search_mode::hybrid: return "hybrid";
        case search_mode::dense: return "dense";
        case search_mode::bm25: return "bm25";
    }
    return "?";
}

bool parse_search_mode(const std::string& s, search_mode* out) {
    if (s == "hybrid") {
        *out = search_mode::hybrid;
    } else if (s == "dense") {
        *out = search_mode::dense;
    } else if (s == "bm25") {
        *out = search_mode::bm25;
    } else {
        return false;
    }
    return true;
}

search_result retriever::search(const std::string& query, const search_params& p) const {
    if (p.k <= 0) throw error(status::invalid_arg, fmt("search: k must be positive, got %d", p.k));
    search_result r;
    r.mode = p.mode;
    const bool dense_ok = emb_ && index_;
    if (p.mode == search_mode::dense && !dense_ok) {
        throw error(status::unsupported,
                    "search: dense mode needs an embedder (none loaded; use --mode bm25)");
    }
    if (p.mode == search_mode::hybrid && !dense_ok) {
        r.mode = search_mode::bm25;
        r.notice = "no embedder loaded: BM25 only";
    }
    const int32_t depth = std::max(p.k, p.candidates);

    std::vector<scored_chunk> dense, bm25;
    if (r.mode != search_mode::bm25) {
        std::vector<float> q;
        emb_->embed({query}, q);
        if (static_cast<int32_t>(q.size()) != index_->dim()) {
            throw error(status::internal, fmt("search: embedder gave %zu floats, index wants %d",
                                              q.size(), index_->dim()));
        }
        std::function<bool(int64_t)> accept;
        if (!p.filter.empty()) {
            // Validates the filter once (throws on a bad key) before FAISS calls back.
            cat_.filter_chunks({}, p.filter);
            accept = [&](int64_t id) { return !cat_.filter_chunks({id}, p.filter).empty(); };
        }
        dense = index_->search(q.data(), r.mode == search_mode::dense ? p.k : depth, accept);
    }
    if (r.mode != search_mode::dense) {
        bm25 = cat_.search_bm25(query, r.mode == search_mode::bm25 ? p.k : depth, p.filter);
    }

    struct fused {
        double score = 0;
        int32_t dense_rank = 0, bm25_rank = 0;
    };
    std::unordered_map<int64_t, fused> by_id;
    std::vector<int64_t> order;
    const auto note = [&](int64_t id) -> fused& {
        auto it = by_id.find(id);
        if (it == by_id.end()) {
            order.push_back(id);
            it = by_id.emplace(id, fused{}).first;
        }
        return it->second;
    };
    for (size_t i = 0; i < dense.size(); ++i) {
        fused& f = note(dense[i].chunk_id);
        f.dense_rank = static_cast<int32_t>(i + 1);
        f.score = r.mode == search_mode::hybrid ? 1.0 / (p.rrf_k + i + 1) : dense[i].score;
    }
    for (size_t i = 0; i < bm25.size(); ++i) {
        fused& f = note(bm25[i].chunk_id);
        f.bm25_rank = static_cast<int32_t>(i + 1);
        f.score += r.mode == search_mode::hybrid ? 1.0 / (p.rrf_k + i + 1) : bm25[i].score;
    }
    // Stable: ties keep dense-then-BM25 discovery order.
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return by_id[a].score > by_id[b].score; });
    if (order.size() > static_cast<size_t>(p.k)) order.resize(static_cast<size_t>(p.k));

    std::unordered_map<int64_t, chunk_info> rows;
    for (chunk_info& c : cat_.get_chunks(order)) rows.emplace(c.id, std::move(c));
    for (int64_t id : order) {
        auto it = rows.find(id);
        if (it == rows.end()) continue;  // removed since the index was searched
        const fused& f = by_id[id];
        search_hit h;
        h.chunk_id = id;
        h.uri = it->second.uri;
        h.start = it->second.start;
        h.end = it->second.end;
        h.score = f.score;
        h.text = std::move(it->second.text);
        h.n_tokens = it->second.n_tokens;
        h.dense_rank = f.dense_rank;
        h.bm25_rank = f.bm25_rank;
        h.page = it->second.page;
        h.heading = std::move(it->second.heading);
        r.hits.push_back(std::move(h));
    }
    return r;
}

}  // namespace cacheblend
