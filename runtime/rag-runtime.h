// The product's one-call set-up and its request path (docs/ARCHITECTURE.md, 'Ask path'): a
// rag_runtime owns the model, the chunk KV store and the corpus (catalog + FAISS index + embedder)
// of one data directory, and its ask() runs a request: retrieve, assemble the prompt within the
// context, then a rag_session (runtime/rag-session.h) prefills it blended, generates and stores
// what was computed from scratch. The C ABI and the CLI are thin layers over these two classes.
//
// Thread safety: a rag_runtime is shared by any number of threads (searches in parallel, ingests
// serialized). A rag_session serves one call at a time; cancel() may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/engine/memory-budget.h"
#include "core/kvstore/kv-store.h"
#include "core/model/model.h"
#include "core/prompt/rag-prompt.h"
#include "retrieval/corpus.h"
#include "runtime/rag-session.h"
#include "runtime/request-gate.h"

namespace cacheblend {

struct rag_runtime_params {
    std::string model_path;     // empty: default_model_path()
    std::string embedder_path;  // empty: default_embedder_path(), and BM25 only when it is missing
    bool no_embedder = false;   // BM25 only
    std::string data_dir;       // empty: default_data_dir()
    uint64_t kv_budget_bytes = 0;  // 0: the store's default (8 GiB)
    int32_t n_threads = 0;      // 0: default_thread_count()
    std::string device;         // sessions' backend device ("cpu" when empty, "cuda:0")
    // Read-only front ends (search, listing): fail with status::io when data_dir holds no
    // catalog, instead of creating an empty data directory under a mistyped name.
    bool must_exist = false;
    // The shared chunk-KV tier: "redis://[user:password@]host:port/db" (core/kvstore/kv-remote.h);
    // empty: $CBL_KV_REMOTE, else none.
    std::string kv_remote;
    // Admission (runtime/request-gate.h): requests running at once (0: 4) and waiting for a
    // turn beyond them (0: 64, negative: none wait); one more is refused with status::busy.
    int32_t max_active_requests = 0;
    int32_t max_queued_requests = 0;
    // RAM for the sessions' working KV caches and engine scratch, all sessions together
    // (core/engine/memory-budget.h); 0: half of physical memory.
    uint64_t session_memory_bytes = 0;
};

constexpr int32_t k_default_max_active_requests = 4;
constexpr int32_t k_default_max_queued_requests = 64;

// Sizes of a data directory for operators (`cacheblend stats`).
struct data_dir_stats {
    int64_t documents = 0, chunks = 0, vectors = 0;
    uint64_t catalog_bytes = 0;  // catalog.db with its WAL
    uint64_t index_bytes = 0;    // vectors.faiss
    uint64_t kv_entries = 0, kv_bytes = 0;
    uint64_t kv_budget_bytes = 0;  // the store's budget (the default resolved)
    uint64_t disk_free_bytes = 0;  // available to this user on the data dir's file system
};

// ${XDG_DATA_HOME:-$HOME/.local/share}/cacheblend
std::string default_data_dir();

// The library's ask defaults: greedy decoding with llama.cpp's classic repeat penalty, 1.1 over
// the last 64 tokens. Greedy keeps an answer on the passages' most likely wording (sampling
// invents more), is reproducible, and lets blend and full modes be compared token for token; but
// greedy alone makes small models repeat a sentence until max_tokens, and the mild penalty
// breaks those loops while a window of 64 still lets an answer repeat names and numbers it
// quoted earlier. README, "Sampling", shows a loop it ends.
constexpr float k_ask_repeat_penalty = 1.1f;
constexpr int32_t k_ask_repeat_last_n = 64;

struct ask_params {
    search_params search;  // k defaults to 4 for answering
    generation_params gen;
    bool compare_full = false;  // also time the same prompt in full mode (first token only)
    ask_params() {
        search.k = 4;
        gen.sampling.repeat_penalty = k_ask_repeat_penalty;
        gen.sampling.repeat_last_n = k_ask_repeat_last_n;
    }
};

struct ask_result {
    generation_result gen;
    blend_stats blend;
    std::vector<search_hit> citations;  // the chunks in the prompt, best first
    int32_t chunks_dropped = 0;         // retrieved but left out to fit the context
    int64_t prompt_tokens = 0;
    search_mode searched = search_mode::hybrid;
    std::string notice;  // retriever notes and blend fallbacks, "; "-joined
    double search_ms = 0, store_ms = 0, full_ttft_ms = 0;
};

class rag_runtime {
public:
    // Throws cacheblend::error (io for an unusable directory, format/corrupt for a bad model).
    static std::shared_ptr<rag_runtime> open(const rag_runtime_params& p);
    ~rag_runtime();

