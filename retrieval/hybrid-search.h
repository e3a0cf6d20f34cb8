// Hybrid retrieval (docs/ARCHITECTURE.md, 'Retrieval'): FTS5 BM25 and dense (FAISS) candidates
// fused by reciprocal-rank fusion, metadata filters applied to both, top-k chunks with their
// citation ranges. Dense search needs an embedder and an index; without them the retriever answers
// with BM25 alone and says so in the result's notice (never silently).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "retrieval/catalog.h"
#include "retrieval/embedder.h"
#include "retrieval/faiss-index.h"

namespace cacheblend {

enum class search_mode { hybrid, dense, bm25 };
const char* search_mode_name(search_mode m);
bool parse_search_mode(const std::string& s, search_mode* out);

struct search_params {
    int32_t k = 5;
    search_mode mode = search_mode::hybrid;
    search_filter filter;
    int32_t candidates = 50;  // depth of each retriever before fusion (at least k)
    int32_t rrf_k = 60;       // RRF constant: score = sum 1 / (rrf_k + rank)
};

struct search_hit {
    int64_t chunk_id = 0;
    std::string uri;
    int64_t start = 0, end = 0;  // byte range in the source document (citation)
    double score = 0;            // RRF score (hybrid), cosine (dense) or -bm25 (bm25)
    std::string text;
    int32_t n_tokens = 0;
    int32_t dense_rank = 0, bm25_rank = 0;  // 1-based; 0: not found by that retriever
    int32_t page = 0;                       // 1-based page of a PDF; 0: none
    std::string heading;                    // nearest preceding heading; "": none
};

struct search_result {
    std::vector<search_hit> hits;
    search_mode mode = search_mode::hybrid;  // what actually ran
    std::string notice;                      // e.g. why dense retrieval was skipped
};

class retriever {
public:
    // emb and index may be null (BM25 only). All must outlive the retriever.
    retriever(catalog& cat, embedder* emb, const vector_index* index)
        : cat_(cat), emb_(emb), index_(index) {}

    // Throws status::invalid_arg for k <= 0 or a bad filter; status::unsupported when dense mode
    // is asked for explicitly without an embedder.
    search_result search(const std::string& query, const search_params& p) const;

private:
    catalog& cat_;
    embedder* emb_;
    const vector_index* index_;
};

}  // namespace cacheblend
