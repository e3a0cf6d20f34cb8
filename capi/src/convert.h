// Conversions between the C ABI's values and the C++ core's: enums, params with their defaults and
// range checks, stats and hits. Invalid values become cacheblend::error(status::invalid_arg)
// naming the C function and field.
#pragma once

#include <string>

#include "cacheblend.h"
#include "core/blend.h"
#include "core/session.h"
#include "retrieval/hybrid-search.h"
#include "retrieval/rag-runtime.h"
#include "retrieval/text-extract.h"

namespace cacheblend::capi {

// NULL, "" and "cpu" are the CPU; a CUDA name is CBL_UNSUPPORTED in a build without CUDA.
void check_device(const char* fn, const char* device);

search_mode to_search_mode(const char* fn, int32_t mode);
doc_kind to_doc_kind(const char* fn, int32_t format);
void to_core(const char* fn, const cbl_session_params& in, const model& m, int32_t runtime_threads,
             session_params* sp, blend_params* bp);
// The blending part of cbl_session_params alone (mode, recompute_ratio, auto_ratio, kv_format).
void to_core_blend(const char* fn, const cbl_session_params& in, blend_params* bp);
// Sampling fields shared by ask and generate.
generation_params to_generation(const char* fn, int32_t max_tokens, float temperature,
                                uint64_t seed);
// top_k / top_p / min_p of cbl_generate_params: 0 keeps the default, the documented "off" values
// turn the filter off.
void apply_sampling(const char* fn, int32_t top_k, float top_p, float min_p, sampler_params* s);
// collection, uri prefix and metadata pairs of cbl_search_params / cbl_ask_params.
search_filter to_filter(const char* fn, const char* collection, const char* uri_prefix,
                        const char* const* keys, const char* const* values, size_t n);

int32_t mode_code(const std::string& blend_mode_name);
int32_t search_code(search_mode m);
int32_t stop_code(const std::string& stop_reason);

// Stats of a request; notice must outlive the returned struct's use.
cbl_stats to_stats(const blend_stats& b, const generation_result* g, const std::string& notice);
cbl_hit to_hit(const search_hit& h);

// The token callback as the core's (nullptr when fn is NULL).
token_callback to_token_callback(cbl_token_fn fn, void* user);

}  // namespace cacheblend::capi
