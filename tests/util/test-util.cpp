#include "util/test-util.h"

#include "core/model.h"

#include <sys/stat.h>

namespace cbltest {

std::string default_model_path() { return cacheblend::default_model_path(); }

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
