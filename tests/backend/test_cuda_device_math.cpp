// The CUDA backend's device math (kernels/cuda/math/*.h, CBL_HD functions) compiled by the host
// compiler and compared with the CPU kernels on random data. No GPU and no CUDA toolkit needed:
// this is how the kernels' arithmetic is tested on machines without one (docs/ARCHITECTURE.md,
// 'Backends'). Bit-exact where the CPU is exact (fp16, dequantization, RMSNorm, RoPE, relocation,
// deviation); the online softmax and the AVX-512 SwiGLU (ggml's vector expf) within tight
// tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/blend-ops.h"
#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants-impl.h"
#include "kernels/cpu/quants.h"
#include "kernels/cuda/math/attention-gemm-plan.h"
#include "kernels/cuda/math/attention-mass.h"
#include "kernels/cuda/math/dequant.h"
#include "kernels/cuda/math/elementwise.h"
#include "kernels/cuda/math/f16-staging.h"
#include "kernels/cuda/math/kv-deviation.h"
#include "kernels/cuda/math/online-softmax.h"
#include "kernels/cuda/math/rms-norm.h"
#include "kernels/cuda/math/rope.h"
#include "kernels/fp16.h"
#include "kernels/kernel-error.h"

namespace cb = cacheblend;
namespace hd = cacheblend::hd;
using cb::dtype;

namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

std::vector<uint16_t> to_f16(const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = cb::fp32_to_fp16(v[i]);
    return h;
}

// Runs fn() at every ISA level the machine has, restoring the detected level afterwards.
template <typename Fn>
void for_each_isa(Fn&& fn) {
    const cb::cpu_isa top = cb::cpu_isa_detected();
    for (int level = 0; level <= static_cast<int>(top); ++level) {
        const cb::cpu_isa isa = cb::cpu_isa_set_override(static_cast<cb::cpu_isa>(level));
        SCOPED_TRACE(cb::cpu_isa_name(isa));
        fn(isa);
    }
    cb::cpu_isa_set_override(top);
}

// Units in the last place between two finite floats of the same sign region.
int64_t ulp_diff(float a, float b) {
    auto ordered = [](float f) {
        const int32_t i = static_cast<int32_t>(bits(f));
        return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
    };
    const int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

}  // namespace

// ---- fp16 / bf16 --------------------------------------------------------------------------

TEST(CudaDeviceMath, HalfToFloatAllValues) {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        ASSERT_EQ(bits(hd::h2f(uint16_t(h))), bits(cb::fp16_to_fp32(uint16_t(h)))) << "h=" << h;
        ASSERT_EQ(bits(hd::bf16_to_f32(uint16_t(h))), bits(cb::bf16_to_fp32(uint16_t(h))));
    }
}

TEST(CudaDeviceMath, FloatToHalfMatchesCpu) {
    std::vector<float> v;
    // Every half's value and the midpoints and neighbours around it: exact ties and both sides.
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const float f = cb::fp16_to_fp32(uint16_t(h));
        v.push_back(f);
        v.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
        v.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
        if ((h & 0x7fff) < 0x7bff) {
            const float g = cb::fp16_to_fp32(uint16_t(h + 1));
            const float mid = (f + g) / 2;
            v.push_back(mid);
            v.push_back(std::nextafter(mid, g));
            v.push_back(std::nextafter(mid, f));
        }
    }
    // Random bit patterns: NaN payloads, f32 subnormals, overflow.
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
        const uint32_t u = rng();
        float f;
        std::memcpy(&f, &u, 4);
        v.push_back(f);
    }
    for (float f : {65504.f, 65519.99f, 65520.f, 1e-8f, 2.98e-8f, 5.96e-8f, -0.f, 0.f,
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
        v.push_back(f);
    }
    for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_EQ(hd::f2h(v[i]), cb::fp32_to_fp16(v[i])) << "f=" << v[i] << " bits=" << bits(v[i]);
    }
    // The row conversions (F16C / AVX-512 where active) are what the CPU KV cache is written with.
    for_each_isa([&](cb::cpu_isa) {
        std::vector<uint16_t> row(v.size());
        cb::fp32_to_fp16_row(v.data(), row.data(), static_cast<int64_t>(v.size()));
        for (size_t i = 0; i < v.size(); ++i) {
            ASSERT_EQ(hd::f2h(v[i]), row[i]) << "f=" << v[i] << " bits=" << bits(v[i]);
        }
    });
}

// ---- dequantization -------------------------------------------------------------------------

// The traits' byte offsets are the CPU's block structs.
static_assert(hd::deq_q4_0::block_bytes == sizeof(cb::qimpl::block_q4_0), "q4_0");
static_assert(hd::deq_q4_1::block_bytes == sizeof(cb::qimpl::block_q4_1), "q4_1");
static_assert(hd::deq_q5_0::block_bytes == sizeof(cb::qimpl::block_q5_0), "q5_0");
static_assert(hd::deq_q5_1::block_bytes == sizeof(cb::qimpl::block_q5_1), "q5_1");
static_assert(hd::deq_q8_0::block_bytes == sizeof(cb::qimpl::block_q8_0), "q8_0");
static_assert(offsetof(cb::qimpl::block_q4_0, qs) == 2, "q4_0 qs");
static_assert(offsetof(cb::qimpl::block_q4_1, m) == 2 && offsetof(cb::qimpl::block_q4_1, qs) == 4,
              "q4_1 m, qs");
static_assert(offsetof(cb::qimpl::block_q5_0, qh) == 2 && offsetof(cb::qimpl::block_q5_0, qs) == 6,
              "q5_0 qh, qs");
static_assert(offsetof(cb::qimpl::block_q5_1, qh) == 4 && offsetof(cb::qimpl::block_q5_1, qs) == 8,
              "q5_1 qh, qs");
