// Generic (portable C++) block quantization kernels, ggml's reference math, plus the run-time
// dispatch to the AVX2 / AVX-512 translation units.
#include "kernels/cpu/quants.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants-impl.h"
#include "kernels/fp16.h"

namespace cacheblend {
namespace {

using namespace qimpl;

inline float h2f_(uint16_t h) { return h2f(h); }
inline uint16_t f2h(float f) { return fp32_to_fp16(f); }

// ggml's nearest_int: round half to even through the float adder (|x| < 2^22).
inline int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int i;
    std::memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

// ---------------------------------------------------------------------------------------------
// Dequantization

void dequant_f32(const void* src, float* y, int64_t n) { std::memcpy(y, src, n * sizeof(float)); }

void dequant_f16(const void* src, float* y, int64_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) y[i] = h2f_(x[i]);
}

void dequant_bf16(const void* src, float* y, int64_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

void dequant_q4_0(const void* src, float* y, int64_t n) {
    const block_q4_0* x = static_cast<const block_q4_0*>(src);
    for (int64_t i = 0; i < n / qk; ++i, y += qk) {
        const float d = h2f_(x[i].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = ((x[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequant_q4_1(const void* src, float* y, int64_t n) {
    const block_q4_1* x = static_cast<const block_q4_1*>(src);
    for (int64_t i = 0; i < n / qk; ++i, y += qk) {
        const float d = h2f_(x[i].d), m = h2f_(x[i].m);
        for (int j = 0; j < 16; ++j) {
            y[j] = (x[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequant_q5_0(const void* src, float* y, int64_t n) {
    const block_q5_0* x = static_cast<const block_q5_0*>(src);
    for (int64_t i = 0; i < n / qk; ++i, y += qk) {
        const float d = h2f_(x[i].d);
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; ++j) {
            const int x0 = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            const int x1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j] = (x0 - 16) * d;
            y[j + 16] = (x1 - 16) * d;
        }
    }
}

void dequant_q5_1(const void* src, float* y, int64_t n) {
    const block_q5_1* x = static_cast<const block_q5_1*>(src);
    for (int64_t i = 0; i < n / qk; ++i, y += qk) {
        const float d = h2f_(x[i].d), m = h2f_(x[i].m);
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; ++j) {
            const int x0 = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            const int x1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j] = x0 * d + m;
            y[j + 16] = x1 * d + m;
        }
    }
}

void dequant_q8_0(const void* src, float* y, int64_t n) {
    const block_q8_0* x = static_cast<const block_q8_0*>(src);
    for (int64_t i = 0; i < n / qk; ++i, y += qk) {
        const float d = h2f_(x[i].d);
        for (int j = 0; j < qk; ++j) y[j] = x[i].qs[j] * d;
    }
}

void dequant_q8_1(const void* src, float* y, int64_t n) {
    const block_q8_1* x = static_cast<const block_q8_1*>(src);
    for (int64_t i = 0; i < n / qk; ++i, y += qk) {
        const float d = h2f_(x[i].d);
        for (int j = 0; j < qk; ++j) y[j] = x[i].qs[j] * d;
    }
}

void dequant_q2_k(const void* src, float* y, int64_t n) {
    const block_q2_k* x = static_cast<const block_q2_k*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = h2f_(x[i].d), dmin = h2f_(x[i].dmin);
        const uint8_t* q = x[i].qs;
        int is = 0;
        for (int h = 0; h < 2; ++h, q += 32) {
            for (int j = 0; j < 4; ++j) {
                const int shift = 2 * j;
                for (int k = 0; k < 2; ++k) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = dl * ((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// The 16 signed 6-bit scales of a q3_K block.
void q3k_scales(const uint8_t* s, int8_t* out) {
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
        const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
}

void dequant_q3_k(const void* src, float* y, int64_t n) {
    const block_q3_k* x = static_cast<const block_q3_k*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = h2f_(x[i].d);
        int8_t sc[16];
        q3k_scales(x[i].scales, sc);
        for (int h = 0; h < 2; ++h) {
            for (int j = 0; j < 4; ++j) {
                for (int k = 0; k < 2; ++k) {
                    const float dl = d * sc[8 * h + 2 * j + k];
                    for (int l = 0; l < 16; ++l) {
                        const int q2 = (x[i].qs[32 * h + 16 * k + l] >> (2 * j)) & 3;
                        const int hb = (x[i].hmask[16 * k + l] >> (4 * h + j)) & 1;
                        *y++ = dl * (q2 - (hb ? 0 : 4));
                    }
                }
            }
        }
    }
}

void dequant_q4_k(const void* src, float* y, int64_t n) {
    const block_q4_k* x = static_cast<const block_q4_k*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = h2f_(x[i].d), dmin = h2f_(x[i].dmin);
        const uint8_t* q = x[i].qs;
        for (int c = 0; c < 4; ++c, q += 32) {
            uint8_t sc, m;
            scale_min_k4(2 * c, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void dequant_q5_k(const void* src, float* y, int64_t n) {
    const block_q5_k* x = static_cast<const block_q5_k*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = h2f_(x[i].d), dmin = h2f_(x[i].dmin);
        const uint8_t* q = x[i].qs;
        const uint8_t* qh = x[i].qh;
        for (int c = 0; c < 4; ++c, q += 32) {
            uint8_t sc, m;
            scale_min_k4(2 * c, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const int u1 = 1 << (2 * c), u2 = 2 << (2 * c);
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void dequant_q6_k(const void* src, float* y, int64_t n) {
    const block_q6_k* x = static_cast<const block_q6_k*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = h2f_(x[i].d);
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* sc = x[i].scales;
        for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void dequant_q8_k(const void* src, float* y, int64_t n) {
    const block_q8_k* x = static_cast<const block_q8_k*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i, y += qk_k) {
        const float d = q8k_d(&x[i]);
        for (int j = 0; j < qk_k; ++j) y[j] = d * x[i].qs[j];
    }
}

// ---------------------------------------------------------------------------------------------
// Quantization (ggml's *_ref math for the 32-element types and q8_K; simple searches for k-quants)

void quant_f32(const float* x, void* dst, int64_t n) { std::memcpy(dst, x, n * sizeof(float)); }

void quant_f16(const float* x, void* dst, int64_t n) {
    uint16_t* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = f2h(x[i]);
}

void quant_bf16(const float* x, void* dst, int64_t n) {
    uint16_t* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

void quant_q4_0(const float* x, void* dst, int64_t n) {
    block_q4_0* y = static_cast<block_q4_0*>(dst);
    for (int64_t i = 0; i < n / qk; ++i, x += qk) {
        float amax = 0.f, max = 0.f;
        for (int j = 0; j < qk; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        for (int j = 0; j < 16; ++j) {
            const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
            const int x1 =
                std::min(15, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 8.5f)));
            y[i].qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
        }
    }
}

void quant_q4_1(const float* x, void* dst, int64_t n) {
    block_q4_1* y = static_cast<block_q4_1*>(dst);
    for (int64_t i = 0; i < n / qk; ++i, x += qk) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < qk; ++j) {
            min = std::min(min, x[j]);
            max = std::max(max, x[j]);
        }
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        y[i].m = f2h(min);
        for (int j = 0; j < 16; ++j) {
            const int x0 =
                std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
            const int x1 =
                std::min(15, static_cast<int>(static_cast<int8_t>((x[16 + j] - min) * id + 0.5f)));
            y[i].qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
        }
    }
}

void quant_q5_0(const float* x, void* dst, int64_t n) {
    block_q5_0* y = static_cast<block_q5_0*>(dst);
    for (int64_t i = 0; i < n / qk; ++i, x += qk) {
        float amax = 0.f, max = 0.f;
        for (int j = 0; j < qk; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int x0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
            const int x1 =
                std::min(31, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 16.5f)));
            y[i].qs[j] = static_cast<uint8_t>((x0 & 0xF) | ((x1 & 0xF) << 4));
            qh |= static_cast<uint32_t>((x0 & 0x10) >> 4) << j;
            qh |= static_cast<uint32_t>((x1 & 0x10) >> 4) << (j + 16);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quant_q5_1(const float* x, void* dst, int64_t n) {
    block_q5_1* y = static_cast<block_q5_1*>(dst);
    for (int64_t i = 0; i < n / qk; ++i, x += qk) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < qk; ++j) {
            min = std::min(min, x[j]);
            max = std::max(max, x[j]);
        }
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        y[i].m = f2h(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int x0 = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
            const int x1 = std::min(31, static_cast<int>((x[16 + j] - min) * id + 0.5f));
            y[i].qs[j] = static_cast<uint8_t>((x0 & 0xF) | ((x1 & 0xF) << 4));
            qh |= static_cast<uint32_t>((x0 & 0x10) >> 4) << j;
            qh |= static_cast<uint32_t>((x1 & 0x10) >> 4) << (j + 16);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quant_q8_0(const float* x, void* dst, int64_t n) {
    block_q8_0* y = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / qk; ++i, x += qk) {
        float amax = 0.f;
        for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j]));
        // As ggml's AVX quantize_row_q8_0 (not its _ref): id = 127 / amax, round half to even.
        const float d = amax / 127.f;
        const float id = amax != 0.f ? 127.f / amax : 0.0f;
        y[i].d = f2h(d);
        for (int j = 0; j < qk; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
    }
}

void quant_q8_1(const float* x, void* dst, int64_t n) {
    block_q8_1* y = static_cast<block_q8_1*>(dst);
    for (int64_t i = 0; i < n / qk; ++i, x += qk) {
        float amax = 0.f;
        for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.f;  // as quant_q8_0
        const float id = amax != 0.f ? 127.f / amax : 0.0f;
        y[i].d = f2h(d);
        int sum = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = static_cast<int>(std::nearbyint(x[j] * id));
            const int q1 = static_cast<int>(std::nearbyint(x[16 + j] * id));
            y[i].qs[j] = static_cast<int8_t>(q0);
            y[i].qs[16 + j] = static_cast<int8_t>(q1);
            sum += q0 + q1;
        }
        y[i].s = f2h(static_cast<float>(sum) * d);
    }
}

void quant_q8_k(const float* x, void* dst, int64_t n) {
    block_q8_k* y = static_cast<block_q8_k*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        float max = 0.f, amax = 0.f;
        for (int j = 0; j < qk_k; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        block_q8_k b;
        std::memset(&b, 0, sizeof(b));
        if (amax != 0.f) {
            const float iscale = -127.f / max;
            for (int j = 0; j < qk_k; ++j) {
                b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
            }
            for (int j = 0; j < qk_k / 16; ++j) {
                int sum = 0;
                for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
                b.bsums[j] = static_cast<int16_t>(sum);
            }
            const float d = 1 / iscale;
            std::memcpy(b.d, &d, 4);
        }
        std::memcpy(&y[i], &b, sizeof(b));
    }
}

// Signed value with the largest magnitude.
float signed_amax(const float* x, int n) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

// Asymmetric sub-block fit used by q2_K/q4_K/q5_K: x ~ scale * q - min, q in [0, nmax].
// Tries a few min offsets and keeps the one with the least squared error.
void fit_scale_min(const float* x, int n, int nmax, float* scale, float* min) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
    }
    lo = std::min(lo, 0.f);  // the min is stored as a non-negative offset
    float best_err = FLT_MAX, best_s = 0.f, best_m = -lo;
    if (hi <= lo) {
        *scale = 0.f;
        *min = -lo;
        return;
    }
    for (int step = 0; step <= 8; ++step) {
        // Shrink the range from either end a little: trades clipping for finer steps.
        const float shrink = 0.02f * step;
        for (int side = 0; side < 2; ++side) {
            float l = lo, h = hi;
            if (side == 0)
                l = std::min(0.f, lo + shrink * (hi - lo));
            else
                h = hi - shrink * (hi - lo);
            if (h <= l) continue;
            const float s = (h - l) / nmax;
            float err = 0.f;
            for (int j = 0; j < n; ++j) {
                const int q = std::max(0, std::min(nmax, nearest_int((x[j] - l) / s)));
                const float e = s * q + l - x[j];
                err += e * e;
            }
            if (err < best_err) {
                best_err = err;
                best_s = s;
                best_m = -l;
            }
            if (step == 0) break;
        }
    }
    *scale = best_s;
    *min = best_m;
}

void quant_q2_k(const float* x, void* dst, int64_t n) {
    block_q2_k* y = static_cast<block_q2_k*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        float scales[16], mins[16], max_scale = 0.f, max_min = 0.f;
        for (int j = 0; j < 16; ++j) {
            fit_scale_min(x + 16 * j, 16, 3, &scales[j], &mins[j]);
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        const float d = max_scale / 15, dm = max_min / 15;
        y[i].d = f2h(d);
        y[i].dmin = f2h(dm);
        const float dq = h2f_(y[i].d), dmq = h2f_(y[i].dmin);
        uint8_t L[qk_k];
        for (int j = 0; j < 16; ++j) {
            const int ls = d > 0 ? std::min(15, nearest_int(scales[j] / d)) : 0;
            const int lm = dm > 0 ? std::min(15, nearest_int(mins[j] / dm)) : 0;
            y[i].scales[j] = static_cast<uint8_t>(ls | (lm << 4));
            const float dl = dq * ls, ml = dmq * lm;
            for (int l = 0; l < 16; ++l) {
                const int q = dl > 0 ? nearest_int((x[16 * j + l] + ml) / dl) : 0;
                L[16 * j + l] = static_cast<uint8_t>(std::max(0, std::min(3, q)));
            }
        }
        for (int j = 0; j < qk_k; j += 128) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[j / 4 + l] = static_cast<uint8_t>(
                    L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
            }
        }
    }
}

void quant_q3_k(const float* x, void* dst, int64_t n) {
    block_q3_k* y = static_cast<block_q3_k*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        float scales[16], max_scale = 0.f, amax = 0.f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = signed_amax(x + 16 * j, 16) / -4;  // q in [-4, 3]
            if (std::fabs(scales[j]) > amax) {
                amax = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, 12);
        std::memset(y[i].hmask, 0, 32);
        int8_t ls[16];
        if (max_scale != 0.f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; ++j) {
                ls[j] = static_cast<int8_t>(
                    std::max(-32, std::min(31, nearest_int(iscale * scales[j]))));
            }
            y[i].d = f2h(1 / iscale);
        } else {
            std::memset(ls, 0, sizeof(ls));
            y[i].d = 0;
        }
        for (int j = 0; j < 16; ++j) {
            const int l = ls[j] + 32;
            if (j < 8)
                y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
            else
                y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
            y[i].scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
        }
        const float d = h2f_(y[i].d);
        uint8_t L[qk_k];
        for (int j = 0; j < 16; ++j) {
            const float dl = d * ls[j];
            for (int l = 0; l < 16; ++l) {
                const int q = dl != 0.f ? nearest_int(x[16 * j + l] / dl) : 0;
                L[16 * j + l] = static_cast<uint8_t>(std::max(-4, std::min(3, q)) + 4);
            }
        }
        for (int j = 0; j < qk_k; ++j) {
            if (L[j] > 3) {
                y[i].hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
                L[j] -= 4;
            }
        }
        for (int j = 0; j < qk_k; j += 128) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[j / 4 + l] = static_cast<uint8_t>(
                    L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
            }
        }
    }
}

// Shared by q4_K (nmax 15) and q5_K (nmax 31): 8 sub-blocks of 32 with 6-bit scales and mins.
void quant_k4_common(const float* x, int nmax, uint16_t* dd, uint16_t* dmin, uint8_t* sc12,
                     uint8_t* L) {
    float scales[8], mins[8], max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < 8; ++j) {
        fit_scale_min(x + 32 * j, 32, nmax, &scales[j], &mins[j]);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
        lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    }
    std::memset(sc12, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            sc12[j] = ls[j];
            sc12[j + 4] = lm[j];
        } else {
            sc12[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            sc12[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
            sc12[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
        }
    }
    *dd = f2h(max_scale / 63.f);
    *dmin = f2h(max_min / 63.f);
    const float d = h2f_(*dd), dm = h2f_(*dmin);
    for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        scale_min_k4(j, sc12, &s, &m);
        const float dl = d * s, ml = dm * m;
        for (int l = 0; l < 32; ++l) {
            const int q = dl > 0 ? nearest_int((x[32 * j + l] + ml) / dl) : 0;
            L[32 * j + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, q)));
        }
    }
}

void quant_q4_k(const float* x, void* dst, int64_t n) {
    block_q4_k* y = static_cast<block_q4_k*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        quant_k4_common(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int c = 0; c < 4; ++c) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[32 * c + l] =
                    static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
            }
        }
    }
}

void quant_q5_k(const float* x, void* dst, int64_t n) {
    block_q5_k* y = static_cast<block_q5_k*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        uint8_t L[qk_k];
        quant_k4_common(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        std::memset(y[i].qh, 0, 32);
        for (int c = 0; c < 4; ++c) {
            for (int l = 0; l < 32; ++l) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
                if (lo > 15) y[i].qh[l] |= static_cast<uint8_t>(1 << (2 * c));
                if (hi > 15) y[i].qh[l] |= static_cast<uint8_t>(2 << (2 * c));
            }
        }
    }
}

void quant_q6_k(const float* x, void* dst, int64_t n) {
    block_q6_k* y = static_cast<block_q6_k*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k) {
        float scales[16], max_scale = 0.f, amax = 0.f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = signed_amax(x + 16 * j, 16) / -32;  // q in [-32, 31]
            if (std::fabs(scales[j]) > amax) {
                amax = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        uint8_t L[qk_k];
        if (max_scale == 0.f) {
            std::memset(y[i].scales, 0, 16);
            y[i].d = 0;
            std::memset(L, 32, sizeof(L));
        } else {
            const float iscale = -128.f / max_scale;
            y[i].d = f2h(1 / iscale);
            for (int j = 0; j < 16; ++j) {
                y[i].scales[j] =
                    static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
            }
            const float d = h2f_(y[i].d);
            for (int j = 0; j < 16; ++j) {
                const float dl = d * y[i].scales[j];
                for (int l = 0; l < 16; ++l) {
                    const int q = dl != 0.f ? nearest_int(x[16 * j + l] / dl) : 0;
                    L[16 * j + l] = static_cast<uint8_t>(std::max(-32, std::min(31, q)) + 32);
                }
            }
        }
        uint8_t* ql = y[i].ql;
        uint8_t* qh = y[i].qh;
        for (int j = 0; j < qk_k; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                             ((q4 >> 4) << 6));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dot products (one weight row with one activation row), ggml's generic accumulation order

float dot_f32(int64_t n, const void* vw, const void* va) {
    const float* w = static_cast<const float*>(vw);
    const float* a = static_cast<const float*>(va);
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += w[i + k] * a[i + k];
    }
    for (; i < n; ++i) acc[0] += w[i] * a[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float dot_f16(int64_t n, const void* vw, const void* va) {
    const uint16_t* w = static_cast<const uint16_t*>(vw);
    const uint16_t* a = static_cast<const uint16_t*>(va);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(h2f_(w[i]) * h2f_(a[i]));
    return static_cast<float>(sum);
}

float dot_bf16(int64_t n, const void* vw, const void* va) {
    const uint16_t* w = static_cast<const uint16_t*>(vw);
    const uint16_t* a = static_cast<const uint16_t*>(va);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(bf16_to_fp32(w[i]) * bf16_to_fp32(a[i]));
    }
    return static_cast<float>(sum);
}

float dot_q4_0(int64_t n, const void* vw, const void* va) {
    const block_q4_0* x = static_cast<const block_q4_0*>(vw);
    const block_q8_0* y = static_cast<const block_q8_0*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk; ++i) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; ++j) {
            sumi0 += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            sumi1 += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sumf += (sumi0 + sumi1) * (h2f_(x[i].d) * h2f_(y[i].d));
    }
    return sumf;
}

float dot_q4_1(int64_t n, const void* vw, const void* va) {
    const block_q4_1* x = static_cast<const block_q4_1*>(vw);
    const block_q8_1* y = static_cast<const block_q8_1*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk; ++i) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; ++j) {
            sumi0 += (x[i].qs[j] & 0xF) * y[i].qs[j];
            sumi1 += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        sumf += (h2f_(x[i].d) * h2f_(y[i].d)) * (sumi0 + sumi1) + h2f_(x[i].m) * h2f_(y[i].s);
    }
    return sumf;
}

float dot_q5_0(int64_t n, const void* vw, const void* va) {
    const block_q5_0* x = static_cast<const block_q5_0*>(vw);
    const block_q8_0* y = static_cast<const block_q8_0*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk; ++i) {
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; ++j) {
            const int x0 = ((x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi0 += x0 * y[i].qs[j];
            sumi1 += x1 * y[i].qs[j + 16];
        }
        sumf += (sumi0 + sumi1) * (h2f_(x[i].d) * h2f_(y[i].d));
    }
    return sumf;
}

float dot_q5_1(int64_t n, const void* vw, const void* va) {
    const block_q5_1* x = static_cast<const block_q5_1*>(vw);
    const block_q8_1* y = static_cast<const block_q8_1*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk; ++i) {
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; ++j) {
            const int x0 = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            const int x1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            sumi0 += x0 * y[i].qs[j];
            sumi1 += x1 * y[i].qs[j + 16];
        }
        sumf += (h2f_(x[i].d) * h2f_(y[i].d)) * (sumi0 + sumi1) + h2f_(x[i].m) * h2f_(y[i].s);
    }
    return sumf;
}

