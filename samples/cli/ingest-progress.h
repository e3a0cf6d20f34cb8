// What `cacheblend ingest` shows while it works (issue: a bar only on a terminal, shown as N/100,
// with no file, rate or ETA). The library reports phases (cacheblend.h, cbl_progress): "ingest"
// counts files, "kv" counts chunks to precompute, "chunk"/"embed" move inside one big file. Each
// counting phase gets its own bar (its own clock, so the ETA is that phase's), labelled with the
// current file and the rate. On a terminal the bar redraws in place; when stderr is a file or a
// pipe, one plain line every few seconds and one when a phase ends, e.g.
//   ingest: file 12/340, 3.1 files/s (docs/manual.md), elapsed 4s, ETA 1m45s
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "cacheblend.h"
#include "progress-bar.h"

namespace cacheblend::cli {

class ingest_progress {
public:
    // terminal_bar=false (--json) keeps the terminal quiet; redirected lines are printed anyway,
    // as eval does, since they never mix with stdout.
    explicit ingest_progress(bool terminal_bar) : terminal_bar_(terminal_bar) {}

    void on(const cbl_progress& p);  // phases other than skip/notice/wait
    void finish();

    // Seconds between plain lines when stderr is redirected.
    static constexpr double k_line_seconds = 5.0;

private:
    void start_phase(const std::string& phase, int64_t total);

    bool terminal_bar_;
    std::string phase_;  // the counting phase shown: "ingest" or "kv"
    std::unique_ptr<progress_bar> bar_;
    std::chrono::steady_clock::time_point phase_start_{}, last_line_{};
    int64_t total_ = 0;
};

}  // namespace cacheblend::cli