static_assert(offsetof(cb::qimpl::block_q8_0, qs) == 2, "q8_0 qs");
static_assert(hd::deq_q2_k::block_bytes == sizeof(cb::qimpl::block_q2_k), "q2_k");
static_assert(hd::deq_q3_k::block_bytes == sizeof(cb::qimpl::block_q3_k), "q3_k");
static_assert(hd::deq_q4_k::block_bytes == sizeof(cb::qimpl::block_q4_k), "q4_k");
static_assert(hd::deq_q5_k::block_bytes == sizeof(cb::qimpl::block_q5_k), "q5_k");
static_assert(hd::deq_q6_k::block_bytes == sizeof(cb::qimpl::block_q6_k), "q6_k");
static_assert(offsetof(cb::qimpl::block_q2_k, qs) == 16 &&
                  offsetof(cb::qimpl::block_q2_k, d) == 80 &&
                  offsetof(cb::qimpl::block_q2_k, dmin) == 82,
              "q2_k qs, d, dmin");
static_assert(offsetof(cb::qimpl::block_q3_k, qs) == 32 &&
                  offsetof(cb::qimpl::block_q3_k, scales) == 96 &&
                  offsetof(cb::qimpl::block_q3_k, d) == 108,
              "q3_k qs, scales, d");
static_assert(offsetof(cb::qimpl::block_q4_k, scales) == 4 &&
                  offsetof(cb::qimpl::block_q4_k, qs) == 16,
              "q4_k scales, qs");
static_assert(offsetof(cb::qimpl::block_q5_k, qh) == 16 &&
                  offsetof(cb::qimpl::block_q5_k, qs) == 48,
              "q5_k qh, qs");
static_assert(offsetof(cb::qimpl::block_q6_k, qh) == 128 &&
                  offsetof(cb::qimpl::block_q6_k, scales) == 192 &&
                  offsetof(cb::qimpl::block_q6_k, d) == 208,
              "q6_k qh, scales, d");

namespace {

// Byte offsets of a block's f16 scales.
std::vector<int> f16_scale_offsets(dtype type) {
    switch (type) {
        case dtype::q4_1:
        case dtype::q5_1:
        case dtype::q4_k:
        case dtype::q5_k: return {0, 2};
        case dtype::q2_k: return {80, 82};
        case dtype::q3_k: return {108};
        case dtype::q6_k: return {208};
        default: return {0};
    }
}

// Random rows of `type`: quantized real data, then the same bytes with random quants and random
// finite scales (every nibble / fifth bit / int8 pattern occurs).
template <typename T>
std::vector<uint8_t> random_rows(dtype type, int64_t n_rows, int64_t cols, uint32_t seed) {
    const size_t rb = cb::dtype_row_bytes(type, cols);
    std::vector<uint8_t> data(rb * n_rows);
    const std::vector<float> src = random_vec(size_t(n_rows * cols), seed, -3.f, 3.f);
    std::mt19937 rng(seed + 1);
    for (int64_t r = 0; r < n_rows; ++r) {
        uint8_t* row = data.data() + r * rb;
        cb::quantize_row(type, src.data() + r * cols, row, cols);
        if (r % 2 == 0 || T::block_elems == 1) continue;
        for (size_t b = 0; b < rb; ++b) row[b] = uint8_t(rng());
        // The block's f16 scales (d, and m or dmin) made finite halves, so comparisons are of
        // numbers, not of NaN payloads.
        for (int64_t blk = 0; blk < cols / T::block_elems; ++blk) {
            for (int off : f16_scale_offsets(type)) {
                const uint16_t h = cb::fp32_to_fp16(std::uniform_real_distribution<float>(
                    -2.f, 2.f)(rng));
                std::memcpy(row + blk * T::block_bytes + off, &h, 2);
            }
        }
    }
    return data;
}

template <typename T>
void check_dequant(dtype type) {
    SCOPED_TRACE(cb::dtype_name(type));
    const int64_t cols = 512, n_rows = 8;  // two K-quant super-blocks per row
    const size_t rb = cb::dtype_row_bytes(type, cols);
    const std::vector<uint8_t> data = random_rows<T>(type, n_rows, cols, 11);
    for_each_isa([&](cb::cpu_isa) {
        std::vector<float> cpu(static_cast<size_t>(cols));
        float blk[T::block_elems];
        for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t* row = data.data() + r * rb;
            cb::dequantize_row(type, row, cpu.data(), cols);
            for (int64_t c = 0; c < cols; ++c) {
                ASSERT_EQ(bits(hd::dequant_at<T>(row, c)), bits(cpu[size_t(c)]))
                    << "row " << r << " col " << c;
            }
            for (int64_t c0 = 0; c0 < cols; c0 += 8) {  // the GEMV's and staging's form
                float run[8];
                hd::dequant_run8<T>(row, c0, run);
                ASSERT_EQ(0, std::memcmp(run, cpu.data() + c0, sizeof run))
                    << "row " << r << " run at col " << c0;
            }
            for (int64_t b = 0; b < cols / T::block_elems; ++b) {
                hd::dequant_block<T>(row + b * T::block_bytes, blk);
                ASSERT_EQ(0, std::memcmp(blk, cpu.data() + b * T::block_elems,
                                         sizeof(float) * T::block_elems));
            }
        }
    });
}

}  // namespace

TEST(CudaDeviceMath, DequantMatchesCpu) {
    check_dequant<hd::deq_f32>(dtype::f32);
    check_dequant<hd::deq_f16>(dtype::f16);
    check_dequant<hd::deq_bf16>(dtype::bf16);
    check_dequant<hd::deq_q4_0>(dtype::q4_0);
    check_dequant<hd::deq_q4_1>(dtype::q4_1);
    check_dequant<hd::deq_q5_0>(dtype::q5_0);
    check_dequant<hd::deq_q5_1>(dtype::q5_1);
    check_dequant<hd::deq_q8_0>(dtype::q8_0);
    check_dequant<hd::deq_q2_k>(dtype::q2_k);
    check_dequant<hd::deq_q3_k>(dtype::q3_k);
    check_dequant<hd::deq_q4_k>(dtype::q4_k);
    check_dequant<hd::deq_q5_k>(dtype::q5_k);
    check_dequant<hd::deq_q6_k>(dtype::q6_k);
}

