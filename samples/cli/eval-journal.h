// Resumable evaluations (`cacheblend eval --resume FILE`): a musique run of a 1.5B model on two
// CPU threads takes hours, longer than a machine or an operator may stay. The journal keeps each
// finished record as it completes, and a later run with the same settings reads them back and
// runs only the rest, so the summary covers every record as if one run had made it.
//
// The file is JSON lines: the first holds the settings that shape per-record results (model file,
// runs, decoding, KV format, tuning flags, threads), each following line one record with every
// run's answer, tokens, metrics and stats. A run whose settings differ is refused (mixing them
// would average different experiments); a record whose question no longer matches the dataset is
// refused too. A last line cut short by a kill is dropped and rewritten by the resumed run.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "eval-dataset.h"
#include "eval-run.h"

namespace cacheblend::cli {

class eval_journal {
public:
    // Opens or creates `path`. `settings` is one line of JSON (no newline) naming what the run's
    // results depend on. Throws usage_error when the file was made with other settings, and
    // capi_error (CBL_IO, CBL_FORMAT) when it cannot be read or written or is malformed.
    eval_journal(const std::string& path, const std::string& settings, size_t n_runs,
                 const std::vector<qa_record>& data);

    // The records earlier runs finished (any order; indices into the dataset).
    const std::vector<record_result>& finished() const { return finished_; }

    // Appends one finished record and flushes it to the file before returning.
    void append(const record_result& rec, const qa_record& q);

    const std::string& path() const { return path_; }

private:
    std::string path_;
    size_t n_runs_;
    std::vector<record_result> finished_;
};

}  // namespace cacheblend::cli
