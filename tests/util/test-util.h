// Shared helpers for the test suite.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "retrieval/embedder.h"

namespace cbltest {

// The suite's model: CBL_MODEL (a path or a model name; util/suite-model.cpp sets smollm2-135m
// when it is unset), resolved as the library does: SmolLM2-135M-Instruct.Q4_1.gguf in the cache.
std::string default_model_path();
bool file_exists(const std::string& path);
// ../shared next to the checkout (peer test data); empty when absent.
std::string shared_dir();
// A new private folder /tmp/<prefix>-XXXXXX (mkdtemp); fails the test where it cannot.
std::string make_temp_dir(const char* prefix);
// Whole-file bytes (empty when unreadable) and a whole-file overwrite.
std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace cbltest

// Skips the test when the default model is missing, unless CBL_REQUIRE_MODEL=1 (the project's
// test command sets it after fetching the model), in which case the test fails.
#define CBL_REQUIRE_DEFAULT_MODEL(path_var)                                                    \
    std::string path_var = cbltest::default_model_path();                                     \
    if (!cbltest::file_exists(path_var)) {                                                    \
        const char* req = std::getenv("CBL_REQUIRE_MODEL");                                   \
        if (req && std::string(req) == "1") FAIL() << "default model missing: " << path_var;  \
        GTEST_SKIP() << "default model missing: " << path_var;                                \
    }

// The same for the default embedder (CBL_EMBED_MODEL, else the file scripts/fetch-embedder.sh
// caches; cacheblend::default_embedder_path()).
#define CBL_REQUIRE_DEFAULT_EMBEDDER(path_var)                                                 \
    std::string path_var = cacheblend::default_embedder_path();                               \
    if (!cbltest::file_exists(path_var)) {                                                    \
        const char* req = std::getenv("CBL_REQUIRE_MODEL");                                   \
        if (req && std::string(req) == "1") FAIL() << "embedder model missing: " << path_var; \
        GTEST_SKIP() << "embedder model missing: " << path_var;                               \
    }
