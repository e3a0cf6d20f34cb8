// Token-aware chunking (docs/ARCHITECTURE.md, 'Retrieval'): a chunk is the unit of everything (one
// catalog row, one vector, one KV file), so it is measured in the LLM's own tokens. Text is cut
// into sentences (and lines), packed greedily up to max_tokens, and cut preferably at a paragraph
// break once the chunk holds at least half its budget. A sentence longer than the budget is split
// between words (between characters when it has no spaces). Chunks never overlap and never split a
// UTF-8 character; whitespace between chunks belongs to none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace cacheblend {

// Text -> token ids, the way chunks are tokenized for the KV store (no BOS/EOS, special-token
// text as plain text). Must be thread-safe if the chunker is used from several threads.
using encode_fn = std::function<std::vector<token_id>(std::string_view)>;

// The model tokenizer as an encode_fn (the tokenizer must outlive it).
encode_fn tokenizer_encoder(const tokenizer& vocab);

struct chunker_params {
    int32_t max_tokens = 512;  // budget per chunk, at least 8
    // Cut at a paragraph break when the chunk is at least this share of max_tokens.
    float paragraph_min_share = 0.5f;
};

struct text_chunk {
    size_t begin = 0;  // byte range in the input text, without leading/trailing whitespace
    size_t end = 0;
    std::vector<token_id> tokens;  // encode(text[begin, end)), size <= max_tokens
};

// Called now and then with the bytes of the text chunked so far (monotonic, ends at the size):
// progress reports and time limits on big documents. It may throw to stop the chunking.
using chunk_progress_fn = std::function<void(size_t done, size_t total)>;

// Throws cacheblend::error(status::invalid_arg) for max_tokens < 8. Linear in the text's size:
// no call to encode sees more than max_tokens * 64 bytes except the final chunk encodings.
std::vector<text_chunk> chunk_text(std::string_view text, const encode_fn& encode,
                                   const chunker_params& p = {},
                                   const chunk_progress_fn& progress = {});

// As chunk_text, with hard cuts: no chunk spans a cut (cuts: ascending text offsets, e.g. where
// each page of a PDF starts), so every chunk lies within one segment. Ranges are in `text`.
std::vector<text_chunk> chunk_text_within(std::string_view text, const std::vector<size_t>& cuts,
                                          const encode_fn& encode, const chunker_params& p = {},
                                          const chunk_progress_fn& progress = {});

}  // namespace cacheblend
