// cuda_fp16.h as the CUDA emulator provides it (tests only): __half as IEEE binary16 bits, with
// the conversions the CUDA backend uses, rounded to nearest even by the host's F16C instructions
// (an implementation independent of the library's own kernels/fp16.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

struct __half {
    uint16_t bits;
};

__attribute__((target("f16c"))) inline float __half2float(__half h) { return _cvtsh_ss(h.bits); }

__attribute__((target("f16c"))) inline __half __float2half_rn(float f) {
    return __half{static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT))};
}

inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
