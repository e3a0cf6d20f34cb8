// Helpers shared by `cacheblend blend` and `cacheblend eval`: the KV store location, the blending
// flags and their parsing, and the stats object of DESIGN §8.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "core/blend.h"
#include "core/kv-store.h"
#include "json-writer.h"

namespace cacheblend::cli {

// ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/kv
std::string default_kv_store_dir();

flag_spec store_flag();
// --direct-io: read stored KV with O_DIRECT (bypasses the page cache: cold-read timings).
flag_spec direct_io_flag();
// --check-layers, --check-ratios, --deviation, --kv-format (shared by blend and eval).
std::vector<flag_spec> blend_tuning_flags();

// Fills check layers, check ratios, deviation and KV format from the flags above.
void apply_blend_tuning(const parsed_args& a, blend_params* p);

// Comma-separated numbers within [min, max], e.g. "0.3,0.15"; usage_error otherwise.
std::vector<double> parse_double_list(const std::string& flag, const std::string& text,
                                      double min, double max);

// Opens --store (or the default) for the engine; --direct-io when the command declares it.
std::shared_ptr<kv_store> open_store(const parsed_args& a);

// The `stats` object of `blend` / `ask` (DESIGN §8 names; extra fields after them).
void write_blend_stats(json_writer& w, const blend_stats& s, double ttft_ms,
                       double decode_tokens_per_s);

// The whole file as bytes; cacheblend::error(status::io) naming the path when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace cacheblend::cli