// ---- RMSNorm --------------------------------------------------------------------------------

TEST(CudaDeviceMath, RmsNormMatchesCpu) {
    cb::thread_pool pool(1);
    for (int64_t n : {1, 7, 64, 576, 1000}) {
        const std::vector<float> x = random_vec(size_t(n), uint32_t(n), -4.f, 4.f);
        const std::vector<float> g = random_vec(size_t(n), uint32_t(n) + 1, 0.5f, 1.5f);
        std::vector<float> dev(static_cast<size_t>(n));
        hd::rms_norm_row(x.data(), n, g.data(), 1e-5f, dev.data());
        for_each_isa([&](cb::cpu_isa) {
            std::vector<float> cpu(static_cast<size_t>(n));
            cb::rms_norm(pool, x.data(), 1, n, n, g.data(), 1e-5f, cpu.data(), n);
            ASSERT_EQ(0, std::memcmp(dev.data(), cpu.data(), sizeof(float) * size_t(n)))
                << "n=" << n;
        });
        // The kernel's order: 256 strided partials, xor-shuffle trees per warp, warps in order.
        // Reordering a double sum of floats must not move the result by more than an ulp.
        double part[256] = {};
        for (int64_t i = 0; i < n; ++i) part[i % 256] += hd::rms_sq_term(x[size_t(i)]);
        double warp_sum[8];
        for (int w = 0; w < 8; ++w) {
            double lane[32];
            for (int l = 0; l < 32; ++l) lane[l] = part[w * 32 + l];
            for (int off = 16; off > 0; off >>= 1) {
                double next[32];
                for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ off];
                std::memcpy(lane, next, sizeof(lane));
            }
            warp_sum[w] = lane[0];
        }
        double total = 0.0;
        for (double s : warp_sum) total += s;
        double serial = 0.0;
        for (int64_t i = 0; i < n; ++i) serial += hd::rms_sq_term(x[size_t(i)]);
        EXPECT_LE(ulp_diff(hd::rms_norm_scale(total, n, 1e-5f),
                           hd::rms_norm_scale(serial, n, 1e-5f)), 1);
    }
}

// ---- RoPE and KV relocation -----------------------------------------------------------------

namespace {

struct rope_case {
    cb::rope_style style;
    int head_dim, n_dims;
    float base, scale;
    bool factors;
};

const rope_case k_rope_cases[] = {
    {cb::rope_style::norm, 64, 64, 100000.f, 1.f, false},   // SmolLM2
    {cb::rope_style::norm, 128, 128, 500000.f, 1.f, true},  // Llama 3 with rope_freqs
    {cb::rope_style::neox, 64, 64, 1000000.f, 1.f, false},  // qwen2
    {cb::rope_style::neox, 96, 64, 10000.f, 0.25f, false},  // partial rotation, linear scaling
    {cb::rope_style::norm, 80, 48, 10000.f, 0.5f, true},
};

cb::rope_params params_of(const rope_case& rc, const std::vector<float>& factors) {
    cb::rope_params p;
    p.style = rc.style;
    p.n_dims = rc.n_dims;
    p.freq_base = rc.base;
    p.freq_scale = rc.scale;
    p.freq_factors = rc.factors ? factors.data() : nullptr;
    return p;
}

hd::rope_consts consts_of(const cb::rope_params& p, int head_dim) {
    return hd::rope_make_consts(p.style == cb::rope_style::neox, p.n_dims, p.freq_base,
                                p.freq_scale, p.freq_factors, head_dim);
}

}  // namespace

TEST(CudaDeviceMath, RopeMatchesCpu) {
    cb::thread_pool pool(1);
    const std::vector<int32_t> pos = {0, 1, 2, 17, 511, 4095, 65535, 65536, 200000, -3};
    const int n_head = 3;
    for (const rope_case& rc : k_rope_cases) {
        SCOPED_TRACE("head_dim " + std::to_string(rc.head_dim) + " n_dims " +
                     std::to_string(rc.n_dims));
        const std::vector<float> factors = random_vec(size_t(rc.n_dims / 2), 3, 1.f, 8.f);
        const cb::rope_params p = params_of(rc, factors);
        const int64_t ld = int64_t(n_head) * rc.head_dim + 5;
        const std::vector<float> x = random_vec(size_t(pos.size() * ld), 5, -2.f, 2.f);
        std::vector<float> cpu = x, dev = x;
        cb::rope(pool, cpu.data(), int64_t(pos.size()), ld, n_head, rc.head_dim, pos.data(), p);
        const hd::rope_consts k = consts_of(p, rc.head_dim);
        ASSERT_EQ(k.n_rot, rc.n_dims / 2);
        for (size_t r = 0; r < pos.size(); ++r) {
            for (int h = 0; h < n_head; ++h) {
                for (int i = 0; i < k.n_rot; ++i) {
                    hd::rope_pair(dev.data() + r * ld + h * rc.head_dim, k, pos[r], i);
                }
            }
        }
        ASSERT_EQ(0, std::memcmp(cpu.data(), dev.data(), sizeof(float) * cpu.size()));
    }
    // Parameters the CPU ignores rotate nothing.
    EXPECT_EQ(hd::rope_make_consts(false, 63, 1e4f, 1.f, nullptr, 64).n_rot, 0);
    EXPECT_EQ(hd::rope_make_consts(false, 66, 1e4f, 1.f, nullptr, 64).n_rot, 0);
}