float dot_q8_0(int64_t n, const void* vw, const void* va) {
    const block_q8_0* x = static_cast<const block_q8_0*>(vw);
    const block_q8_0* y = static_cast<const block_q8_0*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk; ++i) {
        int sumi = 0;
        for (int j = 0; j < qk; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sumf += sumi * (h2f_(x[i].d) * h2f_(y[i].d));
    }
    return sumf;
}

float dot_q2_k(int64_t n, const void* vw, const void* va) {
    const block_q2_k* x = static_cast<const block_q2_k*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const uint8_t* q2 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        const uint8_t* sc = x[i].scales;
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float yd = q8k_d(&y[i]);
        const float dall = yd * h2f_(x[i].d), dmin = yd * h2f_(x[i].dmin);
        int isum = 0, is = 0;
        for (int k = 0; k < 2; ++k, q2 += 32) {
            for (int j = 0; j < 4; ++j, q8 += 32) {
                const int shift = 2 * j;
                int d = sc[is++] & 0xF, isuml = 0;
                for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                d = sc[is++] & 0xF;
                isuml = 0;
                for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
            }
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

float dot_q3_k(int64_t n, const void* vw, const void* va) {
    const block_q3_k* x = static_cast<const block_q3_k*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        int8_t sc[16];
        q3k_scales(x[i].scales, sc);
        const int8_t* q8 = y[i].qs;
        int isum = 0;
        for (int h = 0; h < 2; ++h) {
            for (int j = 0; j < 4; ++j) {
                for (int k = 0; k < 2; ++k, q8 += 16) {
                    int s = 0;
                    for (int l = 0; l < 16; ++l) {
                        const int q2 = (x[i].qs[32 * h + 16 * k + l] >> (2 * j)) & 3;
                        const int hb = (x[i].hmask[16 * k + l] >> (4 * h + j)) & 1;
                        s += (q2 - (hb ? 0 : 4)) * q8[l];
                    }
                    isum += sc[8 * h + 2 * j + k] * s;
                }
            }
        }
        sumf += h2f_(x[i].d) * q8k_d(&y[i]) * isum;
    }
    return sumf;
}

float dot_q4_k(int64_t n, const void* vw, const void* va) {
    const block_q4_k* x = static_cast<const block_q4_k*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const uint8_t* q4 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        int isum = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            scale_min_k4(j, x[i].scales, &sc, &m);
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            const int shift = (j & 1) * 4;
            const uint8_t* q = q4 + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; ++l) s += ((q[l] >> shift) & 0xF) * q8[32 * j + l];
            isum += sc * s;
        }
        const float yd = q8k_d(&y[i]);
        sumf += yd * h2f_(x[i].d) * isum - yd * h2f_(x[i].dmin) * summ;
    }
    return sumf;
}

