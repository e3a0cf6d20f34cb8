// Conversions between the C ABI's values and the C++ core's: enums, params with their defaults and
// range checks, stats and hits. Invalid values become cacheblend::error(status::invalid_arg)
// naming the C function and field.
#pragma once

#include <string>

#include "cacheblend.h"
#include "core/blend/blend.h"
#include "core/engine/session.h"
#include "retrieval/extract/extract.h"
#include "retrieval/hybrid-search.h"
#include "runtime/rag-runtime.h"

namespace cacheblend::capi {

// NULL, "" and "cpu" are the CPU; a CUDA name is CBL_UNSUPPORTED in a build without CUDA.
std::string check_device(const char* fn, const char* device);

search_mode to_search_mode(const char* fn, int32_t mode);
doc_kind to_doc_kind(const char* fn, int32_t format);
void to_core(const char* fn, const cbl_session_params& in, const model& m, int32_t runtime_threads,
             session_params* sp, blend_params* bp);
// The blending part of cbl_session_params alone (mode, recompute_ratio, auto_ratio, kv_format).
void to_core_blend(const char* fn, const cbl_session_params& in, blend_params* bp);
// The generation fields cbl_generate_params and cbl_ask_params share.
struct c_generation {
    int32_t max_tokens;
    float temperature;
    uint64_t seed;
    int32_t top_k;
    float top_p, min_p;
    float repeat_penalty;
    int32_t repeat_last_n;
    float frequency_penalty, presence_penalty;
};
template <typename P>
c_generation generation_of(const P& p) {
    return {p.max_tokens,     p.temperature,   p.seed,
            p.top_k,          p.top_p,         p.min_p,
            p.repeat_penalty, p.repeat_last_n, p.frequency_penalty,
            p.presence_penalty};
}
// Onto *g, whose values are the call's defaults (generate's and ask's differ): a 0 field keeps
// its default, the documented "off" values turn a filter off, anything out of range throws
// naming fn and the field.
void apply_generation(const char* fn, const c_generation& c, generation_params* g);
// collection, uri prefix and metadata pairs of cbl_search_params / cbl_ask_params.
search_filter to_filter(const char* fn, const char* collection, const char* uri_prefix,
                        const char* const* keys, const char* const* values, size_t n);

int32_t mode_code(blend_mode m);
int32_t search_code(search_mode m);
int32_t stop_code(generation_stop r);

// Stats of a request; notice must outlive the returned struct's use.
cbl_stats to_stats(const blend_stats& b, const generation_result* g, const std::string& notice);
cbl_hit to_hit(const search_hit& h);

// The token callback as the core's (nullptr when fn is NULL).
token_callback to_token_callback(cbl_token_fn fn, void* user);

}  // namespace cacheblend::capi