TEST(CudaDeviceMath, RelocateKvMatchesCpu) {
    cb::thread_pool pool(2);
    const int n_kv_head = 3;
    for (const rope_case& rc : k_rope_cases) {
        SCOPED_TRACE("head_dim " + std::to_string(rc.head_dim) + " n_dims " +
                     std::to_string(rc.n_dims));
        const std::vector<float> factors = random_vec(size_t(rc.n_dims / 2), 3, 1.f, 8.f);
        const cb::rope_params p = params_of(rc, factors);
        const int64_t width = int64_t(n_kv_head) * rc.head_dim, ld_src = width + 2;
        const int64_t n = 12, n_ctx = 64, ld_cache = width + 4;
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = int32_t(5 * i + 3);  // scattered rows
        const std::vector<float> k = random_vec(size_t(n * ld_src), 7, -3.f, 3.f);
        const std::vector<uint16_t> k16 = to_f16(k);
        const std::vector<uint16_t> v = to_f16(random_vec(size_t(n * ld_src), 8, -3.f, 3.f));
        std::vector<uint16_t> kc(size_t(n_ctx * ld_cache), 0x7777), vc = kc;
        std::vector<uint16_t> kd = kc, vd = vc;
        cb::relocate_kv(pool, k.data(), cb::dtype::f32, v.data(), n, ld_src, pos.data(), n_kv_head,
                        rc.head_dim, p, kc.data(), vc.data(), ld_cache);
        const hd::rope_consts kk = consts_of(p, rc.head_dim);
        // The device's pairs from f32 keys, then from f16 keys against the CPU's from f16 keys.
        const auto pairs = [&](const auto* keys, std::vector<uint16_t>* kout,
                               std::vector<uint16_t>* vout) {
            for (int64_t i = 0; i < n; ++i) {
                for (int h = 0; h < n_kv_head; ++h) {
                    const int64_t src = i * ld_src + h * rc.head_dim;
                    const int64_t dst = int64_t(pos[size_t(i)]) * ld_cache + h * rc.head_dim;
                    for (int pr = 0; pr < (rc.head_dim + 1) / 2; ++pr) {
                        hd::relocate_pair(keys + src, v.data() + src, kout->data() + dst,
                                          vout->data() + dst, rc.head_dim, kk, pos[size_t(i)], pr);
                    }
                }
            }
        };
        pairs(k.data(), &kd, &vd);
        ASSERT_EQ(kc, kd);
        ASSERT_EQ(vc, vd);
        std::vector<uint16_t> kc16(kc.size(), 0x7777), vc16 = kc16, kd16 = kc16, vd16 = kc16;
        cb::relocate_kv(pool, k16.data(), cb::dtype::f16, v.data(), n, ld_src, pos.data(),
                        n_kv_head, rc.head_dim, p, kc16.data(), vc16.data(), ld_cache);
        pairs(k16.data(), &kd16, &vd16);
        ASSERT_EQ(kc16, kd16);
        ASSERT_EQ(vc16, vd16);
        // f16 keys rotate to the bits of the same keys widened to f32 first (the path before
        // keys stayed f16 on the way).
        std::vector<float> widened(k16.size());
        for (size_t i = 0; i < k16.size(); ++i) widened[i] = cb::fp16_to_fp32(k16[i]);
        std::vector<uint16_t> kw(kc.size(), 0x7777), vw = kw;
        cb::relocate_kv(pool, widened.data(), cb::dtype::f32, v.data(), n, ld_src, pos.data(),
                        n_kv_head, rc.head_dim, p, kw.data(), vw.data(), ld_cache);
        ASSERT_EQ(kc16, kw);
    }
    std::vector<uint16_t> any(64);
    const int32_t at = 0;
    EXPECT_THROW(cb::relocate_kv(pool, any.data(), cb::dtype::q8_0, any.data(), 1, 8, &at, 1, 8,
                                 cb::rope_params{}, any.data(), any.data(), 8),
                 cb::kernel_error)
        << "keys are f32 or f16";
}

// ---- f16 staging of GEMM activations --------------------------------------------------------

TEST(CudaDeviceMath, F16StageExponentBringsLargeRowsIntoRange) {
    const float inf = std::numeric_limits<float>::infinity();
    for (float amax : {0.f, 1e-42f, 1.f, 32767.996f, std::nextafter(32768.f, 0.f)}) {
        EXPECT_EQ(hd::f16_stage_exponent(amax), 0) << amax;
    }
    EXPECT_EQ(hd::f16_stage_exponent(inf), 0);
    EXPECT_EQ(hd::f16_stage_exponent(std::numeric_limits<float>::quiet_NaN()), 0);
    EXPECT_EQ(hd::f16_stage_exponent(32768.f), -1);
    EXPECT_EQ(hd::f16_stage_exponent(65504.f), -1);
    EXPECT_EQ(hd::f16_stage_exponent(65536.f), -2);
    EXPECT_EQ(hd::f16_stage_exponent(std::numeric_limits<float>::max()), -113);
    // Log-uniform maxima from 2^15 to FLT_MAX: the scaled maximum lies in [2^14, 2^15).
    std::mt19937 rng(31);
    std::uniform_real_distribution<float> log2_dist(15.f, 127.99f);
    for (int i = 0; i < 100000; ++i) {
        const float amax = std::exp2(log2_dist(rng));
        if (!std::isfinite(amax)) continue;
        const int e = hd::f16_stage_exponent(amax);
        ASSERT_LT(e, 0) << amax;
        const float scaled = hd::f16_stage(amax, e);
        ASSERT_EQ(scaled, std::ldexp(amax, e)) << amax;  // a power of two: exact
        ASSERT_GE(scaled, 16384.f) << amax;
        ASSERT_LT(scaled, 32768.f) << amax;
        ASSERT_EQ(hd::f16_unstage(scaled, e), amax) << amax;
    }
}

