// cbl-gguf-reshape: a GGUF model with another number of layers and vocabulary size
// (tests/util/gguf-reshape.h). scripts/gpu-check.sh cuts real models down here to travel to a GPU
// machine and blows them up there to their full shape for the speed measurements.
//   cbl-gguf-reshape SRC DST [--layers N] [--vocab V]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "util/gguf-reshape.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: cbl-gguf-reshape SRC DST [--layers N] [--vocab V]\n");
        return 2;
    }
    cbltest::gguf_reshape_params p;
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--layers" || a == "--vocab") && i + 1 < argc) {
            char* end = nullptr;
            const long long v = std::strtoll(argv[++i], &end, 10);
            if (*end || v <= 0) {
                std::fprintf(stderr, "cbl-gguf-reshape: %s needs a positive number\n", a.c_str());
                return 2;
            }
            if (a == "--layers")
                p.n_layer = static_cast<int32_t>(v);
            else
                p.n_vocab = v;
        } else {
            std::fprintf(stderr, "cbl-gguf-reshape: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    try {
        cbltest::reshape_gguf(argv[1], argv[2], p);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cbl-gguf-reshape: %s\n", e.what());
        return 1;
    }
    return 0;
}
