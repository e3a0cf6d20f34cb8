#include "core/util/xdg-dirs.h"

#include <cstdlib>

namespace cacheblend {
namespace {

// $var when set and not empty, else $HOME/home_suffix, else /tmp; then "/cacheblend".
std::string base_dir(const char* var, const char* home_suffix) {
    if (const char* x = std::getenv(var); x && *x) return std::string(x) + "/cacheblend";
    if (const char* h = std::getenv("HOME"); h && *h) {
        return std::string(h) + home_suffix + "/cacheblend";
    }
    return "/tmp/cacheblend";
}

}  // namespace

std::string xdg_cache_dir() { return base_dir("XDG_CACHE_HOME", "/.cache"); }

std::string xdg_data_dir() { return base_dir("XDG_DATA_HOME", "/.local/share"); }

}  // namespace cacheblend
