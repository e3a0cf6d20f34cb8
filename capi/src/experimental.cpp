// Experimental C API (cacheblend_experimental.h): blending knobs, prompt layouts, first-token
// logits and calibration records, for the CLI's `blend` and `eval` and for research tools (the
// metrics themselves are in the evaluation library, eval/).
#include "cacheblend_experimental.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capi/src/admission.h"
#include "capi/src/busy.h"
#include "capi/src/convert.h"
#include "capi/src/guard.h"
#include "capi/src/handles.h"
#include "capi/src/params.h"
#include "capi/src/select-code.h"
#include "core/blend/calibration.h"
#include "core/model/model.h"
#include "core/prompt/rag-prompt.h"
#include "core/util/error.h"
#include "core/util/text.h"

using cacheblend::is_blank;
using cacheblend::capi::busy_error;
using cacheblend::capi::busy_scope;
using cacheblend::capi::invalid;
using cacheblend::capi::read_params;
using cacheblend::capi::write_out;

namespace {

// The session's blend params with the caller's knobs applied; invalid values throw invalid_arg.
cacheblend::blend_params to_blend(const char* fn, const cbl_x_blend_params& p,
                                  const cacheblend::blend_params& current) {
    using cacheblend::fmt;
    cacheblend::blend_params bp = current;
    // The mode, ratio and format through the stable session params' conversion (same checks).
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.mode = p.mode;
    sp.auto_ratio = p.auto_ratio;
    sp.kv_format = p.kv_format;
    if (!cacheblend::ratio_in_range(p.recompute_ratio)) {
        throw cacheblend::error(cacheblend::status::invalid_arg,
                                std::string(fn) + ": recompute_ratio must be within [0, 1]");
    }
    cacheblend::capi::to_core_blend(fn, sp, &bp);
    bp.ratio = p.recompute_ratio;  // 0 is a ratio here, not "default"

    bp.check_layers = {1};
    bp.check_ratios.clear();
    if (p.n_check_layers > 0) {
        if (p.n_check_layers > 4096) {  // more than any model's layers: a wrong size, not a plan
            throw cacheblend::error(cacheblend::status::invalid_arg,
                                    std::string(fn) + ": n_check_layers is too large");
        }
        if (!p.check_layers) {
            throw cacheblend::error(cacheblend::status::invalid_arg,
                                    std::string(fn) + ": check_layers is NULL");
        }
        bp.check_layers.assign(p.check_layers, p.check_layers + p.n_check_layers);
    }
    if (p.check_ratios) {
        bp.check_ratios.assign(p.check_ratios, p.check_ratios + bp.check_layers.size());
    }
    bp.ratio_calibrated = p.calibrated_ratio;
    switch (p.deviation) {
        case CBL_X_DEVIATION_DEFAULT:
        case CBL_X_DEVIATION_V: bp.deviation = cacheblend::deviation_kind::v; break;
        case CBL_X_DEVIATION_K: bp.deviation = cacheblend::deviation_kind::k; break;
        case CBL_X_DEVIATION_KV: bp.deviation = cacheblend::deviation_kind::kv; break;
        case CBL_X_DEVIATION_RANDOM: bp.deviation = cacheblend::deviation_kind::random; break;
        default:
            throw cacheblend::error(cacheblend::status::invalid_arg,
                                    fmt("%s: unknown deviation %d", fn, p.deviation));
    }
    bp.select = cacheblend::capi::to_select(fn, p.select);
    return bp;
}

// The prompt's texts in its layout; NULL pointers and blank texts throw invalid_arg.
cacheblend::rag_prompt_text to_text(const char* fn, const cbl_x_prompt& p) {
    using cacheblend::fmt;
    const auto bad = [fn](const std::string& what) {
        return cacheblend::error(cacheblend::status::invalid_arg, std::string(fn) + ": " + what);
    };
    if (!p.question || is_blank(p.question)) throw bad("the question is empty");
    if (p.n_chunks == 0) throw bad("no chunks");
    if (!p.chunks) throw bad("chunks is NULL");
    std::vector<std::string> chunks;
    chunks.reserve(p.n_chunks);
    for (size_t i = 0; i < p.n_chunks; ++i) {
        if (!p.chunks[i]) throw bad(fmt("chunk %zu is NULL", i));
        chunks.emplace_back(p.chunks[i], p.lens ? p.lens[i] : std::strlen(p.chunks[i]));
        if (is_blank(chunks.back())) throw bad(fmt("chunk %zu has no text", i));
    }
    if (p.format != CBL_X_PROMPT_CUSTOM && (p.system || p.preamble)) {
        throw bad("system and preamble apply to CBL_X_PROMPT_CUSTOM only");
    }
    switch (p.format) {
        case CBL_X_PROMPT_CHUNKS: return cacheblend::default_rag_prompt(chunks, p.question);
        case CBL_X_PROMPT_CUSTOM: {
            cacheblend::rag_prompt_text t;
            t.system = p.system ? p.system : "";
            t.preamble = p.preamble ? p.preamble : "";
            t.chunks = std::move(chunks);
            t.question = p.question;
            return t;
        }
        default: throw bad(fmt("unknown prompt format %d", p.format));
    }
}

cacheblend::kv_format to_format(const char* fn, int32_t kv_format) {
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.kv_format = kv_format;
    cacheblend::blend_params bp;
    cacheblend::capi::to_core_blend(fn, sp, &bp);
    return bp.format;
}

cbl_status read_prompt(const char* fn, const cbl_x_prompt* in, cbl_x_prompt* out) {
    if (!in) return invalid(fn, "prompt is required");
    return read_params(fn, in, out, cbl_x_prompt_init);
}

cbl_status copy_out(const std::string& s, char** out) {
    *out = cacheblend::capi::malloc_copy(s);
    return CBL_OK;
}

}  // namespace

