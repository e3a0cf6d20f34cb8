// Encoder ops (kernels/cpu/encoder-ops.h) against double-precision references, on every ISA
// level the machine has (generic, AVX2, AVX-512 bodies of encoder-ops-impl.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/encoder-ops.h"

namespace {

using namespace cacheblend;

std::vector<float> randv(size_t n, uint32_t seed, float scale = 1.f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(g);
    return v;
}

std::vector<cpu_isa> isas() {
    std::vector<cpu_isa> out = {cpu_isa::generic};
    if (cpu_isa_detected() >= cpu_isa::avx2) out.push_back(cpu_isa::avx2);
    if (cpu_isa_detected() >= cpu_isa::avx512) out.push_back(cpu_isa::avx512);
    return out;
}

struct isa_guard {
    cpu_isa saved = cpu_isa_active();
    ~isa_guard() { cpu_isa_set_override(saved); }
};

TEST(EncoderOps, LayerNorm) {
    thread_pool pool(2);
    const int64_t m = 7, n = 384, ld = 400;
    std::vector<float> x = randv(size_t(m * ld), 1, 3.f), g = randv(size_t(n), 2),
                       b = randv(size_t(n), 3), y(size_t(m * ld));
    for (int64_t i = 0; i < m; ++i) x[size_t(i * ld)] += 100.f;  // large offset: two-pass mean
    const float* betas[] = {b.data(), nullptr};
    for (const float* beta : betas) {
        layer_norm(pool, x.data(), m, n, ld, g.data(), beta, 1e-12f, y.data(), ld);
        for (int64_t i = 0; i < m; ++i) {
            double mean = 0, var = 0;
            for (int64_t j = 0; j < n; ++j) mean += x[size_t(i * ld + j)];
            mean /= n;
            for (int64_t j = 0; j < n; ++j) var += std::pow(x[size_t(i * ld + j)] - mean, 2);
            const double inv = 1.0 / std::sqrt(var / n + 1e-12);
            for (int64_t j = 0; j < n; ++j) {
                const double want = (x[size_t(i * ld + j)] - mean) * inv * g[size_t(j)] +
                                    (beta ? beta[j] : 0.0);
                ASSERT_NEAR(y[size_t(i * ld + j)], want, 1e-5) << i << "," << j;
            }
        }
    }
    // In place.
    std::vector<float> z = x;
    layer_norm(pool, z.data(), m, n, ld, g.data(), b.data(), 1e-12f, z.data(), ld);
    layer_norm(pool, x.data(), m, n, ld, g.data(), b.data(), 1e-12f, y.data(), ld);
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) ASSERT_EQ(z[size_t(i * ld + j)], y[size_t(i * ld + j)]);
    }
}

TEST(EncoderOps, GeluErf) {
    isa_guard guard;
    thread_pool pool(2);
    std::vector<float> x;
    for (float v = -12.f; v <= 12.f; v += 0.0137f) x.push_back(v);
    x.push_back(0.f);
    x.push_back(-100.f);
    x.push_back(100.f);
    for (cpu_isa isa : isas()) {
        cpu_isa_set_override(isa);
        std::vector<float> y = x;
        // Rows of 37: every body's vector loop and its tail.
        const int64_t n = 37, m = int64_t(y.size()) / n;
        gelu_erf(pool, y.data(), m, n, n);
        for (int64_t i = 0; i < m * n; ++i) {
            const double v = x[size_t(i)];
            const double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
            ASSERT_NEAR(y[size_t(i)], want, 2e-6 * std::max(1.0, std::fabs(v)))
                << cpu_isa_name(isa) << " x=" << v;
        }
    }
}

void check_attention(int n_head, int head_dim, const std::vector<int32_t>& lens) {
    isa_guard guard;
    thread_pool pool(3);
    std::vector<int32_t> start = {0};
    for (int32_t l : lens) start.push_back(start.back() + l);
    const int64_t rows = start.back(), width = int64_t(n_head) * head_dim;
    const int64_t qs = width + 3, kvs = 2 * width, os = width + 5;  // strided rows
    const std::vector<float> q = randv(size_t(rows * qs), 11, 2.f),
                             k = randv(size_t(rows * kvs), 12, 2.f),
                             v = randv(size_t(rows * kvs), 13);
    encoder_attention_args a;
    a.q = q.data();
    a.k = k.data();
    a.v = v.data() + width;  // V in the second half of each row
    a.q_stride = qs;
    a.kv_stride = kvs;
    a.seq_start = start.data();
    a.n_seq = int(lens.size());
    a.n_head = n_head;
    a.head_dim = head_dim;
    a.scale = 1.f / std::sqrt(float(head_dim));
    a.out_stride = os;
    for (cpu_isa isa : isas()) {
        cpu_isa_set_override(isa);
        std::vector<float> out(size_t(rows * os), -7.f);
        a.out = out.data();
        encoder_attention(pool, a);
        for (size_t s = 0; s < lens.size(); ++s) {
            for (int h = 0; h < n_head; ++h) {
                for (int64_t i = start[s]; i < start[s + 1]; ++i) {
                    std::vector<double> p;
                    double mx = -1e300, sum = 0;
                    for (int64_t j = start[s]; j < start[s + 1]; ++j) {
                        double d = 0;
                        for (int t = 0; t < head_dim; ++t) {
                            d += double(q[size_t(i * qs + h * head_dim + t)]) *
                                 k[size_t(j * kvs + h * head_dim + t)];
                        }
                        p.push_back(d * a.scale);
                        mx = std::max(mx, p.back());
                    }
                    for (double& x : p) sum += (x = std::exp(x - mx));
                    for (int t = 0; t < head_dim; ++t) {
                        double want = 0;
                        for (size_t j = 0; j < p.size(); ++j) {
                            want += p[j] * a.v[(start[s] + int64_t(j)) * kvs + h * head_dim + t];
                        }
                        want /= sum;
                        ASSERT_NEAR(out[size_t(i * os + h * head_dim + t)], want, 2e-5)
                            << cpu_isa_name(isa) << " seq " << s << " head " << h << " row " << i;
                    }
                }
            }
            // Padding between heads' outputs is untouched.
            for (int64_t i = start[s]; i < start[s + 1]; ++i) {
                for (int64_t t = width; t < os; ++t) ASSERT_EQ(out[size_t(i * os + t)], -7.f);
            }
        }
    }
}

TEST(EncoderOps, AttentionVectorHeads) { check_attention(3, 32, {1, 5, 37, 16, 17}); }
TEST(EncoderOps, AttentionWideHeads) { check_attention(2, 64, {3, 70}); }
TEST(EncoderOps, AttentionOddHeadsTakeScalarPath) { check_attention(2, 12, {9, 2}); }
TEST(EncoderOps, AttentionTinyHeads) { check_attention(4, 7, {4, 1}); }
TEST(EncoderOps, AttentionNothing) {
    thread_pool pool(1);
    encoder_attention_args a;
    encoder_attention(pool, a);  // no sequences: no work, no crash
    SUCCEED();
}

}  // namespace
