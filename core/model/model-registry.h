// The named models of core/model/model-registry.tsv, compiled in at configure time
// (cmake/model-registry.cmake), and how a model argument becomes a file, so that a name such as
// "qwen2.5-coder-1.5b" works wherever a GGUF path does. scripts/fetch-model.sh NAME puts a named
// model's file in model_cache_dir(); the library only looks there, it never downloads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cacheblend {

struct registry_model {
    const char* name;         // "qwen2.5-coder-1.5b"
    const char* file;         // the file's name in model_cache_dir()
    uint64_t bytes;           // the file's size
    const char* sha256;       // the file's sha256, lowercase hex
    const char* licence;      // SPDX-style, as the registry states it
    const char* description;  // one line
};

// The product's default model: what an empty model path means when CBL_MODEL is not set.
inline constexpr const char* k_default_model_name = "qwen2.5-coder-1.5b";
// What missing-model messages tell users to run: scripts/fetch-model.sh under the name
// `cmake --install` gives it in bin/, so a user of an installed library has it.
inline constexpr const char* k_fetch_model_command = "cacheblend-fetch-model";

// The registry in the TSV's order; *n gets the count. The entries live as long as the process.
const registry_model* model_registry(size_t* n);
// The entry called name, or nullptr.
const registry_model* find_registry_model(std::string_view name);
// "smollm2-135m, qwen2.5-coder-0.5b, ..." for messages.
std::string registry_model_names();

// ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models: where cacheblend-fetch-model
// (scripts/fetch-model.sh) caches files.
std::string model_cache_dir();

// What a model argument names.
struct model_ref {
    std::string arg;                        // the argument after defaulting: CBL_MODEL or a name
    std::string path;                       // the file to open
    const registry_model* named = nullptr;  // set when arg is a registry name (path in the cache)
    bool is_default = false;                // the caller passed no model
    bool from_env = false;                  // ... and CBL_MODEL chose it
};

// An empty arg means $CBL_MODEL when set, else k_default_model_name. Then an existing regular file
// wins; otherwise a registry name means its file in model_cache_dir(); anything else is a path.
// Never throws for a missing file: loaders check and explain (load_model_or_default).
model_ref resolve_model(const std::string& arg);

// The error for a model file that does not exist: names the fetch command and the cache folder
// for a registry name, and lists the names when a bare word matched neither a file nor a name.
std::string missing_model_message(const model_ref& ref);

}  // namespace cacheblend
