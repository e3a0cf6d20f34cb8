// The host row conversions of kernels/fp16.h, vectorized where the CPU allows.
#include "kernels/fp16.h"

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants-impl.h"

namespace cacheblend {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
#if CBL_QUANTS_X86
    const cpu_isa isa = cpu_isa_active();
    if (isa >= cpu_isa::avx512) return avx512::fp16_to_fp32_row(src, dst, n);
    if (isa == cpu_isa::avx2) return avx2::fp16_to_fp32_row(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = hd::h2f(src[i]);
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
