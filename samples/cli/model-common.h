// Loading --model for the subcommands that drive the engine directly (generate, tokenize, bench,
// blend, eval, ingest); ask and search go through the C ABI instead.
#pragma once

#include <memory>

#include "args.h"
#include "core/model.h"

namespace cacheblend::cli {

// Loads --model, turning a missing file into a one-line error that says where the default lives.
std::shared_ptr<const model> load_model(const parsed_args& a, bool vocab_only);

}  // namespace cacheblend::cli