TEST(CudaDeviceMath, F16StagingKeepsRowsThatFitAndRescuesRowsThatDoNot) {
    const int64_t k = 4096;
    std::vector<float> x = random_vec(size_t(k), 41, -300.f, 300.f);
    const std::vector<uint16_t> w = to_f16(random_vec(size_t(k), 42, -0.05f, 0.05f));
    // A row below 2^15 is staged exactly as a plain cast.
    x[7] = 32767.f;
    x[8] = -30000.5f;
    float amax = 0.f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    ASSERT_EQ(hd::f16_stage_exponent(amax), 0);
    for (float v : x) ASSERT_EQ(hd::f2h(hd::f16_stage(v, 0)), cb::fp32_to_fp16(v)) << v;

    // "Massive activations": a few entries far beyond f16. A plain cast makes them inf; the
    // staged row keeps every value to f16's relative precision, so the dot product is within
    // f16 rounding of the exact one.
    x[100] = 3.1e5f;
    x[2000] = -1.7e6f;
    x[3000] = 9.0e5f;
    amax = 0.f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const int e = hd::f16_stage_exponent(amax);
    ASSERT_LT(e, 0);
    double exact = 0.0, plain = 0.0, staged = 0.0, bound = 0.0;
    for (int64_t c = 0; c < k; ++c) {
        const double wc = cb::fp16_to_fp32(w[size_t(c)]);
        const float xc = x[size_t(c)];
        exact += double(xc) * wc;
        plain += double(cb::fp16_to_fp32(cb::fp32_to_fp16(xc))) * wc;
        staged += double(hd::h2f(hd::f2h(hd::f16_stage(xc, e)))) * wc;
        // f16 rounding: half an ulp of 11 bits, or of the smallest normal for subnormal results.
        bound += std::fabs(wc) * std::max(std::fabs(double(xc)) * 0x1p-11, std::ldexp(0x1p-25, -e));
    }
    EXPECT_FALSE(std::isfinite(plain));
    const float y = hd::f16_unstage(static_cast<float>(staged), e);
    EXPECT_NEAR(double(y), exact, bound + 1e-6 * std::fabs(exact));
    // The scale-back is an exact power of two, and a row with exponent 0 is left bit for bit.
    EXPECT_EQ(hd::f16_unstage(1.5f, -3), 12.f);
    EXPECT_EQ(bits(hd::f16_unstage(-0.f, 0)), bits(-0.f));
    EXPECT_TRUE(std::isnan(hd::f16_unstage(std::numeric_limits<float>::quiet_NaN(), -4)));
}

// ---- SwiGLU, KV deviation -------------------------------------------------------------------

TEST(CudaDeviceMath, SwigluMatchesCpu) {
    cb::thread_pool pool(1);
    const int64_t n = 1000;
    std::vector<float> gate = random_vec(size_t(n), 21, -12.f, 12.f);
    gate[0] = 0.f;
    gate[1] = -100.f;  // exp overflow side
    gate[2] = 100.f;
    const std::vector<float> up = random_vec(size_t(n), 22, -3.f, 3.f);
    std::vector<float> dev(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) dev[size_t(i)] = hd::swiglu(gate[size_t(i)], up[size_t(i)]);
    for_each_isa([&](cb::cpu_isa isa) {
        std::vector<float> cpu(static_cast<size_t>(n));
        cb::swiglu(pool, gate.data(), up.data(), 1, n, n, cpu.data());
        for (int64_t i = 0; i < n; ++i) {
            const float a = dev[size_t(i)], b = cpu[size_t(i)];
            if (isa == cb::cpu_isa::generic) {
                ASSERT_EQ(bits(a), bits(b)) << "gate=" << gate[size_t(i)];
            } else {  // ggml's vector expf: a few ulp of the quotient
                ASSERT_NEAR(a, b, 4e-7f * std::fabs(b) + 1e-30f) << "gate=" << gate[size_t(i)];
            }
        }
    });
}

TEST(CudaDeviceMath, KvDeviationMatchesCpu) {
    cb::thread_pool pool(2);
    const int64_t n = 40, width = 192, ld_f = width + 3, ld_c = width + 7;
    const std::vector<float> fresh = random_vec(size_t(n * ld_f), 31, -2.f, 2.f);
    std::vector<uint16_t> cached = to_f16(random_vec(size_t(n * ld_c), 32, -2.f, 2.f));
    for (int64_t j = 0; j < width; ++j) cached[size_t(j)] = cb::fp32_to_fp16(fresh[size_t(j)]);
    std::vector<float> cpu(static_cast<size_t>(n));
    cb::kv_deviation(pool, fresh.data(), ld_f, cached.data(), ld_c, n, width, cpu.data());
    for (int64_t i = 0; i < n; ++i) {
        const float dev = hd::kv_deviation_row(fresh.data() + i * ld_f, cached.data() + i * ld_c,
                                               width);
        ASSERT_EQ(bits(dev), bits(cpu[size_t(i)])) << "row " << i;
    }
}

