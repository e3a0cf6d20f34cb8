#include "util/test-util.h"

#include <sys/stat.h>

namespace cbltest {

std::string default_model_path() {
    if (const char* m = std::getenv("CBL_MODEL"); m && *m) return m;
    std::string base;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
        base = x;
    } else if (const char* h = std::getenv("HOME"); h && *h) {
        base = std::string(h) + "/.cache";
    } else {
        base = "/tmp";
    }
    return base + "/cacheblend/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string shared_dir() {
    struct stat st {};
    std::string d = CBL_SHARED_DIR;
    if (::stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return d;
    return "";
}

}  // namespace cbltest
