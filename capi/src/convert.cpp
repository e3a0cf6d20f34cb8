#include "capi/src/convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/util/error.h"
#include "retrieval/catalog.h"

namespace cacheblend::capi {
namespace {

[[noreturn]] void bad(const char* fn, const std::string& what) {
    throw error(status::invalid_arg, std::string(fn) + ": " + what);
}

}  // namespace

std::string check_device(const char* fn, const char* device) {
    // The backend registry decides (core/engine/backend.h): a build without CUDA says so, a CUDA
    // build on a machine without a GPU says the device is missing. CBL_API_GUARD adds `fn`.
    (void)fn;
    return cacheblend::check_device(device ? device : "");
}

search_mode to_search_mode(const char* fn, int32_t mode) {
    switch (mode) {
        case CBL_SEARCH_DEFAULT:
        case CBL_SEARCH_HYBRID: return search_mode::hybrid;
        case CBL_SEARCH_DENSE: return search_mode::dense;
        case CBL_SEARCH_BM25: return search_mode::bm25;
        default: bad(fn, fmt("unknown search mode %d", mode));
    }
}

doc_kind to_doc_kind(const char* fn, int32_t format) {
    switch (format) {
        case CBL_DOC_DEFAULT:
        case CBL_DOC_TEXT: return doc_kind::text;
        case CBL_DOC_MARKDOWN: return doc_kind::markdown;
        case CBL_DOC_HTML: return doc_kind::html;
        default: bad(fn, fmt("unknown document format %d", format));
    }
}

void to_core(const char* fn, const cbl_session_params& in, const model& m, int32_t runtime_threads,
             session_params* sp, blend_params* bp) {
    const int32_t n_train = m.hparams().n_ctx_train;
    if (in.n_threads < 0 || in.n_threads > 1024) bad(fn, fmt("n_threads %d out of [0, 1024]", in.n_threads));
    if (in.n_ctx < 0 || in.n_ctx > n_train) {
        bad(fn, fmt("n_ctx %d out of [0, %d] (the model's training context)", in.n_ctx, n_train));
    }
    sp->n_threads = in.n_threads > 0 ? in.n_threads : runtime_threads;
    sp->n_ctx = in.n_ctx > 0 ? in.n_ctx : std::min(n_train, 8192);
    to_core_blend(fn, in, bp);
}

void to_core_blend(const char* fn, const cbl_session_params& in, blend_params* bp) {
    switch (in.mode) {
        case CBL_MODE_DEFAULT:
        case CBL_MODE_BLEND: bp->mode = blend_mode::blend; break;
        case CBL_MODE_FULL: bp->mode = blend_mode::full; break;
        case CBL_MODE_PREFIX: bp->mode = blend_mode::prefix; break;
        case CBL_MODE_REUSE: bp->mode = blend_mode::reuse; break;
        default: bad(fn, fmt("unknown mode %d", in.mode));
    }
    if (!ratio_in_range(in.recompute_ratio)) {
        bad(fn, fmt("recompute_ratio must be within [0, 1] (0 = default %g; use CBL_MODE_REUSE "
                    "for no recompute)",
                    static_cast<double>(k_default_recompute_ratio)));
    }
    if (in.recompute_ratio > 0.f) bp->ratio = in.recompute_ratio;
    bp->ratio_auto = in.auto_ratio;
    bp->ratio_calibrated = in.calibrated_ratio;
    switch (in.kv_format) {
        case CBL_KV_DEFAULT:
        case CBL_KV_F16: bp->format = kv_format::f16; break;
        case CBL_KV_Q8: bp->format = kv_format::q8; break;
        case CBL_KV_EXACT: bp->format = kv_format::exact; break;
        default: bad(fn, fmt("unknown kv_format %d", in.kv_format));
    }
}

void apply_generation(const char* fn, const c_generation& c, generation_params* g) {
    if (c.max_tokens < 0 || c.max_tokens > (1 << 24)) {
        bad(fn, fmt("max_tokens %d out of range", c.max_tokens));
    }
    if (std::isnan(c.temperature) || c.temperature < 0.f) bad(fn, "temperature must be >= 0");
    if (std::isnan(c.top_p) || std::isnan(c.min_p) || c.top_p < 0.f) {
        bad(fn, "top_p must be >= 0 and min_p a number");
    }
    if (!std::isfinite(c.repeat_penalty) || c.repeat_penalty < 0.f) {
        bad(fn, fmt("repeat_penalty %g must be a number >= 0 (0 = default, 1 = off)",
                    static_cast<double>(c.repeat_penalty)));
    }
    if (c.repeat_last_n < -1) {
        bad(fn, fmt("repeat_last_n %d must be >= -1 (-1 = the whole context, 0 = default)",
                    c.repeat_last_n));
    }
    if (!std::isfinite(c.frequency_penalty) || !std::isfinite(c.presence_penalty)) {
        bad(fn, "frequency_penalty and presence_penalty must be finite numbers");
    }
    if (c.max_tokens > 0) g->max_tokens = c.max_tokens;
    sampler_params& s = g->sampling;
    s.temperature = c.temperature;
    s.seed = c.seed;
    if (c.top_k != 0) s.top_k = c.top_k < 0 ? 0 : c.top_k;
    if (c.top_p > 0.f) s.top_p = c.top_p;
    if (c.min_p != 0.f) s.min_p = c.min_p < 0.f ? 0.f : c.min_p;
    if (c.repeat_penalty > 0.f) s.repeat_penalty = c.repeat_penalty;
    if (c.repeat_last_n != 0) s.repeat_last_n = c.repeat_last_n;
    if (c.frequency_penalty != 0.f) s.frequency_penalty = c.frequency_penalty;
    if (c.presence_penalty != 0.f) s.presence_penalty = c.presence_penalty;
}

search_filter to_filter(const char* fn, const char* collection, const char* uri_prefix,
                        const char* const* keys, const char* const* values, size_t n) {
    search_filter f;
    if (collection) f.collection = collection;
    if (uri_prefix) f.uri_prefix = uri_prefix;
    if (n > 0 && (!keys || !values)) bad(fn, "metadata_keys and metadata_values are required");
    for (size_t i = 0; i < n; ++i) {
        if (!keys[i] || !values[i]) bad(fn, fmt("metadata filter %zu: NULL key or value", i));
        if (!valid_metadata_key(keys[i])) {
            bad(fn, fmt("metadata key '%s' must be 1 to 128 of [A-Za-z0-9_.-]", keys[i]));
        }
        f.metadata.emplace_back(keys[i], values[i]);
    }
    return f;
}

int32_t mode_code(blend_mode m) {
    switch (m) {
        case blend_mode::full: return CBL_MODE_FULL;
        case blend_mode::prefix: return CBL_MODE_PREFIX;
        case blend_mode::reuse: return CBL_MODE_REUSE;
        case blend_mode::blend: return CBL_MODE_BLEND;
    }
    return CBL_MODE_DEFAULT;
}

int32_t search_code(search_mode m) {
    switch (m) {
        case search_mode::hybrid: return CBL_SEARCH_HYBRID;
        case search_mode::dense: return CBL_SEARCH_DENSE;
        case search_mode::bm25: return CBL_SEARCH_BM25;
    }
    return CBL_SEARCH_DEFAULT;
}

// cancelled has no CBL_STOP_*: a cancelled request fails with CBL_ABORTED instead.
int32_t stop_code(generation_stop r) {
    switch (r) {
        case generation_stop::eog: return CBL_STOP_EOG;
        case generation_stop::length: return CBL_STOP_LENGTH;
        case generation_stop::context: return CBL_STOP_CONTEXT;
        case generation_stop::callback: return CBL_STOP_CALLBACK;
        case generation_stop::none:
        case generation_stop::cancelled: return CBL_STOP_NONE;
    }
    return CBL_STOP_NONE;
}

cbl_stats to_stats(const blend_stats& b, const generation_result* g, const std::string& notice) {
    cbl_stats s;
    cbl_stats_init(&s);
    s.mode = mode_code(b.mode);
    s.ratio = b.ratio;
    s.prefill_ms = b.ttft_ms;
    s.ttft_ms = g ? g->stats.ttft_ms : b.ttft_ms;
    s.load_ms = b.load_ms;
    s.load_wait_ms = b.load_wait_ms;
    s.select_ms = b.select_ms;
    s.compute_ms = b.compute_ms;
    s.dense_ms = b.dense_ms;
    s.relocate_ms = b.relocate_ms;
    s.prompt_tokens = b.tokens_total;
    s.tokens_reused = b.tokens_reused;
    s.tokens_recomputed = b.tokens_recomputed;
    s.tokens_missed = b.tokens_missed;
    s.bytes_loaded = b.bytes_loaded;
    s.chunks_hit = b.chunks_hit;
    s.chunks_missed = b.chunks_missed;
    s.tokens_remote = b.tokens_remote;
    s.bytes_remote = b.bytes_remote;
    if (g) {
        s.decode_tokens_per_s = g->stats.decode_tokens_per_s;
        s.generated_tokens = g->stats.generated_tokens;
        s.stop_reason = stop_code(g->stop_reason);
    }
    s.notice = notice.c_str();
    return s;
}

cbl_hit to_hit(const search_hit& h) {
    cbl_hit o;
    cbl_hit_init(&o);
    o.chunk_id = h.chunk_id;
    o.uri = h.uri.c_str();
    o.start = h.start;
    o.end = h.end;
    o.score = h.score;
    o.text = h.text.c_str();
    o.text_len = h.text.size();
    o.n_tokens = h.n_tokens;
    o.page = h.page;
    o.heading = h.heading.c_str();
    return o;
}

token_callback to_token_callback(cbl_token_fn fn, void* user) {
    if (!fn) return nullptr;
    return [fn, user](token_id id, const std::string& piece) {
        return fn(piece.data(), piece.size(), id, user);
    };
}

}  // namespace cacheblend::capi