// The query policies' attention mass: the serial device reference (the scores bit-identical, the
// softmax and sums in the CPU's order) gives the CPU's bits on the host.
TEST(CudaDeviceMath, AttentionMassMatchesCpu) {
    cb::thread_pool pool(1);
    const int n_head = 4, n_kv_head = 2, head_dim = 64;
    const int64_t n_q = 3, n_keys = 50, q_stride = n_head * head_dim + 3;
    const int64_t kv_stride = n_kv_head * head_dim + 5;
    const std::vector<float> q = random_vec(size_t(n_q * q_stride), 41, -1.f, 1.f);
    const std::vector<uint16_t> k = to_f16(random_vec(size_t(n_keys * kv_stride), 42, -1.f, 1.f));
    const std::vector<int32_t> q_pos = {20, 35, 49};
    cb::attention_args a;
    a.q = q.data();
    a.n_q = n_q;
    a.q_stride = q_stride;
    a.q_pos = q_pos.data();
    a.k = k.data();
    a.kv_stride = kv_stride;
    a.n_keys = n_keys;
    a.n_head = n_head;
    a.n_kv_head = n_kv_head;
    a.head_dim = head_dim;
    a.scale = 0.125f;
    std::vector<float> cpu(size_t(n_keys), -1.f);
    cb::attention_mass(pool, a, cpu.data());

    std::vector<float> p(size_t(n_q * n_head * n_keys), 0.f);
    for (int64_t i = 0; i < n_q; ++i) {
        for (int h = 0; h < n_head; ++h) {
            const int64_t r = i * n_head + h;
            hd::attention_probs_row(q.data() + i * q_stride + h * head_dim,
                                    k.data() + (h / (n_head / n_kv_head)) * head_dim, kv_stride,
                                    head_dim, std::min<int64_t>(n_keys, q_pos[size_t(i)] + 1),
                                    a.scale, p.data() + r * n_keys);
        }
    }
    for (int64_t j = 0; j < n_keys; ++j) {
        float s = 0.f;
        for (int64_t r = 0; r < n_q * n_head; ++r) s += p[size_t(r * n_keys + j)];
        ASSERT_EQ(bits(s), bits(cpu[size_t(j)])) << "key " << j;
    }
    // Keys past the last query's position get nothing; every row's probabilities sum to 1.
    EXPECT_GT(cpu[49], 0.f);
    float total = 0.f;
    for (float v : cpu) total += v;
    EXPECT_NEAR(total, float(n_q * n_head), 1e-4f);
}

// ---- online softmax (attention) -------------------------------------------------------------

namespace {

// The CUDA kernel's algorithm for one (query, head) on the host: its "warps" take keys
// round-robin, each folds its keys into its own state and accumulator, then the states merge in
// warp order (kernels/cuda/attention.cu).
std::vector<float> online_softmax_attend(const float* q, const uint16_t* k, const uint16_t* v,
                                         int64_t ld, int64_t n_visible, int d, float scale) {
    constexpr int k_warps = hd::k_attn_row_warps;
    const float qscale = scale * 1.4426950408889634f;
    std::vector<float> qs(static_cast<size_t>(d));
    for (int c = 0; c < d; ++c) qs[size_t(c)] = q[c] * qscale;
    hd::softmax_state st[k_warps];
    std::vector<float> o(static_cast<size_t>(k_warps * d), 0.f);
    for (int w = 0; w < k_warps; ++w) {
        st[w] = hd::softmax_empty();
        for (int64_t j = w; j < n_visible; j += k_warps) {
            float s = 0.f;
            for (int c = 0; c < d; ++c) s = std::fma(qs[size_t(c)], hd::h2f(k[j * ld + c]), s);
            float alpha, p;
            hd::softmax_step(&st[w], s, &alpha, &p);
            for (int c = 0; c < d; ++c) {
                float& acc = o[size_t(w * d + c)];
                acc = hd::softmax_acc(acc, alpha, p, hd::h2f(v[j * ld + c]));
            }
        }
    }
    float wgt[k_warps] = {1.f};
    hd::softmax_state all = st[0];
    for (int w = 1; w < k_warps; ++w) {
        float wa, wb;
        hd::softmax_merge(&all, st[w], &wa, &wb);
        for (int u = 0; u < w; ++u) wgt[u] *= wa;
        wgt[w] = wb;
    }
    std::vector<float> out(static_cast<size_t>(d));
    for (int c = 0; c < d; ++c) {
        float acc = 0.f;
        for (int w = 0; w < k_warps; ++w) acc = std::fma(o[size_t(w * d + c)], wgt[w], acc);
        out[size_t(c)] = hd::softmax_finish(acc, all);
    }
    return out;
}

}  // namespace

TEST(CudaDeviceMath, OnlineSoftmaxAttentionMatchesCpu) {
    cb::thread_pool pool(2);
    const int n_head = 4, n_kv_head = 2, d = 64;
    const int64_t n_keys = 150, ld = int64_t(n_kv_head) * d;
    const std::vector<int32_t> q_pos = {0, 1, 5, 63, 64, 100, 149, 400, -1};
    const int64_t n_q = int64_t(q_pos.size()), q_ld = int64_t(n_head) * d;
    // Large scores stress the running max (a softmax without it overflows exp2).
    const std::vector<float> q = random_vec(size_t(n_q * q_ld), 41, -6.f, 6.f);
    const std::vector<uint16_t> k = to_f16(random_vec(size_t(n_keys * ld), 42, -3.f, 3.f));
    const std::vector<uint16_t> v = to_f16(random_vec(size_t(n_keys * ld), 43, -1.f, 1.f));
    for_each_isa([&](cb::cpu_isa isa) {
        // The AVX-512 path is ggml's CPU flash attention bit for bit, which rounds Q to f16 and
        // accumulates V in f16 for short batches; the other levels accumulate in f32.
        const float atol = isa >= cb::cpu_isa::avx512 ? 3e-3f : 2e-5f;
        const float rtol = isa >= cb::cpu_isa::avx512 ? 3e-3f : 2e-5f;
        std::vector<float> cpu(static_cast<size_t>(n_q * q_ld), -7.f);
        cb::attention_args a;
        a.q = q.data();
        a.n_q = n_q;
        a.q_stride = q_ld;
        a.q_pos = q_pos.data();
        a.k = k.data();
        a.v = v.data();
        a.kv_stride = ld;
        a.n_keys = n_keys;
        a.n_head = n_head;
        a.n_kv_head = n_kv_head;
        a.head_dim = d;
        a.scale = 1.f / std::sqrt(float(d));
        a.out = cpu.data();
        a.out_stride = q_ld;
        cb::attention(pool, a);
        for (int64_t i = 0; i < n_q; ++i) {
            const int64_t vis =
                std::max<int64_t>(0, std::min<int64_t>(n_keys, q_pos[size_t(i)] + 1));
            for (int h = 0; h < n_head; ++h) {
                const int g = h / (n_head / n_kv_head);
                const std::vector<float> dev = online_softmax_attend(
                    q.data() + i * q_ld + h * d, k.data() + g * d, v.data() + g * d, ld, vis, d,
                    a.scale);
                for (int c = 0; c < d; ++c) {
                    const float ref = cpu[size_t(i * q_ld + h * d + c)];
                    ASSERT_NEAR(dev[size_t(c)], ref, atol + rtol * std::fabs(ref))
                        << "query " << i << " head " << h << " dim " << c;
                }
            }
        }
    });
}

