// A runtime over a temporary data directory holding four one-sentence facts, for the C API's
// threading and admission tests (they differ in the runtime's knobs only).
#pragma once

#include <string>

#include "cacheblend.h"

namespace cbltest {

// Four short facts; "Where is Mount Kilimanjaro?" is answered by the second.
extern const char* const k_facts[4];

struct fact_runtime {
    std::string dir;            // removed by the destructor
    cbl_runtime* rt = nullptr;  // freed by the destructor
    fact_runtime() = default;
    ~fact_runtime();
    fact_runtime(const fact_runtime&) = delete;
    fact_runtime& operator=(const fact_runtime&) = delete;
};

// Opens a runtime on `model` with `rp`'s other fields (model_path and data_dir are set here) and
// ingests the facts. On failure it records a test failure and leaves out->rt NULL.
void open_fact_runtime(const std::string& model, cbl_runtime_params rp, fact_runtime* out);

}  // namespace cbltest
