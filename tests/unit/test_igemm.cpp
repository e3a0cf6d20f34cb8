// The integer GEMM (kernels/cpu/igemm.h): the AVX-512 prefill GEMM and decode GEMV give the bits of
// the scalar reference of the canonical sequence for every output, matmul gives them at every
// batch size, row offset and thread count, and the result is the dot product of the dequantized
// weights with the activations up to int8 activation rounding. Weights are random bytes (every
// bit pattern is a valid block once the f16 scales are finite), so extreme scales, mins and values
// are covered, not only what a quantizer produces.
#include "kernels/cpu/igemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants.h"
#include "kernels/fp16.h"

namespace cb = cacheblend;
using cb::dtype;

namespace {

const dtype k_types[] = {dtype::q4_0, dtype::q5_0, dtype::q4_k, dtype::q5_k, dtype::q6_k};

// Offsets of the f16 scales inside a block (d, and dmin where present).
std::vector<size_t> scale_offsets(dtype t) {
    switch (t) {
        case dtype::q4_0:
        case dtype::q5_0: return {0};
        case dtype::q4_k:
        case dtype::q5_k: return {0, 2};
        case dtype::q6_k: return {208};
        default: return {};
    }
}

struct raw_weights {
    dtype type;
    int64_t rows, cols;
    size_t row_bytes;
    std::vector<unsigned char> data;
    cb::weight_view view() const {
        cb::weight_view w;
        w.type = type;
        w.data = data.data();
        w.rows = rows;
        w.cols = cols;
        w.row_bytes = row_bytes;
        return w;
    }
};

raw_weights random_weights(dtype t, int64_t rows, int64_t cols, uint32_t seed) {
    raw_weights w{t, rows, cols, cb::dtype_row_bytes(t, cols), {}};
    w.data.resize(w.row_bytes * rows);
    std::mt19937 rng(seed);
    for (auto& b : w.data) b = static_cast<unsigned char>(rng());
    const cb::dtype_traits* tr = cb::dtype_info(t);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (size_t o = 0; o < w.data.size(); o += tr->block_bytes) {
        for (size_t s : scale_offsets(t)) {
            const uint16_t h = cb::fp32_to_fp16(scale(rng));
            std::memcpy(&w.data[o + s], &h, 2);
        }
    }
    return w;
}

std::vector<float> random_acts(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(rng);
    return v;
}

bool have_kernels() { return cb::igemm::active(dtype::q4_k); }

// The scalar reference's outputs, [m][n].
std::vector<float> reference_outputs(const raw_weights& w, const cb::igemm::acts& a, int64_t m) {
    std::vector<float> ref(static_cast<size_t>(m * w.rows));
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < w.rows; ++r) {
            ref[i * w.rows + r] =
                cb::igemm::reference_dot(w.type, w.cols, w.data.data() + r * w.row_bytes, a, i);
        }
    }
    return ref;
}

}  // namespace

TEST(Igemm, KernelsMatchReferenceBitForBit) {
    if (!have_kernels()) GTEST_SKIP() << "no AVX-512 VNNI on this machine: the kernels cannot run";
    for (dtype t : k_types) {
        SCOPED_TRACE(cb::dtype_name(t));
        // n not a multiple of the panel width; an odd number of blocks for q4_0/q5_0 (the decode
        // kernel takes them in pairs)
        const int64_t k = cb::igemm::info(t)->group == 32 ? 800 : 768, n = 70, m = 11;
        const raw_weights w = random_weights(t, n, k, 7);
        const std::vector<float> x = random_acts(m * k, 8);
        cb::igemm::act_buffer buf;
        buf.reserve(t, k, m);
        buf.quantize_rows(x.data(), k, 0, m);
        const cb::igemm::acts a = buf.view();
        const std::vector<float> ref = reference_outputs(w, a, m);
        std::vector<float> g(ref.size()), v(ref.size());
        cb::igemm::gemm_rows(t, k, w.data.data(), w.row_bytes, n, a, 0, m, g.data(), n);
        cb::igemm::gemv_rows(t, k, w.data.data(), w.row_bytes, n, a, 0, m, v.data(), n);
        // One activation row at a time: what decode runs (the K-quants have their own kernel)
        std::vector<float> v1(ref.size());
        for (int64_t i = 0; i < m; ++i) {
            cb::igemm::gemv_rows(t, k, w.data.data(), w.row_bytes, n, a, i, 1, v1.data() + i * n,
                                 n);
        }
        for (size_t e = 0; e < ref.size(); ++e) {
            ASSERT_EQ(0, std::memcmp(&ref[e], &g[e], 4)) << "gemm, output " << e << ": " << ref[e] << " vs " << g[e];
            ASSERT_EQ(0, std::memcmp(&ref[e], &v[e], 4)) << "gemv, output " << e << ": " << ref[e] << " vs " << v[e];
            ASSERT_EQ(0, std::memcmp(&ref[e], &v1[e], 4))
                << "gemv of one row, output " << e << ": " << ref[e] << " vs " << v1[e];
        }
    }
}

