// IEEE binary16 and bfloat16 conversions (scalar, exact round-to-nearest-even), plus row helpers
// that use F16C / AVX-512 when active.
#pragma once

#include <cstdint>
#include <cstring>

namespace cacheblend {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
inline float bf16_to_fp32(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN kept quiet

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace cacheblend
