// binary16 / bfloat16 <-> binary32, the one definition the CPU and the CUDA backend share: a KV
// cache written on a GPU must hold the bytes the CPU would write, so KV files stay interchangeable
// between backends (docs/ARCHITECTURE.md, 'Backends'). Integer code only (no device intrinsic,
// whose NaN payloads differ), CBL_HD so nvcc compiles it for the device and g++ for the host.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// Exact binary16 -> binary32 (ggml's bit trick: subnormals, inf and NaN included). The multiply
// by 2^-112 and the subtraction of 0.5 are exact, so host and device agree.
CBL_HD static inline float h2f(uint16_t h) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const float normalized = mul_rn(bits_to_f32((two_w >> 4) + (0xe0u << 23)), 0x1.0p-112f);
    const float denormalized = add_rn(bits_to_f32((two_w >> 17) | (126u << 23)), -0.5f);
    const uint32_t bits = f32_to_bits(two_w < (1u << 27) ? denormalized : normalized);
    return bits_to_f32(bits | sign);
}

// binary32 -> binary16, round to nearest even; NaN stays NaN and quiet with its top payload bits
// (as x86's vcvtps2ph, which the CPU row conversions use).
CBL_HD static inline uint16_t f2h(float f) {
    uint32_t x = f32_to_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) {
        if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
        return static_cast<uint16_t>(sign | 0x7c00u);
    }
    if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
    if (x < 0x38800000u) {
        // Below 2^-14: a half subnormal, q = f / 2^-24 rounded to nearest even.
        const int e = static_cast<int>(x >> 23);
        const int shift = 126 - e;
        if (shift > 24) return static_cast<uint16_t>(sign);
        const uint32_t m = (x & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return static_cast<uint16_t>(sign | q);
    }
    uint32_t h = (x - 0x38000000u) >> 13;  // rebias the exponent from 127 to 15
    const uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;  // a carry into the exponent is right
    return static_cast<uint16_t>(sign | h);
}

CBL_HD static inline float bf16_to_f32(uint16_t h) {
    return bits_to_f32(static_cast<uint32_t>(h) << 16);
}

// binary32 -> bfloat16, round to nearest even; NaN kept quiet.
CBL_HD static inline uint16_t f2bf(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

}  // namespace hd

// The host names the CPU kernels, the engine and the KV files use; the same functions.
CBL_HD static inline float fp16_to_fp32(uint16_t h) { return hd::h2f(h); }
CBL_HD static inline uint16_t fp32_to_fp16(float f) { return hd::f2h(f); }
CBL_HD static inline float bf16_to_fp32(uint16_t h) { return hd::bf16_to_f32(h); }
CBL_HD static inline uint16_t fp32_to_bf16(float f) { return hd::f2bf(f); }

// Host rows, F16C / AVX-512 when the CPU has them (kernels/cpu/fp16.cpp); bit for bit the scalar
// functions above.
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace cacheblend
