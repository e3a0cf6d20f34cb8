// Experimental C API over core/model/model-registry.h: the named models, and the file a model
// argument (path, name or NULL) stands for, for `cacheblend models` and for tools that show where a
// model is expected before loading it; also the default KV store folder (core/util/xdg-dirs.h), so
// the CLI does not compute XDG paths itself.
#include <string>

#include "cacheblend_experimental.h"
#include "capi/src/guard.h"
#include "capi/src/params.h"
#include "core/model/model-registry.h"
#include "core/util/xdg-dirs.h"

using cacheblend::capi::invalid;
using cacheblend::capi::malloc_copy;

extern "C" {

size_t cbl_x_model_registry_count(void) {
    size_t n = 0;
    cacheblend::model_registry(&n);
    return n;
}

cbl_status cbl_x_model_registry_get(size_t index, cbl_x_registry_model* out) {
    return CBL_API_GUARD({
        if (!out) return invalid(cbl_fn, "out is required");
        size_t n = 0;
        const cacheblend::registry_model* models = cacheblend::model_registry(&n);
        if (index >= n) {
            return cacheblend::capi::set_error(
                CBL_RANGE, std::string(cbl_fn) + ": index " + std::to_string(index) +
                               " is past the last of " + std::to_string(n) + " models");
        }
        const cacheblend::registry_model& m = models[index];
        cbl_x_registry_model r;
        cbl_x_registry_model_init(&r);
        r.name = m.name;
        r.file = m.file;
        r.bytes = m.bytes;
        r.sha256 = m.sha256;
        r.licence = m.licence;
        r.description = m.description;
        r.is_default = std::string(m.name) == cacheblend::k_default_model_name;
        return cacheblend::capi::write_out(cbl_fn, r, out);
    });
}

cbl_status cbl_x_model_path(const char* name_or_path, char** out) {
    if (out) *out = nullptr;
    return CBL_API_GUARD({
        if (!out) return invalid(cbl_fn, "out is required");
        *out = malloc_copy(cacheblend::resolve_model(name_or_path ? name_or_path : "").path);
        return CBL_OK;
    });
}

cbl_status cbl_x_model_cache_dir(char** out) {
    if (out) *out = nullptr;
    return CBL_API_GUARD({
        if (!out) return invalid(cbl_fn, "out is required");
        *out = malloc_copy(cacheblend::model_cache_dir());
        return CBL_OK;
    });
}

cbl_status cbl_x_default_kv_store_dir(char** out) {
    if (out) *out = nullptr;
    return CBL_API_GUARD({
        if (!out) return invalid(cbl_fn, "out is required");
        *out = malloc_copy(cacheblend::xdg_cache_dir() + "/kv");
        return CBL_OK;
    });
}

}  // extern "C"
