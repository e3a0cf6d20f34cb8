// C API hardening without a model (issue 17, cases 5 and 6): error messages name the exported
// function (not the lambda the guard runs, "operator()"), and a struct_size above
// CBL_MAX_STRUCT_SIZE is refused before the library reads past the caller's struct.
#include <gtest/gtest.h>
#include <dirent.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "cacheblend.h"
#include "cacheblend_experimental.h"

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

TEST(CapiLimits, ErrorMessagesNameTheCFunction) {
    ASSERT_EQ(cbl_model_load("/nonexistent/model.gguf", nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_TRUE(starts_with(cbl_last_error(), "cbl_model_load: ")) << cbl_last_error();

    cbl_results* res = nullptr;
    ASSERT_EQ(cbl_runtime_search(nullptr, "q", nullptr, &res), CBL_INVALID_ARG);
    EXPECT_TRUE(starts_with(cbl_last_error(), "cbl_runtime_search: ")) << cbl_last_error();

    cbl_answer* a = nullptr;
    ASSERT_EQ(cbl_session_ask(nullptr, "q", nullptr, &a), CBL_INVALID_ARG);
    EXPECT_TRUE(starts_with(cbl_last_error(), "cbl_session_ask: ")) << cbl_last_error();

    ASSERT_EQ(cbl_runtime_ingest_path(nullptr, "/tmp", nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_TRUE(starts_with(cbl_last_error(), "cbl_runtime_ingest_path: ")) << cbl_last_error();

    char* report = nullptr;
    ASSERT_EQ(cbl_runtime_repair(nullptr, nullptr, &report), CBL_INVALID_ARG);
    EXPECT_TRUE(starts_with(cbl_last_error(), "cbl_runtime_repair: ")) << cbl_last_error();

    ASSERT_EQ(cbl_x_model_registry_get(0, nullptr), CBL_INVALID_ARG);
    EXPECT_TRUE(starts_with(cbl_last_error(), "cbl_x_model_registry_get: ")) << cbl_last_error();
    EXPECT_EQ(std::string(cbl_last_error()).find("operator()"), std::string::npos);
}

// Every exported body runs in a lambda (CBL_API_GUARD), where __func__ is "operator()": the
// bodies must use cbl_fn. Only guard.h may spell __func__ (it captures the real name).
TEST(CapiLimits, NoEntryPointNamesItselfWithFunc) {
    const std::string src = std::string(CBL_TEST_DATA_DIR) + "/../../capi/src";
    DIR* d = ::opendir(src.c_str());
    ASSERT_NE(d, nullptr) << src;
    int files = 0;
    while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name == "guard.h" || name[0] == '.') continue;
        std::ifstream f(src + "/" + name);
        const std::string text((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
        EXPECT_EQ(text.find("__func__"), std::string::npos) << name << " uses __func__";
        ++files;
    }
    ::closedir(d);
    EXPECT_GT(files, 5);
}

TEST(CapiLimits, HugeParamsStructSizeIsInvalidArg) {
    // A real params struct whose struct_size claims far more than the caller owns: before the
    // limit, the library scanned "its" trailing bytes (past the end of this object: ASan reports
    // a heap-buffer-overflow) and answered CBL_UNSUPPORTED or worse.
    auto p = std::make_unique<cbl_model_params>();
    cbl_model_params_init(p.get());
    p->struct_size = size_t{1} << 30;
    cbl_model* m = nullptr;
    EXPECT_EQ(cbl_model_load("/nonexistent/model.gguf", p.get(), &m), CBL_INVALID_ARG);
    EXPECT_NE(std::string(cbl_last_error()).find("CBL_MAX_STRUCT_SIZE"), std::string::npos)
        << cbl_last_error();
    EXPECT_EQ(m, nullptr);

    // Exactly the maximum is accepted (zero trailing bytes: it goes on to the missing file).
    struct padded {
        cbl_model_params p;
        unsigned char future[CBL_MAX_STRUCT_SIZE - sizeof(cbl_model_params)];
    };
    auto big = std::make_unique<padded>();
    std::memset(big.get(), 0, sizeof(padded));
    cbl_model_params_init(&big->p);
    big->p.struct_size = CBL_MAX_STRUCT_SIZE;
    EXPECT_NE(cbl_model_load("/nonexistent/model.gguf", &big->p, &m), CBL_INVALID_ARG);
    big->p.struct_size = CBL_MAX_STRUCT_SIZE + 1;
    EXPECT_EQ(cbl_model_load("/nonexistent/model.gguf", &big->p, &m), CBL_INVALID_ARG);
}

TEST(CapiLimits, HugeOutputStructSizeIsInvalidArg) {
    // An output struct: the library would write past the caller's struct.
    auto out = std::make_unique<cbl_x_registry_model>();
    cbl_x_registry_model_init(out.get());
    ASSERT_GT(cbl_x_model_registry_count(), 0u);
    ASSERT_EQ(cbl_x_model_registry_get(0, out.get()), CBL_OK) << cbl_last_error();
    out->struct_size = CBL_MAX_STRUCT_SIZE + 1;
    EXPECT_EQ(cbl_x_model_registry_get(0, out.get()), CBL_INVALID_ARG);
    EXPECT_NE(std::string(cbl_last_error()).find("CBL_MAX_STRUCT_SIZE"), std::string::npos);
}
