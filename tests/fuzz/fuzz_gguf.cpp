// libFuzzer target for the GGUF reader. Not part of the default build (libFuzzer needs clang).
// Build and run by hand from the repository root:
//
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//       tests/fuzz/fuzz_gguf.cpp core/model/gguf.cpp core/model/gguf-parse.cpp \
//       core/util/error.cpp kernels/dtype.cpp \
//       -o fuzz_gguf
//   mkdir -p corpus && ./fuzz_gguf -max_len=65536 corpus
//
// Seed the corpus with small valid files (e.g. written by cbltest::gguf_builder). Any outcome
// other than success or cacheblend::error is a bug.
#include <cstddef>
#include <cstdint>

#include "core/model/gguf.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto f = cacheblend::gguf_file::from_bytes(data, size, "fuzz");
        // Exercise the getters on whatever parsed: they walk the image without re-checking.
        for (const std::string& key : f->keys()) {
            try {
                (void)f->get_int(key);
                (void)f->get_string_array_view(key);
            } catch (const cacheblend::error&) {
            }
            try {
                (void)f->get_float_array(key);
                (void)f->get_int_array(key);
            } catch (const cacheblend::error&) {
            }
        }
        (void)f->content_hash();
    } catch (const cacheblend::error&) {
    }
    return 0;
}
