// The dense retriever's index (docs/ARCHITECTURE.md, 'Retrieval'): FAISS IndexIDMap2 over Flat
// (default), HNSW or IVF chosen by factory string, inner product on L2-normalized vectors, ids =
// catalog chunk ids. It is derived data: saved next to the catalog in one checksummed file stamped
// with the catalog's vector_version, and rebuilt from the catalog's embeddings when missing,
// corrupt or stale. HNSW cannot remove vectors: removed ids are filtered at search time and the
// index is rebuilt once they pass a share of it. Thread-safe: searches run in parallel,
// adds/removes exclusively.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "retrieval/catalog.h"

namespace faiss {
struct Index;
}

namespace cacheblend {

// HNSW's knobs: M (the factory's number, "HNSW32") and efConstruction make the graph at build
// time, efSearch trades latency for recall per query. On 100k random 384-d vectors (HNSW's worst
// case; tests/bench/bench_faiss.cpp on a loaded 2-core machine) recall@10 >= 0.95 took a deep
// search: HNSW16/efConstruction 40 gave 0.57 at efSearch 1024; HNSW32 gave 0.94 at 2048 and
// 0.99 at 4096 with efConstruction 40 (11 min build), 0.985 at 2048 with 200 (69 min build),
// each slower than Flat's exact 35-50 ms. Hence Flat by default, and efConstruction stays
// FAISS's 40: six times the build for a graph that saves about half the query time at that
// recall. Real embeddings have far more structure than random vectors; tune on them.
struct vector_index_params {
    // FAISS factory string of the inner index: "Flat", "HNSW32", "IVF256,Flat", ... (IDMap2 and
    // the inner-product metric are added here).
    std::string factory = "Flat";
    int32_t ef_search = 64;               // HNSW
    int32_t ef_construction = 40;         // HNSW (FAISS's default; higher: better graph, slower)
    int32_t nprobe = 16;                  // IVF
    float rebuild_deleted_share = 0.25f;  // HNSW: rebuild when this share of vectors is removed
    int32_t omp_threads = 1;              // FAISS's own OpenMP threads (keep off our pool's cores)
};

class vector_index {
public:
    // Throws cacheblend::error(status::invalid_arg) for a bad factory string or dim <= 0.
    vector_index(int32_t dim, const vector_index_params& p = {});
    ~vector_index();
    vector_index(const vector_index&) = delete;
    vector_index& operator=(const vector_index&) = delete;

    int32_t dim() const { return dim_; }
    const vector_index_params& params() const { return p_; }

    // n vectors of dim() floats (normalized here, so inner product is cosine similarity). An IVF
    // index is trained on the first batch large enough; until then it holds a Flat index.
    void add(const std::vector<int64_t>& ids, const float* vectors);
    void remove(const std::vector<int64_t>& ids);
    // Top-k by cosine similarity. accept (optional) filters ids (metadata filters), searching
    // deeper until k accepted hits are found or the index is exhausted.
    // ef_search > 0 overrides params().ef_search for this call (HNSW).
    std::vector<scored_chunk> search(const float* query, int32_t k,
                                     const std::function<bool(int64_t)>& accept = {},
                                     int32_t ef_search = 0) const;

    int64_t size() const;           // live vectors
    std::vector<int64_t> ids() const;  // live ids, sorted (consistency checks)
    bool wants_rebuild() const;     // removed-but-present share past rebuild_deleted_share

    // Atomic write (temp file, fsync, rename, fsync dir); throws status::io_write.
    void save(const std::string& path, int64_t vector_version) const;
    // nullptr when the file is missing, corrupt, of another dim/factory or stale
    // (vector_version differs); *why says which.
    static std::unique_ptr<vector_index> load(const std::string& path, int32_t dim,
                                              const vector_index_params& p,
                                              int64_t vector_version, std::string* why);

private:
    void make_inner(const std::string& factory);
    void cap_threads() const;

    int32_t dim_;
    vector_index_params p_;
    std::string active_factory_;  // p_.factory, or "Flat" while an IVF is untrained
    std::unique_ptr<faiss::Index> index_;  // IndexIDMap2 owning its inner index
    std::unordered_set<int64_t> removed_;  // tombstones (HNSW)
    mutable std::shared_mutex mu_;
    // FAISS 1.7.3's IndexHNSW ignores SearchParametersHNSW: efSearch is set on the index, so
    // HNSW searches take turns under this lock.
    mutable std::mutex hnsw_mu_;
};

// Builds an index from every embedding in the catalog (vectors of another dim are an error).
std::unique_ptr<vector_index> build_vector_index(catalog& cat, int32_t dim,
                                                 const vector_index_params& p);

// The index file at path if it matches the catalog, else a rebuild (saved to path). *rebuilt and
// *why (optional) say whether and why it was rebuilt.
std::unique_ptr<vector_index> open_vector_index(const std::string& path, catalog& cat,
                                                int32_t dim, const vector_index_params& p,
                                                bool* rebuilt = nullptr,
                                                std::string* why = nullptr);

}  // namespace cacheblend
