// Per-ISA entry points of the encoder ops (bodies in encoder-ops-impl.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/encoder-ops.h"

namespace cacheblend {
namespace enc {

struct isa_kernels {
    int vector_floats;  // head_dim must be a multiple of this, at most 8x it
    void (*attention_head)(const encoder_attention_args& a, int seq, int head,
                           std::vector<float>& scratch);
    void (*gelu_row)(float* x, int64_t n);
};

const isa_kernels& generic_kernels();
const isa_kernels& avx2_kernels();
const isa_kernels& avx512_kernels();
const isa_kernels& kernels_for(cpu_isa isa);

}  // namespace enc
}  // namespace cacheblend
