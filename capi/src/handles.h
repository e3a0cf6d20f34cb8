// What the opaque C handles hold. Each wraps shared ownership of its C++ object, so freeing a
// handle drops only the caller's reference (children keep their parents alive:
// docs/ARCHITECTURE.md, 'Threading and ownership').
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cacheblend.h"
#include "core/kvstore/kv-store.h"
#include "core/model/model.h"
#include "retrieval/hybrid-search.h"
#include "runtime/rag-runtime.h"

struct cbl_model {
    std::shared_ptr<const cacheblend::model> m;
};

struct cbl_runtime {
    std::shared_ptr<cacheblend::rag_runtime> rt;
};

struct cbl_kvstore {
    std::shared_ptr<cacheblend::kv_store> kv;
};

struct cbl_results {
    std::vector<cacheblend::search_hit> hits;
    std::string notice;
    int32_t mode = 0;  // CBL_SEARCH_* that ran
};

struct cbl_documents {
    std::vector<cacheblend::document_info> docs;
};

struct cbl_answer {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<std::pair<int32_t, float>> top_logprobs;
    std::vector<cacheblend::search_hit> citations;
    cbl_stats stats{};
    std::string notice;  // stats.notice points here
};

struct cbl_session {
    std::shared_ptr<cacheblend::rag_runtime> rt;  // null for cbl_session_create_with
    std::unique_ptr<cacheblend::rag_session> s;
    // k_busy: a call runs (a second one is CBL_MISUSE); k_freed: cbl_session_free came during
    // that call, which deletes the handle when it returns (capi/src/busy.h).
    static constexpr uint32_t k_busy = 1, k_freed = 2;
    std::atomic<uint32_t> state{0};
    std::string notice;             // of the last prefill_chunks (its stats.notice)
    cacheblend::blend_stats last;   // of the last prefill: the stats of the answer after it
    double queue_ms = 0;            // the running call's wait for a turn (capi/src/admission.h)
};
