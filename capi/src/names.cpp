// cbl_enum_name / cbl_enum_parse: the C constants' names, read from the core's own name functions
// (blend_mode_name, search_mode_name, kv_format_name, doc_kind_name, generation_stop_name) through
// the same value mappings the C boundary uses, so a name can never disagree with what a call does.
#include <string>
#include <vector>

#include "capi/src/convert.h"
#include "capi/src/guard.h"
#include "capi/src/params.h"
#include "capi/src/select-code.h"
#include "core/kvstore/kv-store.h"

namespace cacheblend::capi {
namespace {

struct named {
    int32_t value;
    const char* name;
};

int32_t kv_code(kv_format f) {
    switch (f) {
        case kv_format::f16: return CBL_KV_F16;
        case kv_format::q8: return CBL_KV_Q8;
        case kv_format::exact: return CBL_KV_EXACT;
    }
    return -1;
}

// Every named constant of a kind (DEFAULT not among them), or empty for an unknown kind.
std::vector<named> names_of(int32_t kind) {
    std::vector<named> out;
    switch (kind) {
        case CBL_NAMES_MODE:
            for (blend_mode m :
                 {blend_mode::full, blend_mode::prefix, blend_mode::reuse, blend_mode::blend}) {
                out.push_back({mode_code(m), blend_mode_name(m)});
            }
            break;
        case CBL_NAMES_SEARCH:
            for (search_mode m : {search_mode::hybrid, search_mode::dense, search_mode::bm25}) {
                out.push_back({search_code(m), search_mode_name(m)});
            }
            break;
        case CBL_NAMES_KV_FORMAT:
            for (kv_format f : {kv_format::f16, kv_format::q8, kv_format::exact}) {
                out.push_back({kv_code(f), kv_format_name(f)});
            }
            break;
        case CBL_NAMES_DOC:
            for (int32_t d : {CBL_DOC_TEXT, CBL_DOC_MARKDOWN, CBL_DOC_HTML}) {
                out.push_back({d, doc_kind_name(to_doc_kind("cbl_enum_name", d))});
            }
            break;
        case CBL_NAMES_STOP:
            for (generation_stop r :
                 {generation_stop::none, generation_stop::eog, generation_stop::length,
                  generation_stop::context, generation_stop::callback}) {
                out.push_back({stop_code(r), generation_stop_name(r)});
            }
            break;
        case CBL_X_NAMES_SELECT:
            for (select_policy p : select_policies()) {
                out.push_back({select_code(p), select_policy_name(p)});
            }
            break;
        default: break;
    }
    return out;
}

// What a kind's 0 stands for (every kind's 0 is "library default", except CBL_STOP_NONE).
int32_t default_of(int32_t kind) {
    switch (kind) {
        case CBL_NAMES_MODE: return CBL_MODE_BLEND;
        case CBL_NAMES_SEARCH: return CBL_SEARCH_HYBRID;
        case CBL_NAMES_KV_FORMAT: return CBL_KV_F16;
        case CBL_NAMES_DOC: return CBL_DOC_TEXT;
        case CBL_X_NAMES_SELECT: return CBL_X_SELECT_HKVD;
        default: return 0;
    }
}

}  // namespace
}  // namespace cacheblend::capi

extern "C" {

const char* cbl_enum_name(int32_t kind, int32_t value) {
    try {
        if (value == 0) value = cacheblend::capi::default_of(kind);
        for (const auto& n : cacheblend::capi::names_of(kind)) {
            if (n.value == value) return n.name;
        }
    } catch (...) {
        // Only out of memory can get here: no name then.
    }
    return nullptr;
}

cbl_status cbl_enum_parse(int32_t kind, const char* name, int32_t* out_value) {
    return CBL_API_GUARD({
        using cacheblend::capi::invalid;
        if (!name || !out_value) return invalid(cbl_fn, "name and out_value are required");
        const auto names = cacheblend::capi::names_of(kind);
        if (names.empty()) return invalid(cbl_fn, cacheblend::fmt("unknown kind %d", kind));
        std::string valid;
        for (const auto& n : names) {
            if (std::string(name) == n.name) {
                *out_value = n.value;
                return CBL_OK;
            }
            valid += valid.empty() ? "" : ", ";
            valid += n.name;
        }
        return invalid(cbl_fn, "unknown name '" + std::string(name) + "' (valid: " + valid + ")");
    });
}

}  // extern "C"