float dot_q5_k(int64_t n, const void* vw, const void* va) {
    const block_q5_k* x = static_cast<const block_q5_k*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const uint8_t* q4 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        int isum = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            scale_min_k4(j, x[i].scales, &sc, &m);
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            const int shift = (j & 1) * 4;
            const uint8_t* q = q4 + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; ++l) {
                const int v = ((q[l] >> shift) & 0xF) | (((x[i].qh[l] >> j) & 1) << 4);
                s += v * q8[32 * j + l];
            }
            isum += sc * s;
        }
        const float yd = q8k_d(&y[i]);
        sumf += yd * h2f_(x[i].d) * isum - yd * h2f_(x[i].dmin) * summ;
    }
    return sumf;
}

float dot_q6_k(int64_t n, const void* vw, const void* va) {
    const block_q6_k* x = static_cast<const block_q6_k*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    float sumf = 0.f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        int8_t v[qk_k];
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        for (int h = 0; h < 2; ++h, ql += 64, qh += 32) {
            int8_t* o = v + 128 * h;
            for (int l = 0; l < 32; ++l) {
                o[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                o[l + 32] =
                    static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                o[l + 96] =
                    static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int isum = 0;
        for (int j = 0; j < 16; ++j) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += v[16 * j + l] * y[i].qs[16 * j + l];
            isum += x[i].scales[j] * s;
        }
        sumf += h2f_(x[i].d) * q8k_d(&y[i]) * isum;
    }
    return sumf;
}

// ---------------------------------------------------------------------------------------------
// Tables and dispatch

using dot_fn = float (*)(int64_t n, const void* w, const void* a);

struct generic_kernels {
    dequantize_fn dequant;
    quantize_fn quant;
    dot_fn dot;  // nullptr for activation-only types
};

const generic_kernels* generic_for(dtype t) {
    static const generic_kernels k_f32 = {dequant_f32, quant_f32, dot_f32};
    static const generic_kernels k_f16 = {dequant_f16, quant_f16, dot_f16};
    static const generic_kernels k_bf16 = {dequant_bf16, quant_bf16, dot_bf16};
    static const generic_kernels k_q4_0 = {dequant_q4_0, quant_q4_0, dot_q4_0};
    static const generic_kernels k_q4_1 = {dequant_q4_1, quant_q4_1, dot_q4_1};
    static const generic_kernels k_q5_0 = {dequant_q5_0, quant_q5_0, dot_q5_0};
    static const generic_kernels k_q5_1 = {dequant_q5_1, quant_q5_1, dot_q5_1};
    static const generic_kernels k_q8_0 = {dequant_q8_0, quant_q8_0, dot_q8_0};
    static const generic_kernels k_q8_1 = {dequant_q8_1, quant_q8_1, nullptr};
    static const generic_kernels k_q2_k = {dequant_q2_k, quant_q2_k, dot_q2_k};
    static const generic_kernels k_q3_k = {dequant_q3_k, quant_q3_k, dot_q3_k};
    static const generic_kernels k_q4_k = {dequant_q4_k, quant_q4_k, dot_q4_k};
    static const generic_kernels k_q5_k = {dequant_q5_k, quant_q5_k, dot_q5_k};
    static const generic_kernels k_q6_k = {dequant_q6_k, quant_q6_k, dot_q6_k};
    static const generic_kernels k_q8_k = {dequant_q8_k, quant_q8_k, nullptr};
    switch (t) {
        case dtype::f32: return &k_f32;
        case dtype::f16: return &k_f16;
        case dtype::bf16: return &k_bf16;
        case dtype::q4_0: return &k_q4_0;
        case dtype::q4_1: return &k_q4_1;
        case dtype::q5_0: return &k_q5_0;
        case dtype::q5_1: return &k_q5_1;
        case dtype::q8_0: return &k_q8_0;
        case dtype::q8_1: return &k_q8_1;
        case dtype::q2_k: return &k_q2_k;
        case dtype::q3_k: return &k_q3_k;
        case dtype::q4_k: return &k_q4_k;
        case dtype::q5_k: return &k_q5_k;
        case dtype::q6_k: return &k_q6_k;
        case dtype::q8_k: return &k_q8_k;
    }
    return nullptr;
}

#if CBL_QUANTS_X86
// The specialised kernel for the active level, or nullptr (generic). AVX-512 machines also run
// the AVX2 kernels of types that have no AVX-512 one.
template <typename F>
F pick(F (*f512)(dtype), F (*f256)(dtype), dtype t) {
    const cpu_isa isa = cpu_isa_active();
    F f = nullptr;
    if (isa >= cpu_isa::avx512) f = f512(t);
    if (!f && isa != cpu_isa::generic) f = f256(t);
    return f;
}
#endif

}  // namespace