    const std::shared_ptr<const model>& llm() const { return llm_; }
    const std::shared_ptr<kv_store>& kv() const { return kv_; }
    // The store requests and precompute use: kv() alone, or kv() then the shared tier
    // (core/kvstore/kv-tiered.h) when kv_remote is set. Removal, checks and stats use kv().
    const std::shared_ptr<kv_store>& blend_kv() const { return blend_kv_; }
    corpus& docs() { return *docs_; }
    int32_t n_threads() const { return n_threads_; }
    const std::string& device() const { return device_; }
    // The compute backend the runtime's sessions run on siblings of: its CPU thread pool (the
    // embedder's too), or its backend on the device (cuda:N), which holds the weights.
    std::shared_ptr<backend> shared_compute() const { return compute_; }
    // The model's weights on shared_compute(), uploaded by the first session that asks and
    // shared by all (one copy in GPU memory, however many sessions); null on the CPU, where
    // sessions read the model's mapping.
    std::shared_ptr<const backend_weights> shared_weights();
    const std::string& data_dir() const { return dir_; }
    // Every request of the runtime's sessions enters through this gate (the C ABI's session
    // calls hold a pass while they run).
    request_gate& requests() { return *gate_; }
    // The budget the runtime's sessions reserve their memory against (session_params.memory).
    const std::shared_ptr<memory_budget>& session_memory() const { return memory_; }
    // Why dense retrieval is off; empty when an embedder is loaded.
    const std::string& notice() const { return notice_; }

    // Ingest with optional eager KV precompute (chunks formatted as requests format them, so the
    // stored KV is what later requests find). Ingests stop with error(status::aborted) when
    // interrupt() is called while they run or p.progress returns false.
    ingest_report ingest_paths(const std::vector<std::string>& paths, ingest_params p,
                               bool precompute_kv);
    bool ingest_text(const std::string& uri, std::string_view text, doc_kind kind,
                     const std::string& metadata_json, ingest_params p, bool precompute_kv,
                     ingest_report* report);
    bool remove(const std::string& uri, ingest_report* report = nullptr);
    // corpus::repair, computing missing KV when precompute_kv (p: progress only).
    repair_report repair(ingest_params p, bool precompute_kv);
    search_result search(const std::string& query, const search_params& p) const;
    // The documents a search with this filter may return, by uri (catalog::list_documents).
    std::vector<document_info> documents(const search_filter& f);
    data_dir_stats stats();
    void interrupt() { interrupt_epoch_.fetch_add(1); }

    // The request path (runtime/ask.cpp): retrieve from this corpus, assemble the prompt within
    // the session's context, let the session answer it, record each chunk's KV key in the
    // catalog. Throws error(status::aborted) when cancelled, status::invalid_arg when nothing
    // matches, status::range when even one chunk cannot fit.
    ask_result ask(rag_session& s, const std::string& question, const ask_params& p,
                   const token_callback& on_token);

private:
    rag_runtime() = default;
    ingest_params wrap(ingest_params p, bool precompute_kv);

    std::string dir_;
    std::shared_ptr<const model> llm_;
    std::shared_ptr<kv_store> kv_;
    std::shared_ptr<kv_store> blend_kv_;
    std::unique_ptr<corpus> docs_;
    std::string notice_;
    int32_t n_threads_ = 0;
    std::string device_;
    // The runtime's CPU backend and thread pool: the embedder runs on it (sessions have their own,
    // on device_, since requests run in parallel).
    std::shared_ptr<backend> host_;
    std::shared_ptr<backend> compute_;  // host_, or the device's backend
    std::mutex weights_mu_;
    std::shared_ptr<const backend_weights> weights_;  // on compute_, once a session asked
    uint64_t kv_budget_bytes_ = 0;
    std::unique_ptr<request_gate> gate_;
    std::shared_ptr<memory_budget> memory_;
    std::atomic<uint64_t> interrupt_epoch_{0};
};

}  // namespace cacheblend