extern "C" {

cbl_status cbl_x_session_set_blend(cbl_session* session, const cbl_x_blend_params* params) {
    return CBL_API_GUARD({
        if (!session) return invalid(cbl_fn, "session is required");
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        cbl_x_blend_params p;
        if (cbl_status s = read_params(cbl_fn, params, &p, cbl_x_blend_params_init)) return s;
        session->s->set_params(to_blend(cbl_fn, p, session->s->params()));
        return CBL_OK;
    });
}

cbl_status cbl_x_prompt_tokens(const cbl_model* model, const cbl_x_prompt* prompt, size_t* out_n) {
    return CBL_API_GUARD({
        if (!model || !out_n) return invalid(cbl_fn, "model and out_n are required");
        cbl_x_prompt p;
        if (cbl_status s = read_prompt(cbl_fn, prompt, &p)) return s;
        const cacheblend::blend_request req =
            cacheblend::build_blend_request(*model->m, to_text(cbl_fn, p));
        *out_n = static_cast<size_t>(cacheblend::request_tokens(req));
        return CBL_OK;
    });
}

cbl_status cbl_x_session_prefill_prompt(cbl_session* session, const cbl_x_prompt* prompt,
                                        cbl_stats* out_stats) {
    return CBL_API_GUARD({
        if (!session) return invalid(cbl_fn, "session is required");
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        cbl_x_prompt p;
        if (cbl_status s = read_prompt(cbl_fn, prompt, &p)) return s;
        const cacheblend::blend_stats st = session->s->prefill_prompt(to_text(cbl_fn, p));
        session->notice = st.fallback_reason;
        session->last = st;
        if (!out_stats) return CBL_OK;
        cbl_stats out = cacheblend::capi::to_stats(st, nullptr, session->notice);
        out.n_ctx = session->s->n_ctx();
        out.queue_ms = session->queue_ms;
        return write_out(cbl_fn, out, out_stats);
    });
}

cbl_status cbl_x_session_precompute_prompt(cbl_session* session, const cbl_x_prompt* prompt,
                                           size_t* out_computed) {
    if (out_computed) *out_computed = 0;
    return CBL_API_GUARD({
        if (!session) return invalid(cbl_fn, "session is required");
        busy_scope busy(session);
        if (!busy.ok()) return busy_error(cbl_fn);
        const cacheblend::request_gate::pass turn = cacheblend::capi::admit(session);
        cbl_x_prompt p;
        if (cbl_status s = read_prompt(cbl_fn, prompt, &p)) return s;
        const int64_t n = session->s->precompute_prompt(to_text(cbl_fn, p));
        if (out_computed) *out_computed = static_cast<size_t>(n);
        return CBL_OK;
    });
}

const float* cbl_x_session_logits(const cbl_session* session, size_t* out_n) {
    const std::vector<float>* l = session ? &session->s->last_logits() : nullptr;
    if (out_n) *out_n = l ? l->size() : 0;
    return l && !l->empty() ? l->data() : nullptr;
}

cbl_status cbl_x_kvstore_set_calibration(cbl_kvstore* store, const cbl_model* model,
                                         int32_t kv_format, const cbl_x_calibration* c) {
    return CBL_API_GUARD({
        if (!store || !model || !c) return invalid(cbl_fn, "store, model and c are required");
        cbl_x_calibration in;
        if (cbl_status s = read_params(cbl_fn, c, &in, cbl_x_calibration_init)) return s;
        if (std::memchr(in.metric, '\0', sizeof(in.metric)) == nullptr) {
            return invalid(cbl_fn, "metric is not NUL-terminated");
        }
        cacheblend::calibration cal;
        cal.model_fingerprint = model->m->fingerprint();
        cal.format = to_format(cbl_fn, kv_format);
        cal.ratio = in.ratio;
        cal.met = in.met;
        cal.metric = in.metric;
        cal.target = in.target;
        cal.value = in.value;
        cal.records = in.records;
        cal.select = cacheblend::capi::to_select(cbl_fn, in.select);
        cacheblend::write_calibration(store->kv->dir(), cal);
        return CBL_OK;
    });
}

cbl_status cbl_x_kvstore_calibration(cbl_kvstore* store, const cbl_model* model, int32_t kv_format,
                                     cbl_x_calibration* out, bool* out_found) {
    if (out_found) *out_found = false;
    return CBL_API_GUARD({
        if (!store || !model || !out || !out_found) {
            return invalid(cbl_fn, "store, model, out and out_found are required");
        }
        const auto c = cacheblend::read_calibration(store->kv->dir(), model->m->fingerprint(),
                                                    to_format(cbl_fn, kv_format));
        if (!c) return CBL_OK;
        cbl_x_calibration r;
        cbl_x_calibration_init(&r);
        r.ratio = c->ratio;
        r.met = c->met;
        std::snprintf(r.metric, sizeof(r.metric), "%s", c->metric.c_str());
        r.target = c->target;
        r.value = c->value;
        r.records = c->records;
        r.select = cacheblend::capi::select_code(c->select);
        if (cbl_status s = write_out(cbl_fn, r, out)) return s;
        *out_found = true;
        return CBL_OK;
    });
}

cbl_status cbl_x_default_model_path(char** out) {
    if (out) *out = nullptr;
    return CBL_API_GUARD({
        if (!out) return invalid(cbl_fn, "out is required");
        return copy_out(cacheblend::default_model_path(), out);
    });
}

}  // extern "C"