TEST(CudaDeviceMath, OnlineSoftmaxEdgeCases) {
    // Masked scores into an empty state leave it empty; an empty state finishes to 0.
    hd::softmax_state st = hd::softmax_empty();
    float alpha = -1.f, p = -1.f;
    hd::softmax_step(&st, hd::neg_inf(), &alpha, &p);
    EXPECT_EQ(alpha, 1.f);
    EXPECT_EQ(p, 0.f);
    EXPECT_EQ(hd::softmax_finish(0.f, st), 0.f);
    // Merging with an empty partial keeps the other one's weight.
    hd::softmax_state a = hd::softmax_empty();
    hd::softmax_step(&a, 3.f, &alpha, &p);
    EXPECT_EQ(alpha, 0.f);
    EXPECT_EQ(p, 1.f);
    float wa = 0.f, wb = 0.f;
    hd::softmax_merge(&a, hd::softmax_empty(), &wa, &wb);
    EXPECT_EQ(wa, 1.f);
    EXPECT_EQ(wb, 0.f);
    EXPECT_EQ(a.l, 1.f);
    // Two keys folded one by one equal the two-way softmax.
    hd::softmax_state s2 = hd::softmax_empty();
    float o = 0.f;
    hd::softmax_step(&s2, 1.f, &alpha, &p);
    o = hd::softmax_acc(o, alpha, p, 10.f);
    hd::softmax_step(&s2, 2.f, &alpha, &p);
    o = hd::softmax_acc(o, alpha, p, 20.f);
    const double w1 = std::exp2(1.0), w2 = std::exp2(2.0);
    EXPECT_NEAR(hd::softmax_finish(o, s2), (10 * w1 + 20 * w2) / (w1 + w2), 1e-5);
}

// ---- attention on the GEMM path --------------------------------------------------------------

namespace {

// gemm_args' semantics (kernels/cuda/gemm.cuh) on the host for one planned step: f16 operands,
// products summed in double (cuBLASLt sums in f32 in its own order; this is the exact product).
void reference_gemm(const hd::attn_gemm_step& st, const uint16_t* w, const uint16_t* x, float* y) {
    for (int b = 0; b < st.batch; ++b) {
        const uint16_t* wb = w + st.w_off + b * st.stride_w;
        const uint16_t* xb = x + st.x_off + b * st.stride_x;
        float* yb = y + st.y_off + b * st.stride_y;
        for (int64_t i = 0; i < st.m; ++i) {
            for (int64_t j = 0; j < st.n; ++j) {
                double acc = 0.0;
                for (int64_t c = 0; c < st.k; ++c) {
                    const uint16_t wv = st.w_kn ? wb[c * st.ldw + j] : wb[j * st.ldw + c];
                    acc += double(hd::h2f(xb[i * st.ldx + c])) * double(hd::h2f(wv));
                }
                yb[i * st.ldy + j] = static_cast<float>(acc);
            }
        }
    }
}

// The CUDA GEMM path (kernels/cuda/attention-gemm.cu) step by step on the host: its plan, the
// staging kernel's per-row exponent, the reference GEMM for cuBLASLt and the causal softmax
// kernel's arithmetic. S and P start as NaN, so a read of an entry no step wrote shows.
void attention_gemm_path(const cb::attention_args& a, int n_kv, size_t chunk_bytes) {
    const hd::attn_gemm_layout l =
        hd::attn_gemm_layout_of(a.n_q, a.n_keys, a.n_head, n_kv, a.head_dim, chunk_bytes);
    const size_t probs = size_t(l.n_head * l.chunk * l.ld);
    std::vector<uint16_t> qh(size_t(l.chunk * l.width));
    std::vector<int32_t> exps(size_t(l.chunk));
    std::vector<float> s(probs, std::numeric_limits<float>::quiet_NaN());
    std::vector<uint16_t> p(probs, 0x7e00);
    std::vector<float> sums(size_t(l.n_head * l.chunk), std::numeric_limits<float>::quiet_NaN());
    for (int64_t i0 = 0; i0 < a.n_q; i0 += l.chunk) {
        const int64_t rows = std::min(l.chunk, a.n_q - i0);
        for (int64_t r = 0; r < rows; ++r) {
            const float* x = a.q + (i0 + r) * a.q_stride;
            float amax = 0.f;
            for (int64_t c = 0; c < l.width; ++c) amax = std::max(amax, std::fabs(x[c]));
            const int e = hd::f16_stage_exponent(amax);
            exps[size_t(r)] = e;
            for (int64_t c = 0; c < l.width; ++c) {
                qh[size_t(r * l.width + c)] = hd::f2h(hd::f16_stage(x[c], e));
            }
        }
        for (int64_t hh = 0; hh < l.group; ++hh) {
            reference_gemm(hd::attn_scores_step(l, a.kv_stride, a.n_keys, rows, hh), a.k, qh.data(),
                           s.data());
        }
        for (int64_t h = 0; h < l.n_head; ++h) {
            for (int64_t r = 0; r < rows; ++r) {
                float* sr = s.data() + hd::attn_prob_row(h, r, l.chunk, l.ld);
                uint16_t* pr = p.data() + hd::attn_prob_row(h, r, l.chunk, l.ld);
                const int64_t limit = hd::attn_visible_keys(a.q_pos[i0 + r], a.n_keys);
                float mx = -FLT_MAX, sum = 0.f;
                for (int64_t j = 0; j < limit; ++j) {
                    sr[j] = hd::attn_gemm_score(sr[j], exps[size_t(r)], a.scale);
                    mx = std::max(mx, sr[j]);
                }
                for (int64_t j = 0; j < a.n_keys; ++j) {
                    pr[j] = hd::f2h(j < limit ? std::exp(sr[j] - mx) : 0.f);
                    sum += hd::h2f(pr[j]);
                }
                sums[size_t(h * l.chunk + r)] = sum;
            }
        }
        for (int64_t hh = 0; hh < l.group; ++hh) {
            reference_gemm(hd::attn_values_step(l, a.kv_stride, a.n_keys, a.out_stride, i0, rows,
                                                hh),
                           a.v, p.data(), a.out);
        }
        for (int64_t r = 0; r < rows; ++r) {  // the scale kernel
            for (int64_t h = 0; h < l.n_head; ++h) {
                const float f = hd::attn_gemm_out_scale(sums[size_t(h * l.chunk + r)]);
                float* o = a.out + (i0 + r) * a.out_stride + h * l.d;
                for (int64_t c = 0; c < l.d; ++c) o[c] = hd::mul_rn(o[c], f);
            }
        }
    }
}

}  // namespace

