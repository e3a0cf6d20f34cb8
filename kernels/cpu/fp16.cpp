#include "kernels/cpu/fp16.h"

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants-impl.h"

namespace cacheblend {

float fp16_to_fp32(uint16_t h) { return qimpl::h2f(h); }

uint16_t fp32_to_fp16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) {
        // NaN stays NaN and quiet (as vcvtps2ph does: top payload bits kept, quiet bit set).
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

uint16_t fp32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
#if CBL_QUANTS_X86
    const cpu_isa isa = cpu_isa_active();
    if (isa >= cpu_isa::avx512) return avx512::fp16_to_fp32_row(src, dst, n);
    if (isa == cpu_isa::avx2) return avx2::fp16_to_fp32_row(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = qimpl::h2f(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
#if CBL_QUANTS_X86
    const cpu_isa isa = cpu_isa_active();
    if (isa >= cpu_isa::avx512) return avx512::fp32_to_fp16_row(src, dst, n);
    if (isa == cpu_isa::avx2) return avx2::fp32_to_fp16_row(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

}  // namespace cacheblend
