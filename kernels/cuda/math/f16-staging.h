// Staging f32 activations as f16 for the prefill GEMM without overflow. f16 ends at 65504, and
// the inputs of some matmuls (the SwiGLU product entering ffn_down above all) reach the
// thousands on small models and more on larger ones ("massive activations"); an input beyond
// f16's range would become inf and poison the whole output row.
//
// A row whose largest magnitude is below 2^15 is staged as is, so it converts exactly as a plain
// f16 cast. A larger row is multiplied by a power of two 2^e (e < 0) that brings its largest
// magnitude into [2^14, 2^15), and its GEMM output row is multiplied by 2^-e afterwards. Both
// products are exact in binary floating point (barring f32 underflow of values already far below
// f16's resolution), so the row loses only what f16 rounding loses anyway, relative to its values.
// Rows holding inf or NaN are staged as is: the output is not finite either way.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

// The largest magnitude staged unscaled, and where a scaled row's maximum lands: [2^14, 2^15).
constexpr int k_f16_stage_max_log2 = 15;

// 2^e as a float, for -126 <= e <= 127 (normal floats).
CBL_HD inline float pow2_f(int e) { return bits_to_f32(static_cast<uint32_t>(e + 127) << 23); }

// The exponent e of the row scale 2^e for a row whose largest magnitude is amax (>= 0): 0 when
// amax < 2^15 or is not finite, else the e < 0 that puts amax * 2^e in [2^14, 2^15).
CBL_HD inline int f16_stage_exponent(float amax) {
    const uint32_t biased = (f32_to_bits(amax) >> 23) & 0xffu;  // amax >= 0: no sign bit
    if (biased == 0xffu) return 0;                              // inf or NaN
    const int floor_log2 = static_cast<int>(biased) - 127;      // subnormals: below 2^15 anyway
    if (floor_log2 < k_f16_stage_max_log2) return 0;
    return k_f16_stage_max_log2 - 1 - floor_log2;  // >= -113 since floor_log2 <= 127
}

// The value staged for x in a row with exponent e (then rounded to f16 by the caller).
CBL_HD inline float f16_stage(float x, int e) { return e == 0 ? x : mul_rn(x, pow2_f(e)); }

// The GEMM output y of a row staged with exponent e, scaled back (the bias is added after).
CBL_HD inline float f16_unstage(float y, int e) { return e == 0 ? y : mul_rn(y, pow2_f(-e)); }

}  // namespace hd
}  // namespace cacheblend