// The GEMM path's plan against the CPU attention: GQA, MHA, MQA, chunked and not, padded rows,
// CacheBlend's scattered positions, queries with no visible key or past the keys, and a flat
// attention over 20000 keys. The f16 Q and P leave an error of a few 2^-11 relative per output;
// the padding of the output stays untouched.
TEST(CudaDeviceMath, AttentionGemmPathMatchesCpu) {
    struct gcase {
        int n_head, n_kv, d;
        int64_t n_keys;
        std::vector<int32_t> pos;
        int64_t chunk_rows;  // 0: one chunk
    };
    std::vector<int32_t> prefill(200), blend;
    for (int32_t i = 0; i < 200; ++i) prefill[size_t(i)] = i;
    for (int32_t i = 3; i < 150; i += 4) blend.push_back(i);
    blend.insert(blend.end(), {-1, 170, 149, 0, 160});
    const gcase cases[] = {
        {9, 3, 64, 200, prefill, 0},   // SmolLM2 shape
        {9, 3, 64, 200, prefill, 37},  // chunks of 37 rows (5 full and one of 15)
        {12, 2, 128, 150, blend, 16},  // Qwen2.5-1.5B shape, scattered rows, chunked
        {4, 4, 64, 90, prefill, 64},   // MHA, queries past the keys
        {8, 1, 80, 130, blend, 0},     // MQA, d = 80
        {9, 3, 64, 20000, {19999, 18000, 5, 19999, 12000}, 0},  // flat over 20000 keys
    };
    cb::thread_pool pool(2);
    for (const gcase& gc : cases) {
        SCOPED_TRACE(std::to_string(gc.n_head) + "/" + std::to_string(gc.n_kv) +
                     " d=" + std::to_string(gc.d) + " chunk=" + std::to_string(gc.chunk_rows));
        const int64_t n_q = int64_t(gc.pos.size()), width = int64_t(gc.n_head) * gc.d;
        const int64_t q_ld = width + 4, kv_ld = int64_t(gc.n_kv) * gc.d + 8;
        // Peaked attention for the short cases; near-flat for the long one, where weights of
        // 1/n_keys would lie below f16's normal range if the path divided before P V.
        const float qr = gc.n_keys > 1000 ? 0.05f : 3.f;
        const std::vector<float> q = random_vec(size_t(n_q * q_ld), 51, -qr, qr);
        const std::vector<uint16_t> k =
            to_f16(random_vec(size_t(gc.n_keys * kv_ld), 52, -2.f, 2.f));
        const std::vector<uint16_t> v = to_f16(random_vec(size_t(gc.n_keys * kv_ld), 53));
        cb::attention_args a;
        a.q = q.data();
        a.n_q = n_q;
        a.q_stride = q_ld;
        a.q_pos = gc.pos.data();
        a.k = k.data();
        a.v = v.data();
        a.kv_stride = kv_ld;
        a.n_keys = gc.n_keys;
        a.n_head = gc.n_head;
        a.n_kv_head = gc.n_kv;
        a.head_dim = gc.d;
        a.scale = 1.f / std::sqrt(float(gc.d));
        a.out_stride = q_ld;
        std::vector<float> cpu(size_t(n_q * q_ld), -7.f), dev(cpu);
        a.out = cpu.data();
        cb::attention(pool, a);
        a.out = dev.data();
        const size_t row_bytes = size_t(gc.n_head) * (size_t((gc.n_keys + 7) / 8 * 8) * 6 + 4);
        attention_gemm_path(a, gc.n_kv,
                            gc.chunk_rows ? size_t(gc.chunk_rows) * row_bytes : size_t(256) << 20);
        double num = 0.0, den = 0.0;
        for (int64_t i = 0; i < n_q; ++i) {
            for (int64_t c = 0; c < q_ld; ++c) {
                const float want = cpu[size_t(i * q_ld + c)], got = dev[size_t(i * q_ld + c)];
                if (c >= width) {
                    ASSERT_EQ(got, -7.f) << "padding written, row " << i;
                    continue;
                }
                ASSERT_TRUE(std::isfinite(got)) << "row " << i << " col " << c;
                ASSERT_NEAR(got, want, 4e-3 + 4e-3 * std::fabs(want))
                    << "row " << i << " col " << c;
                num += double(got - want) * double(got - want);
                den += double(want) * double(want);
            }
        }
        EXPECT_LT(num / den, 1e-5);
    }
}
