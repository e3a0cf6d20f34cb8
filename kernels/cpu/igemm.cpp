// The integer GEMM's portable parts: type parameters, activation quantization (ggml's q8_0 / q8_K
// integers, stored in the layout the kernels read) and the scalar reference of igemm.h's
// canonical sequence.
#include "kernels/cpu/igemm.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants-impl.h"
#include "kernels/cpu/quants.h"

namespace cacheblend {
namespace igemm {

using namespace qimpl;

namespace {

const type_info k_q4_0 = {32, 32, false, true};
const type_info k_q5_0 = {32, 32, false, true};
const type_info k_q4_k = {256, 32, true, true};
const type_info k_q5_k = {256, 32, true, true};
const type_info k_q6_k = {256, 16, false, false};

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// One group of raw weights in natural element order: integer values (zero point removed, except
// for mins types), sub-block scales and mins, and the group's float scales.
struct group_vals {
    int wq[256];
    int sc[16];
    int mn[8];
    float d, dmin;
};

void unpack_group(dtype t, const uint8_t* blk, group_vals& v) {
    switch (t) {
        case dtype::q4_0: {
            block_q4_0 b;
            std::memcpy(&b, blk, sizeof(b));
            v.d = h2f(b.d);
            v.sc[0] = 1;
            for (int j = 0; j < 16; ++j) {
                v.wq[j] = (b.qs[j] & 0xF) - 8;
                v.wq[j + 16] = (b.qs[j] >> 4) - 8;
            }
            return;
        }
        case dtype::q5_0: {
            block_q5_0 b;
            std::memcpy(&b, blk, sizeof(b));
            uint32_t qh;
            std::memcpy(&qh, b.qh, 4);
            v.d = h2f(b.d);
            v.sc[0] = 1;
            for (int j = 0; j < 16; ++j) {
                const int h0 = static_cast<int>((qh >> j) & 1) << 4;
                const int h1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
                v.wq[j] = ((b.qs[j] & 0xF) | h0) - 16;
                v.wq[j + 16] = ((b.qs[j] >> 4) | h1) - 16;
            }
            return;
        }
        case dtype::q4_k:
        case dtype::q5_k: {
            const bool five = t == dtype::q5_k;
            uint16_t d16, m16;
            std::memcpy(&d16, blk, 2);
            std::memcpy(&m16, blk + 2, 2);
            v.d = h2f(d16);
            v.dmin = h2f(m16);
            const uint8_t* scales = blk + 4;
            const uint8_t* qh = five ? blk + 16 : nullptr;
            const uint8_t* qs = five ? blk + 48 : blk + 16;
            for (int j = 0; j < 8; ++j) {
                uint8_t s, m;
                scale_min_k4(j, scales, &s, &m);
                v.sc[j] = s;
                v.mn[j] = m;
            }
            for (int c = 0; c < 4; ++c) {
                for (int l = 0; l < 32; ++l) {
                    int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
                    if (five) {
                        lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                        hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                    }
                    v.wq[64 * c + l] = lo;
                    v.wq[64 * c + 32 + l] = hi;
                }
            }
            return;
        }
        case dtype::q6_k: {
            const uint8_t* ql = blk;
            const uint8_t* qh = blk + 128;
            const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
            uint16_t d16;
            std::memcpy(&d16, blk + 208, 2);
            v.d = h2f(d16);
            for (int j = 0; j < 16; ++j) v.sc[j] = sc[j];
            for (int h = 0; h < 2; ++h, ql += 64, qh += 32) {
                int* y = v.wq + 128 * h;
                for (int l = 0; l < 32; ++l) {
                    y[l] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    y[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                }
            }
            return;
        }
        default: return;
    }
}

}  // namespace

const type_info* info(dtype w) {
    switch (w) {
        case dtype::q4_0: return &k_q4_0;
        case dtype::q5_0: return &k_q5_0;
        case dtype::q4_k: return &k_q4_k;
        case dtype::q5_k: return &k_q5_k;
        case dtype::q6_k: return &k_q6_k;
        default: return nullptr;
    }
}

bool active(dtype w) {
#if CBL_QUANTS_X86
    return info(w) != nullptr && cpu_isa_active() >= cpu_isa::avx512;
#else
    (void)w;
    return false;
#endif
}

prefill_kernel prefill_kernel_active() {
    return cpu_isa_active() == cpu_isa::amx && amx_built() ? prefill_kernel::amx : prefill_kernel::vnni;
}

void act_buffer::reserve(dtype w, int64_t k, int64_t m) {
    const type_info* ti = info(w);
    w_ = w;
    a_.k = k;
    a_.m = m;
    a_.ng = ti ? k / ti->group : 0;
    a_.ldq = round_up(k, 64);
    q_.resize(static_cast<size_t>(a_.ldq * m));
    d_.resize(static_cast<size_t>(a_.ng * m));
    asum_.resize(static_cast<size_t>(k / 32 * m));
    a_.q = q_.data();
    a_.d = d_.data();
    a_.asum = asum_.data();
}

void act_buffer::quantize_rows(const float* x, int64_t ldx, int64_t i0, int64_t i1) {
    const type_info* ti = info(w_);
    if (!ti) return;
    const int64_t k = a_.k;
    const uint8_t flip = ti->act_signed ? 0 : 0x80;
    for (int64_t i = i0; i < i1; ++i) {
        uint8_t* q = q_.data() + i * a_.ldq;
        float* d = d_.data() + i * a_.ng;
        int16_t* as = asum_.data() + i * (k / 32);
        const float* xr = x + i * ldx;
        if (ti->group == qk_k) {
            block_q8_k b;
            for (int64_t g = 0; g < a_.ng; ++g) {
                quantize_row(dtype::q8_k, xr + g * qk_k, &b, qk_k);
                std::memcpy(d + g, b.d, 4);
                for (int e = 0; e < qk_k; ++e) q[g * qk_k + e] = static_cast<uint8_t>(b.qs[e]) ^ flip;
                for (int j = 0; j < 8; ++j) {
                    as[g * 8 + j] = static_cast<int16_t>(b.bsums[2 * j] + b.bsums[2 * j + 1]);
                }
            }
        } else {
            block_q8_0 b;
            for (int64_t g = 0; g < a_.ng; ++g) {
                quantize_row(dtype::q8_0, xr + g * qk, &b, qk);
                d[g] = h2f(b.d);
                int s = 0;
                for (int e = 0; e < qk; ++e) {
                    q[g * qk + e] = static_cast<uint8_t>(b.qs[e]) ^ flip;
                    s += b.qs[e];
                }
                as[g] = static_cast<int16_t>(s);
            }
        }
    }
}

acts act_buffer::view() const { return a_; }

#if !CBL_QUANTS_X86
// Other architectures never take this path (active() is false there).
void gemm_rows(dtype, int64_t, const void*, size_t, int64_t, const acts&, int64_t, int64_t, float*, int64_t) {}
void gemv_rows(dtype, int64_t, const void*, size_t, int64_t, const acts&, int64_t, int64_t, float*, int64_t) {}
void gemm_rows_amx_emulated(dtype, int64_t, const void*, size_t, int64_t, const acts&, int64_t, int64_t, float*,
                            int64_t) {}
int64_t amx_emulator_faults(const char** first) {
    if (first) *first = nullptr;
    return 0;
}
#endif

float reference_dot(dtype w, int64_t k, const void* wrow, const acts& a, int64_t i) {
    const type_info* ti = info(w);
    if (!ti) return NAN;
    const dtype_traits* tr = dtype_info(w);
    const auto* base = static_cast<const uint8_t*>(wrow);
    const uint8_t flip = ti->act_signed ? 0 : 0x80;
    const uint8_t* q = a.q + i * a.ldq;
    const int64_t ng = k / ti->group;
    group_vals v;
    float acc = 0.f;
    for (int64_t g = 0; g < ng; ++g) {
        unpack_group(w, base + g * tr->block_bytes, v);
        const int nsub = ti->group / ti->sub;
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < nsub; ++j) {
            int32_t s = 0;
            for (int e = j * ti->sub; e < (j + 1) * ti->sub; ++e) {
                s += v.wq[e] * static_cast<int8_t>(q[g * ti->group + e] ^ flip);
            }
            isum += v.sc[j] * s;
            if (ti->mins) msum += v.mn[j] * a.asum[i * (k / 32) + g * 8 + j];
        }
        const float da = a.d[i * ng + g];
        acc = std::fma(v.d * da, static_cast<float>(isum), acc);
        if (ti->mins) acc = std::fma(-(v.dmin * da), static_cast<float>(msum), acc);
    }
    return acc;
}

}  // namespace igemm
}  // namespace cacheblend
