// Ranking helpers the selection policies share (core/blend/selection.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/blend/selection.h"

namespace cacheblend {

// Appends to *out up to n candidates not yet taken, highest score first (ties: the lower index),
// and marks them taken.
void take_top_scored(const std::vector<float>& score, int64_t n, std::vector<uint8_t>* taken,
                     std::vector<int64_t>* out);

// Appends to *out up to n candidates not yet taken, sinks first: every chunk's first candidate
// (chunk order), then every chunk's second, and so on, at most per_chunk of each chunk
// (-1: no cap). So a budget spreads evenly over the chunks, the remainder going to the earlier
// chunks, and a chunk with fewer candidates than its share leaves the rest to the others.
void take_sinks(const selection_input& in, int64_t n, int64_t per_chunk,
                std::vector<uint8_t>* taken, std::vector<int64_t>* out);

}  // namespace cacheblend
