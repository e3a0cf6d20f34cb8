// Shared set-up of the retrieval subcommands (ingest, search, ask): a data directory opened as a
// corpus with the model's tokenizer, the default embedder when its file exists (else BM25 only,
// with a notice), the KV store under DIR/kv, and the document filter flags.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "core/kv-store.h"
#include "core/model.h"
#include "retrieval/ingest.h"

namespace cacheblend::cli {

struct cli_corpus {
    std::shared_ptr<const model> vocab;  // vocabulary-only model (tokenizer)
    std::shared_ptr<kv_store> kv;
    std::unique_ptr<corpus> docs;
    std::string embedder_notice;  // non-empty when running without an embedder
};

// The document filter of the retrieval subcommands (search, ask): --collection C, --uri-prefix P
// and --filter KEY=VALUE (repeatable; every one must match).
std::vector<flag_spec> filter_flags();
// The filter those flags describe; bad usage throws usage_error naming `cmd`.
search_filter parse_filter_flags(const parsed_args& a, const std::string& cmd);

// Opens --data (required) for `cmd`.
cli_corpus open_cli_corpus(const parsed_args& a, const std::string& cmd);

}  // namespace cacheblend::cli