dtype vec_dot_type(dtype weight) {
    switch (weight) {
        case dtype::q4_0:
        case dtype::q5_0:
        case dtype::q8_0: return dtype::q8_0;
        case dtype::q4_1:
        case dtype::q5_1: return dtype::q8_1;
        case dtype::q2_k:
        case dtype::q3_k:
        case dtype::q4_k:
        case dtype::q5_k:
        case dtype::q6_k: return dtype::q8_k;
        default: return weight;
    }
}

void dequantize_row(dtype t, const void* src, float* dst, int64_t n) {
#if CBL_QUANTS_X86
    const dequantize_fn f = pick(avx512::find_dequantize, avx2::find_dequantize, t);
    if (f) return f(src, dst, n);
#endif
    if (const generic_kernels* k = generic_for(t)) k->dequant(src, dst, n);
}

void quantize_row(dtype t, const float* src, void* dst, int64_t n) {
#if CBL_QUANTS_X86
    const quantize_fn f = pick(avx512::find_quantize, avx2::find_quantize, t);
    if (f) return f(src, dst, n);
#endif
    if (const generic_kernels* k = generic_for(t)) k->quant(src, dst, n);
}

void vec_dot_rows(dtype t, int64_t n, const void* w, size_t w_stride, int64_t nrows, const void* a,
                  float* out) {
    if (nrows <= 0) return;
    if (n <= 0) {
        for (int64_t r = 0; r < nrows; ++r) out[r] = 0.f;
        return;
    }
#if CBL_QUANTS_X86
    const vec_dot_rows_fn f = pick(avx512::find_vec_dot_rows, avx2::find_vec_dot_rows, t);
    if (f) return f(n, w, w_stride, nrows, a, out);
#endif
    const generic_kernels* k = generic_for(t);
    if (!k || !k->dot) {
        for (int64_t r = 0; r < nrows; ++r) out[r] = 0.f;
        return;
    }
    const char* wr = static_cast<const char*>(w);
    for (int64_t r = 0; r < nrows; ++r) out[r] = k->dot(n, wr + r * w_stride, a);
}

bool vec_dot_tile_native(dtype t) {
#if CBL_QUANTS_X86
    if (cpu_isa_active() >= cpu_isa::avx512) return avx512::find_vec_dot_tile(t) != nullptr;
#endif
    (void)t;
    return false;
}

void vec_dot_tile(dtype t, int64_t n, const void* w, size_t w_stride, int64_t nrows, const void* a,
                  size_t a_stride, int64_t m, float* out, int64_t ldo) {
    if (nrows <= 0 || m <= 0) return;
#if CBL_QUANTS_X86
    if (n > 0 && cpu_isa_active() >= cpu_isa::avx512) {
        if (const vec_dot_tile_fn f = avx512::find_vec_dot_tile(t)) {
            return f(n, w, w_stride, nrows, a, a_stride, m, out, ldo);
        }
    }
#endif
    const char* ar = static_cast<const char*>(a);
    for (int64_t i = 0; i < m; ++i) vec_dot_rows(t, n, w, w_stride, nrows, ar + i * a_stride, out + i * ldo);
}

float vec_dot(dtype t, int64_t n, const void* w, const void* a) {
    float out = 0.f;
    vec_dot_rows(t, n, w, 0, 1, a, &out);
    return out;
}

}  // namespace cacheblend