TEST(Igemm, ReferenceIsTheDequantizedDotProduct) {
    for (dtype t : k_types) {
        SCOPED_TRACE(cb::dtype_name(t));
        const int64_t k = 512, n = 9, m = 3;
        const raw_weights w = random_weights(t, n, k, 11);
        const std::vector<float> x = random_acts(m * k, 12);
        cb::igemm::act_buffer buf;
        buf.reserve(t, k, m);
        buf.quantize_rows(x.data(), k, 0, m);
        std::vector<float> deq(static_cast<size_t>(k));
        for (int64_t r = 0; r < n; ++r) {
            cb::dequantize_row(t, w.data.data() + r * w.row_bytes, deq.data(), k);
            for (int64_t i = 0; i < m; ++i) {
                double exact = 0, mag = 0;
                for (int64_t e = 0; e < k; ++e) {
                    exact += double(deq[e]) * x[i * k + e];
                    mag += std::fabs(double(deq[e]) * x[i * k + e]);
                }
                const float got = cb::igemm::reference_dot(t, k, w.data.data() + r * w.row_bytes, buf.view(), i);
                // int8 activations: each product off by at most half a step of its group's scale.
                EXPECT_NEAR(got, exact, 0.01 * mag + 1e-4) << "row " << r << " act " << i;
            }
        }
    }
}

TEST(Igemm, MatmulIsBatchInvariantAndThreadInvariant) {
    if (!have_kernels()) GTEST_SKIP() << "no AVX-512 VNNI on this machine";
    for (dtype t : k_types) {
        SCOPED_TRACE(cb::dtype_name(t));
        const int64_t k = cb::igemm::info(t)->group == 32 ? 544 : 512, n = 100, m_all = 70;
        const raw_weights w = random_weights(t, n, k, 21);
        const std::vector<float> x = random_acts(m_all * k, 22);
        cb::igemm::act_buffer buf;
        buf.reserve(t, k, m_all);
        buf.quantize_rows(x.data(), k, 0, m_all);
        const std::vector<float> ref = reference_outputs(w, buf.view(), m_all);
        for (int nth : {1, 2, 3}) {
            cb::thread_pool pool(nth);
            for (int64_t m : {1, 2, 3, 8, 9, 17, 64, 70}) {
                for (int64_t off : {int64_t(0), m_all - m}) {
                    std::vector<float> y(static_cast<size_t>(m * n));
                    cb::matmul(pool, w.view(), x.data() + off * k, m, k, y.data(), n, nullptr);
                    ASSERT_EQ(0, std::memcmp(y.data(), ref.data() + off * n, y.size() * 4))
                        << "threads=" << nth << " m=" << m << " off=" << off;
                }
            }
        }
    }
}

TEST(Igemm, CoversTheRealModelTypesOnly) {
    for (dtype t : k_types) EXPECT_NE(cb::igemm::info(t), nullptr) << cb::dtype_name(t);
    for (dtype t : {dtype::f32, dtype::f16, dtype::q4_1, dtype::q8_0, dtype::q5_1, dtype::q2_k, dtype::q3_k}) {
        EXPECT_EQ(cb::igemm::info(t), nullptr) << cb::dtype_name(t);
        EXPECT_FALSE(cb::igemm::active(t)) << cb::dtype_name(t);
    }
    // CBL_CPU_ISA below AVX-512 turns the path off (the dequantize + f32 GEMM path runs instead).
    const cb::cpu_isa top = cb::cpu_isa_detected();
    cb::cpu_isa_set_override(cb::cpu_isa::avx2);
    EXPECT_FALSE(cb::igemm::active(dtype::q4_k));
    cb::cpu_isa_set_override(top);
}
