// Chunk keys: SHA-256 over (model fingerprint, KV format, preamble tokens, chunk tokens), so a
// chunk's KV is found again wherever its text appears, and never reused across models, formats
// or preambles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace cacheblend {

struct chunk_key {
    uint8_t bytes[32] = {};
    std::string hex() const;
    bool operator==(const chunk_key& o) const;
    bool operator!=(const chunk_key& o) const { return !(*this == o); }
};

// The key whose hex() is `hex` (64 lower-case hex digits); false for anything else.
bool parse_chunk_key(const std::string& hex, chunk_key* out);

chunk_key make_chunk_key(uint64_t model_fingerprint, uint32_t kv_format,
                         const std::vector<token_id>& preamble, const std::vector<token_id>& chunk);
// How many keys make_chunk_key has computed in this process: a request hashes each chunk once
// (tests hold the blend engine to it; the count costs one relaxed atomic add per key).
uint64_t chunk_keys_made();

// SHA-256 of a byte string (FIPS 180-4).
void sha256(const void* data, size_t n, uint8_t out[32]);

}  // namespace cacheblend
