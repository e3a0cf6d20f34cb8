#include "capi/src/select-code.h"

#include "core/util/error.h"

namespace cacheblend::capi {

int32_t select_code(select_policy p) {
    switch (p) {
        case select_policy::hkvd: return CBL_X_SELECT_HKVD;
        case select_policy::sink: return CBL_X_SELECT_SINK;
        case select_policy::sink_hkvd: return CBL_X_SELECT_SINK_HKVD;
        case select_policy::query: return CBL_X_SELECT_QUERY;
        case select_policy::query_hkvd: return CBL_X_SELECT_QUERY_HKVD;
    }
    return CBL_X_SELECT_DEFAULT;
}

select_policy to_select(const char* fn, int32_t code) {
    if (code == CBL_X_SELECT_DEFAULT) return select_policy::hkvd;
    for (select_policy p : select_policies()) {
        if (select_code(p) == code) return p;
    }
    throw error(status::invalid_arg, fmt("%s: unknown selection policy %d (valid: %s)", fn, code,
                                         select_policy_names().c_str()));
}

}  // namespace cacheblend::capi
