// A GGUF model cut down or blown up to another number of layers and vocabulary size, keeping its
// architecture, metadata and weight types. GPU machines here cannot fetch models and take at most
// 64 MiB of files along (scripts/gpu-check.sh), so real models travel cut down (2 of their layers,
// the first 8192 tokens: real weights, real quant types, a few MB) and are blown back up there to
// their full shape for speed measurements (layers and vocabulary rows repeated cyclically).
//
// Layer i of the result is layer (i mod L) of the source (L its block_count); vocabulary row r
// (token_embd, output) is source row (r mod V). Tokens past the source's V are named
// "<|cbl_fill_R|>" (normal type); when the vocabulary shrinks, merges that name a removed token
// are dropped and special-token ids past the end are removed, so the tokenizer stays consistent.
#pragma once

#include <cstdint>
#include <string>

namespace cbltest {

struct gguf_reshape_params {
    int32_t n_layer = 0;  // 0: as the source
    int64_t n_vocab = 0;  // 0: as the source
};

// Reads `src`, writes `dst`. Throws cacheblend::error for an unreadable or unsupported source
// (no block_count, a tensor layout it does not know) and std::runtime_error when writing fails.
void reshape_gguf(const std::string& src, const std::string& dst, const gguf_reshape_params& p);

}  // namespace cbltest
