// C ABI basics: versions, status strings, thread-local errors, params struct_size handling.
#include <cmath>
#include <thread>

#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "core/blend/blend.h"
#include "util/test-util.h"

TEST(CApi, Versions) {
    EXPECT_EQ(cbl_version_number(), CBL_VERSION_NUMBER);
    EXPECT_STREQ(cbl_version_string(), CBL_VERSION_STRING);
    EXPECT_NE(std::string(cbl_build_info()).find("cpu_isa="), std::string::npos);
}

// The default recompute ratio is written once in the library (core/blend/blend.h); the header's
// static-inline init repeats it for callers, and the CLI reads it from there.
TEST(CApi, HeaderDefaultRatioIsTheLibrarys) {
    cbl_x_blend_params p;
    cbl_x_blend_params_init(&p);
    EXPECT_EQ(p.recompute_ratio, cacheblend::k_default_recompute_ratio);
    EXPECT_TRUE(cacheblend::ratio_in_range(0.f));
    EXPECT_TRUE(cacheblend::ratio_in_range(1.f));
    EXPECT_FALSE(cacheblend::ratio_in_range(-0.01f));
    EXPECT_FALSE(cacheblend::ratio_in_range(1.01f));
    EXPECT_FALSE(cacheblend::ratio_in_range(std::nanf("")));
}

TEST(CApi, StatusStrings) {
    EXPECT_STREQ(cbl_status_str(CBL_OK), "ok");
    EXPECT_STREQ(cbl_status_str(CBL_IO_READ), "i/o error");  // primary code decides
    EXPECT_STREQ(cbl_status_str(9999), "unknown status");
}

TEST(CApi, MissingFileIsAnErrorWithMessage) {
    cbl_model* m = reinterpret_cast<cbl_model*>(0x1);
    EXPECT_EQ(cbl_model_load("/nonexistent/model.gguf", nullptr, &m) & 0xff, CBL_IO);
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(cbl_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(CApi, NullArguments) {
    EXPECT_EQ(cbl_model_load(nullptr, nullptr, nullptr), CBL_INVALID_ARG);
    size_t n = 0;
    EXPECT_EQ(cbl_tokenize(nullptr, "x", 1, false, false, nullptr, 0, &n), CBL_INVALID_ARG);
    cbl_model_free(nullptr);
    EXPECT_EQ(cbl_model_n_vocab(nullptr), 0);
}

TEST(CApi, ErrorsAreThreadLocal) {
    cbl_model* m = nullptr;
    ASSERT_NE(cbl_model_load("/nonexistent/a.gguf", nullptr, &m), CBL_OK);
    std::string other;
    std::thread t([&] {
        cbl_model* m2 = nullptr;
        cbl_model_load("/nonexistent/b.gguf", nullptr, &m2);
        other = cbl_last_error();
    });
    t.join();
    EXPECT_NE(other.find("b.gguf"), std::string::npos);
    EXPECT_NE(std::string(cbl_last_error()).find("a.gguf"), std::string::npos);
}

TEST(CApi, UnknownTrailingParamsAreUnsupported) {
    struct bigger {
        cbl_model_params p;
        int64_t future_field;
    } b{};
    cbl_model_params_init(&b.p);
    b.p.struct_size = sizeof(b);
    b.future_field = 7;
    cbl_model* m = nullptr;
    EXPECT_EQ(cbl_model_load("/nonexistent/c.gguf", &b.p, &m), CBL_UNSUPPORTED);
}

TEST(CApi, TokenizeWithRealModel) {
    CBL_REQUIRE_DEFAULT_MODEL(path);
    cbl_model_params p;
    cbl_model_params_init(&p);
    p.vocab_only = true;
    cbl_model* m = nullptr;
    ASSERT_EQ(cbl_model_load(path.c_str(), &p, &m), CBL_OK) << cbl_last_error();
    EXPECT_EQ(cbl_model_n_vocab(m), 49152);
    const char* text = "Hello world";
    size_t n = 0;
    ASSERT_EQ(cbl_tokenize(m, text, strlen(text), false, false, nullptr, 0, &n), CBL_OK);
    ASSERT_GT(n, 0u);
    int32_t small[1];
    if (n > 1) {
        EXPECT_EQ(cbl_tokenize(m, text, strlen(text), false, false, small, 1, &n), CBL_RANGE);
    }
    std::vector<int32_t> ids(n);
    ASSERT_EQ(cbl_tokenize(m, text, strlen(text), false, false, ids.data(), ids.size(), &n), CBL_OK);
    cbl_model_free(m);
}
