#include "util/test-util.h"

#include "core/model/model.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

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

std::string make_temp_dir(const char* prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    const char* d = ::mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr) << "mkdtemp " << tmpl;
    return d ? d : "/tmp";
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                                std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

}  // namespace cbltest
