// C ABI basics: versions, status strings, thread-local errors, params struct_size handling.
#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// Every named constant has one name in the library, and the name parses back to the constant.
TEST(CApi, EnumNamesRoundTripForEveryKind) {
    const struct {
        int32_t kind;
        std::vector<std::pair<int32_t, const char*>> values;
        int32_t def;
    } kinds[] = {
        {CBL_NAMES_MODE,
         {{CBL_MODE_FULL, "full"},
          {CBL_MODE_PREFIX, "prefix"},
          {CBL_MODE_REUSE, "reuse"},
          {CBL_MODE_BLEND, "blend"}},
         CBL_MODE_BLEND},
        {CBL_NAMES_SEARCH,
         {{CBL_SEARCH_HYBRID, "hybrid"}, {CBL_SEARCH_DENSE, "dense"}, {CBL_SEARCH_BM25, "bm25"}},
         CBL_SEARCH_HYBRID},
        {CBL_NAMES_KV_FORMAT,
         {{CBL_KV_F16, "f16"}, {CBL_KV_Q8, "q8"}, {CBL_KV_EXACT, "exact"}},
         CBL_KV_F16},
        {CBL_NAMES_DOC,
         {{CBL_DOC_TEXT, "text"}, {CBL_DOC_MARKDOWN, "markdown"}, {CBL_DOC_HTML, "html"}},
         CBL_DOC_TEXT},
        {CBL_NAMES_STOP,
         {{CBL_STOP_NONE, "none"},
          {CBL_STOP_EOG, "eog"},
          {CBL_STOP_LENGTH, "length"},
          {CBL_STOP_CONTEXT, "context"},
          {CBL_STOP_CALLBACK, "callback"}},
         CBL_STOP_NONE},
    };
    for (const auto& k : kinds) {
        for (const auto& [value, name] : k.values) {
            ASSERT_NE(cbl_enum_name(k.kind, value), nullptr) << k.kind << " " << value;
            EXPECT_STREQ(cbl_enum_name(k.kind, value), name);
            int32_t back = -1;
            ASSERT_EQ(cbl_enum_parse(k.kind, name, &back), CBL_OK) << cbl_last_error();
            EXPECT_EQ(back, value) << name;
        }
        EXPECT_STREQ(cbl_enum_name(k.kind, 0), cbl_enum_name(k.kind, k.def))
            << "0 names the default";
        EXPECT_EQ(cbl_enum_name(k.kind, 77), nullptr);
    }
    EXPECT_EQ(cbl_enum_name(99, 1), nullptr);
}

TEST(CApi, EnumParseRejectsUnknownNamesListingTheValidOnes) {
    int32_t v = 42;
    EXPECT_EQ(cbl_enum_parse(CBL_NAMES_MODE, "Blend", &v), CBL_INVALID_ARG);  // exact spelling
    EXPECT_EQ(v, 42);
    const std::string msg = cbl_last_error();
    EXPECT_NE(msg.find("'Blend'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("full, prefix, reuse, blend"), std::string::npos) << msg;
    EXPECT_EQ(cbl_enum_parse(99, "full", &v), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_enum_parse(CBL_NAMES_MODE, nullptr, &v), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_enum_parse(CBL_NAMES_MODE, "full", nullptr), CBL_INVALID_ARG);
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
