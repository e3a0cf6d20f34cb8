#include "core/model/model-registry.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/util/xdg-dirs.h"

namespace cacheblend {
namespace {

const registry_model k_models[] = {
#include "core/model/model-registry.inc"  // generated from core/model/model-registry.tsv
};

bool is_regular_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

const registry_model* model_registry(size_t* n) {
    if (n) *n = sizeof(k_models) / sizeof(k_models[0]);
    return k_models;
}

const registry_model* find_registry_model(std::string_view name) {
    for (const registry_model& m : k_models) {
        if (name == m.name) return &m;
    }
    return nullptr;
}

std::string registry_model_names() {
    std::string s;
    for (const registry_model& m : k_models) {
        if (!s.empty()) s += ", ";
        s += m.name;
    }
    return s;
}

std::string model_cache_dir() { return xdg_cache_dir() + "/models"; }

model_ref resolve_model(const std::string& arg) {
    model_ref r;
    r.arg = arg;
    if (arg.empty()) {
        r.is_default = true;
        if (const char* m = std::getenv("CBL_MODEL"); m && *m) {
            r.arg = m;
            r.from_env = true;
        } else {
            r.arg = k_default_model_name;
        }
    }
    // A file wins, so a model that happens to share a registry name in the working directory is
    // still loadable; a directory does not, so a checkout called like a model cannot hide it.
    if (!is_regular_file(r.arg)) r.named = find_registry_model(r.arg);
    r.path = r.named ? model_cache_dir() + "/" + r.named->file : r.arg;
    return r;
}

std::string missing_model_message(const model_ref& ref) {
    if (ref.named) {
        std::string s = "model '" + ref.arg + "' is not downloaded: " + ref.path +
                        " not found (fetch it into " + model_cache_dir() + " with " +
                        k_fetch_model_command + " " + ref.arg + ")";
        if (ref.is_default && !ref.from_env) {
            s += "; it is the default model: pass another model's path or name, or set CBL_MODEL";
        }
        return s;
    }
    std::string s = "model file not found: " + ref.path;
    if (ref.from_env) s += " (from CBL_MODEL)";
    // A bare word was probably meant as a name: say which names exist.
    if (ref.arg.find('/') == std::string::npos) {
        s += "; it is not a model name either (names: " + registry_model_names() + ")";
    }
    return s;
}

}  // namespace cacheblend
