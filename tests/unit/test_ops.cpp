// Every CPU op against a naive double-precision reference, on every ISA level this machine has
// (generic, AVX2, AVX-512) and with 1, 2 and 3 threads.
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/igemm.h"
#include "kernels/cpu/quants.h"
#include "kernels/fp16.h"
#include "kernels/kernel-error.h"

namespace cb = cacheblend;
using cb::dtype;

namespace {

// Runs fn(label, pool) for every ISA level up to the detected one and for 1, 2, 3 threads.
template <typename Fn>
void for_each_config(Fn&& fn) {
    const cb::cpu_isa top = cb::cpu_isa_detected();
    for (int level = 0; level <= static_cast<int>(top); ++level) {
        const cb::cpu_isa isa = cb::cpu_isa_set_override(static_cast<cb::cpu_isa>(level));
        for (int nth : {1, 2, 3}) {
            cb::thread_pool pool(nth);
            const std::string label = std::string(cb::cpu_isa_name(isa)) + " threads=" +
                                      std::to_string(nth);
            SCOPED_TRACE(label);
            fn(pool);
        }
    }
    cb::cpu_isa_set_override(top);
}

std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// A weight matrix quantized to `type`, plus its dequantized f32 values (the exact reference).
struct test_weights {
    dtype type;
    int64_t rows, cols;
    size_t row_bytes;
    std::vector<unsigned char> data;
    std::vector<float> deq;

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

test_weights make_weights(dtype type, int64_t rows, int64_t cols, uint32_t seed) {
    test_weights w;
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = cb::dtype_row_bytes(type, cols);
    w.data.resize(w.row_bytes * rows);
    w.deq.resize(static_cast<size_t>(rows * cols));
    const std::vector<float> src = random_vec(static_cast<size_t>(rows * cols), seed);
    for (int64_t r = 0; r < rows; ++r) {
        cb::quantize_row(type, src.data() + r * cols, w.data.data() + r * w.row_bytes, cols);
        cb::dequantize_row(type, w.data.data() + r * w.row_bytes, w.deq.data() + r * cols, cols);
    }
    return w;
}

// Relative tolerance (of sum |x||w|) for a matmul with few rows, which may quantize activations
// to the weight's vec_dot_type; with many rows the product is f32 on dequantized weights, except
// on the int8 paths (vec_dot_tile_native, the integer GEMM of kernels/cpu/igemm.h).
double matmul_rtol(dtype type, int64_t m) {
    if (m > 16 && !cb::vec_dot_tile_native(type) && !cb::igemm::active(type)) return 2e-6;
    switch (type) {
        case dtype::f32: return 2e-6;
        case dtype::f16: return 2e-3;
        case dtype::bf16: return 1e-2;
        default: return 1.5e-2;  // 8-bit activations
    }
}

void check_matmul(cb::thread_pool& pool, const test_weights& w, int64_t m, bool with_bias,
                  uint32_t seed) {
    const int64_t k = w.cols, n = w.rows;
    const int64_t ldx = k + 3, ldy = n + 5;
    const std::vector<float> x = random_vec(static_cast<size_t>(m * ldx), seed);
    const std::vector<float> bias = random_vec(static_cast<size_t>(n), seed + 1);
    std::vector<float> y(static_cast<size_t>(m * ldy), 12345.f);
    cb::matmul(pool, w.view(), x.data(), m, ldx, y.data(), ldy,
               with_bias ? bias.data() : nullptr);
    const double rtol = matmul_rtol(w.type, m);
    int bad = 0;
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < n; ++r) {
            double ref = with_bias ? bias[r] : 0.0, mag = 0.0;
            for (int64_t c = 0; c < k; ++c) {
                const double p = double(x[i * ldx + c]) * double(w.deq[r * k + c]);
                ref += p;
                mag += std::fabs(p);
            }
            const double got = y[i * ldy + r];
            if (!(std::fabs(got - ref) <= rtol * mag + 1e-6) && bad++ < 5) {
                ADD_FAILURE() << dtype_name(w.type) << " m=" << m << " n=" << n << " k=" << k
                              << " y[" << i << "][" << r << "]=" << got << " ref=" << ref;
            }
        }
        for (int64_t r = n; r < ldy; ++r) {
            ASSERT_EQ(y[i * ldy + r], 12345.f) << "wrote past the row end";
        }
    }
}

}  // namespace

TEST(Ops, MatmulF32) {
    const test_weights w[] = {
        make_weights(dtype::f32, 1, 32, 1),    make_weights(dtype::f32, 5, 96, 2),
        make_weights(dtype::f32, 64, 64, 3),   make_weights(dtype::f32, 100, 576, 4),
        make_weights(dtype::f32, 200, 96, 5)};
    for_each_config([&](cb::thread_pool& pool) {
        uint32_t seed = 100;
        for (const auto& wt : w) {
            for (int64_t m : {1, 3, 5, 17, 40}) {
                for (bool bias : {false, true}) check_matmul(pool, wt, m, bias, seed++);
            }
        }
    });
}

TEST(Ops, MatmulQuantized) {
    std::vector<test_weights> w;
    uint32_t seed = 10;
    for (dtype t : {dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::q5_0,
                    dtype::q5_1}) {
        w.push_back(make_weights(t, 37, 96, seed++));
    }
    w.push_back(make_weights(dtype::q4_1, 130, 576, seed++));
    for (dtype t : {dtype::q4_k, dtype::q6_k, dtype::q2_k, dtype::q3_k, dtype::q5_k}) {
        w.push_back(make_weights(t, 21, 512, seed++));
    }
    for_each_config([&](cb::thread_pool& pool) {
        uint32_t s = 200;
        for (const auto& wt : w) {
            for (int64_t m : {1, 3, 17}) check_matmul(pool, wt, m, m == 3, s++);
        }
    });
}

TEST(Ops, MatmulLargeBlocks) {
    // Many row blocks, a tail tile, several packed-weight chunks (N*K*4 bytes > 4 MiB).
    const test_weights big = make_weights(dtype::f32, 2000, 576, 7);
    const test_weights tall = make_weights(dtype::q4_1, 300, 576, 8);
    for_each_config([&](cb::thread_pool& pool) {
        check_matmul(pool, big, 13, true, 300);
        check_matmul(pool, tall, 203, false, 301);
    });
}

// Types with a native int8 GEMM (q4_1 and q8_0 on AVX-512) quantize activations at every m and
// give each output the bits of vec_dot on its own row: whatever m, the row's position in the
// batch and the thread split (the blending engine's exactness relies on it).
TEST(Ops, MatmulBatchInvariant) {
    for (dtype t : {dtype::q4_1, dtype::q8_0, dtype::q4_0}) {
        const test_weights w = make_weights(t, 203, 576, 40);
        const cb::dtype vt = cb::vec_dot_type(t);
        const int64_t k = w.cols, n = w.rows;
        const std::vector<float> x = random_vec(static_cast<size_t>(130 * k), 41);
        for_each_config([&](cb::thread_pool& pool) {
            if (!cb::vec_dot_tile_native(t)) return;
            // Reference: each row alone, quantized, through vec_dot_rows.
            std::vector<float> ref(static_cast<size_t>(130 * n));
            std::vector<unsigned char> qa(cb::dtype_row_bytes(vt, k));
            for (int64_t i = 0; i < 130; ++i) {
                cb::quantize_row(vt, x.data() + i * k, qa.data(), k);
                cb::vec_dot_rows(t, k, w.data.data(), w.row_bytes, n, qa.data(),
                                 ref.data() + i * n);
            }
            for (int64_t m : {1, 2, 3, 4, 5, 17, 64, 130}) {
                for (int64_t off : {int64_t(0), int64_t(130 - m)}) {
                    std::vector<float> y(static_cast<size_t>(m * n));
                    cb::matmul(pool, w.view(), x.data() + off * k, m, k, y.data(), n, nullptr);
                    ASSERT_EQ(0, std::memcmp(y.data(), ref.data() + off * n, y.size() * 4))
                        << dtype_name(t) << " m=" << m << " off=" << off;
                }
            }
        });
    }
}

TEST(Ops, GetRows) {
    std::vector<test_weights> w;
    for (dtype t : {dtype::f32, dtype::f16, dtype::q8_0, dtype::q4_1}) {
        w.push_back(make_weights(t, 50, 96, 20 + static_cast<uint32_t>(t)));
    }
    const std::vector<int32_t> ids = {0, 49, 3, 3, 17, 0, 25};
    for_each_config([&](cb::thread_pool& pool) {
        for (const auto& wt : w) {
            const int64_t m = static_cast<int64_t>(ids.size()), ldy = wt.cols + 2;
            std::vector<float> y(static_cast<size_t>(m * ldy), -7.f);
            cb::get_rows(pool, wt.view(), ids.data(), m, y.data(), ldy);
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t c = 0; c < wt.cols; ++c) {
                    ASSERT_EQ(y[i * ldy + c], wt.deq[ids[i] * wt.cols + c]) << dtype_name(wt.type);
                }
                ASSERT_EQ(y[i * ldy + wt.cols], -7.f);
            }
        }
    });
}

TEST(Ops, RmsNorm) {
    for_each_config([&](cb::thread_pool& pool) {
        for (int64_t n : {1, 7, 64, 576, 1000}) {
            for (int64_t m : {1, 3, 17}) {
                const int64_t ld = n + 4;
                std::vector<float> x = random_vec(static_cast<size_t>(m * ld), 30, -3.f, 3.f);
                const std::vector<float> g = random_vec(static_cast<size_t>(n), 31);
                std::vector<float> y(x.size(), 0.f);
                const float eps = 1e-5f;
                cb::rms_norm(pool, x.data(), m, n, ld, g.data(), eps, y.data(), ld);
                for (int64_t i = 0; i < m; ++i) {
                    double ss = 0;
                    for (int64_t c = 0; c < n; ++c) ss += double(x[i * ld + c]) * x[i * ld + c];
                    const double s = 1.0 / std::sqrt(ss / n + eps);
                    for (int64_t c = 0; c < n; ++c) {
                        const double ref = x[i * ld + c] * s * g[c];
                        ASSERT_NEAR(y[i * ld + c], ref, 1e-5 * std::fabs(ref) + 1e-6)
                            << "n=" << n << " m=" << m;
                    }
                }
                // In place gives the same bits.
                std::vector<float> z = x;
                cb::rms_norm(pool, z.data(), m, n, ld, g.data(), eps, z.data(), ld);
                for (int64_t i = 0; i < m; ++i) {
                    for (int64_t c = 0; c < n; ++c) ASSERT_EQ(z[i * ld + c], y[i * ld + c]);
                }
            }
        }
    });
}

namespace {

// ggml's per-pair angle: float theta advanced by theta_scale, divided by the factor, scaled.
double ggml_theta(const cb::rope_params& p, int32_t pos, int pair) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
    float theta = static_cast<float>(pos);
    for (int i = 0; i < pair; ++i) theta *= theta_scale;
    const float ff = p.freq_factors ? p.freq_factors[pair] : 1.0f;
    return p.freq_scale * (theta / ff);
}

void rope_reference(const cb::rope_params& p, int32_t pos, const float* x, double* out,
                    int head_dim, bool exact_theta) {
    for (int c = 0; c < head_dim; ++c) out[c] = x[c];
    const int half = p.n_dims / 2;
    for (int i = 0; i < half; ++i) {
        double t;
        if (exact_theta) {
            const double ff = p.freq_factors ? p.freq_factors[i] : 1.0;
            t = p.freq_scale * pos * std::pow(double(p.freq_base), -2.0 * i / p.n_dims) / ff;
        } else {
            t = ggml_theta(p, pos, i);
        }
        const int i0 = p.style == cb::rope_style::norm ? 2 * i : i;
        const int i1 = p.style == cb::rope_style::norm ? 2 * i + 1 : i + half;
        const double x0 = x[i0], x1 = x[i1];
        out[i0] = x0 * std::cos(t) - x1 * std::sin(t);
        out[i1] = x0 * std::sin(t) + x1 * std::cos(t);
    }
}

}  // namespace

TEST(Ops, Rope) {
    const std::vector<float> factors = random_vec(64, 40, 1.f, 8.f);
    for_each_config([&](cb::thread_pool& pool) {
        for (auto style : {cb::rope_style::norm, cb::rope_style::neox}) {
            for (int n_dims : {64, 32}) {
                for (int variant = 0; variant < 3; ++variant) {
                    cb::rope_params p;
                    p.style = style;
                    p.n_dims = n_dims;
                    p.freq_base = variant == 0 ? 100000.f : 10000.f;
                    p.freq_scale = variant == 1 ? 0.25f : 1.f;
                    p.freq_factors = variant == 2 ? factors.data() : nullptr;
                    const int n_head = 3, head_dim = 64;
                    const std::vector<int32_t> pos = {0, 1, 7, 3000, 7, 70001, 2, 511, 100, 99,
                                                      4095, 12, 13, 14, 15, 16, 17};
                    const int64_t m = static_cast<int64_t>(pos.size());
                    const int64_t ld = n_head * head_dim + 3;
                    const std::vector<float> x0 = random_vec(static_cast<size_t>(m * ld), 41);
                    std::vector<float> x = x0;
                    cb::rope(pool, x.data(), m, ld, n_head, head_dim, pos.data(), p);
                    std::vector<double> ref(head_dim), ref_exact(head_dim);
                    for (int64_t i = 0; i < m; ++i) {
                        for (int h = 0; h < n_head; ++h) {
                            const float* src = x0.data() + i * ld + h * head_dim;
                            rope_reference(p, pos[i], src, ref.data(), head_dim, false);
                            rope_reference(p, pos[i], src, ref_exact.data(), head_dim, true);
                            for (int c = 0; c < head_dim; ++c) {
                                const float got = x[i * ld + h * head_dim + c];
                                ASSERT_NEAR(got, ref[c], 2e-6)
                                    << "pos=" << pos[i] << " c=" << c << " dims=" << n_dims;
                                // The float angle only drifts visibly at large positions.
                                if (pos[i] < 128) ASSERT_NEAR(got, ref_exact[c], 1e-4);
                            }
                        }
                        ASSERT_EQ(x[i * ld + n_head * head_dim], x0[i * ld + n_head * head_dim]);
                    }
                }
            }
        }
    });
}

TEST(Ops, Swiglu) {
    for_each_config([&](cb::thread_pool& pool) {
        for (int64_t n : {1, 15, 64, 1536}) {
            const int64_t m = 17, ld = n + 1;
            std::vector<float> gate = random_vec(static_cast<size_t>(m * ld), 50, -20.f, 20.f);
            const std::vector<float> up = random_vec(static_cast<size_t>(m * ld), 51, -2.f, 2.f);
            gate[0] = -120.f;  // e^120 overflows float: silu must still be ~0, not NaN
            gate[1] = 95.f;
            std::vector<float> out(gate.size(), 0.f);
            cb::swiglu(pool, gate.data(), up.data(), m, n, ld, out.data());
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t c = 0; c < n; ++c) {
                    const double g = gate[i * ld + c];
                    const double ref = g / (1.0 + std::exp(-g)) * up[i * ld + c];
                    ASSERT_NEAR(out[i * ld + c], ref, 2e-6 * std::fabs(ref) + 1e-30) << g;
                }
            }
            std::vector<float> alias = gate;  // out may alias gate
            cb::swiglu(pool, alias.data(), up.data(), m, n, ld, alias.data());
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t c = 0; c < n; ++c) ASSERT_EQ(alias[i * ld + c], out[i * ld + c]);
            }
        }
    });
}

TEST(Ops, AddRows) {
    for_each_config([&](cb::thread_pool& pool) {
        for (int64_t n : {1, 9, 576}) {
            const int64_t m = 17, ld = n + 3;
            std::vector<float> y = random_vec(static_cast<size_t>(m * ld), 60);
            const std::vector<float> x = random_vec(static_cast<size_t>(m * ld), 61);
            const std::vector<float> y0 = y;
            cb::add_rows(pool, y.data(), x.data(), m, n, ld);
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t c = 0; c < ld; ++c) {
                    const size_t k = static_cast<size_t>(i * ld + c);
                    ASSERT_EQ(y[k], c < n ? y0[k] + x[k] : y0[k]);
                }
            }
        }
    });
}

TEST(Ops, StoreRowsF16) {
    for_each_config([&](cb::thread_pool& pool) {
        const int64_t n = 192, m = 5, ldsrc = 200, ld_cache = 196, n_ctx = 40;
        const std::vector<float> src = random_vec(static_cast<size_t>(m * ldsrc), 70, -4.f, 4.f);
        const std::vector<int32_t> pos = {7, 0, 39, 12, 13};
        std::vector<uint16_t> cache(static_cast<size_t>(n_ctx * ld_cache), 0xabcd);
        cb::store_rows_f16(pool, src.data(), m, n, ldsrc, pos.data(), cache.data(), ld_cache);
        for (int64_t r = 0; r < n_ctx; ++r) {
            const auto it = std::find(pos.begin(), pos.end(), static_cast<int32_t>(r));
            for (int64_t c = 0; c < ld_cache; ++c) {
                const uint16_t got = cache[static_cast<size_t>(r * ld_cache + c)];
                if (it == pos.end() || c >= n) {
                    ASSERT_EQ(got, 0xabcd);
                } else {
                    const int64_t i = it - pos.begin();
                    ASSERT_EQ(got, cb::fp32_to_fp16(src[static_cast<size_t>(i * ldsrc + c)]));
                }
            }
        }
    });
}

namespace {

struct attn_case {
    int n_head, n_kv_head, head_dim;
    std::vector<int32_t> q_pos;
    int64_t n_keys;
};

void check_attention(cb::thread_pool& pool, const attn_case& tc, uint32_t seed) {
    const int64_t n_q = static_cast<int64_t>(tc.q_pos.size());
    const int d = tc.head_dim;
    const int64_t q_stride = int64_t(tc.n_head) * d + 5;
    const int64_t out_stride = int64_t(tc.n_head) * d + 3;
    const int64_t kv_stride = int64_t(tc.n_kv_head) * d + 2;
    const int64_t n_ctx = tc.n_keys + 70;
    const int32_t max_pos = *std::max_element(tc.q_pos.begin(), tc.q_pos.end());

    const std::vector<float> q = random_vec(static_cast<size_t>(n_q * q_stride), seed, -2.f, 2.f);
    std::vector<uint16_t> k(static_cast<size_t>(n_ctx * kv_stride));
    std::vector<uint16_t> v(k.size());
    const std::vector<float> kf = random_vec(k.size(), seed + 1, -2.f, 2.f);
    const std::vector<float> vf = random_vec(v.size(), seed + 2);
    for (int64_t j = 0; j < n_ctx; ++j) {
        for (int64_t c = 0; c < kv_stride; ++c) {
            const size_t i = static_cast<size_t>(j * kv_stride + c);
            if (j >= tc.n_keys) {
                k[i] = v[i] = 0x7e00;  // NaN: rows past n_keys must never be read
            } else if (j > max_pos) {
                k[i] = cb::fp32_to_fp16(30.f);  // future keys would dominate if they leaked
                v[i] = cb::fp32_to_fp16(1000.f);
            } else {
                k[i] = cb::fp32_to_fp16(kf[i]);
                v[i] = cb::fp32_to_fp16(vf[i]);
            }
        }
    }
    std::vector<float> out(static_cast<size_t>(n_q * out_stride), -5.f);

    cb::attention_args a;
    a.q = q.data();
    a.n_q = n_q;
    a.q_stride = q_stride;
    a.q_pos = tc.q_pos.data();
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = kv_stride;
    a.n_keys = tc.n_keys;
    a.n_head = tc.n_head;
    a.n_kv_head = tc.n_kv_head;
    a.head_dim = d;
    a.scale = 1.f / std::sqrt(static_cast<float>(d));
    a.out = out.data();
    a.out_stride = out_stride;
    cb::attention(pool, a);

    // On AVX-512, batches of < 64 query rows follow ggml's one_chunk numerics (Q rounded to f16,
    // the output accumulated in f16): ~1e-3 off the exact value. Otherwise f32 accumulation.
    const bool f16_acc = cb::cpu_isa_active() >= cb::cpu_isa::avx512 && n_q < 64 && d % 16 == 0;
    const double tol = f16_acc ? 4e-3 : 2e-5;
    const int group = tc.n_head / tc.n_kv_head;
    std::vector<double> sc, ref(static_cast<size_t>(d));
    int bad = 0;
    for (int64_t i = 0; i < n_q; ++i) {
        const int64_t n_vis = std::min<int64_t>(tc.n_keys, int64_t(tc.q_pos[i]) + 1);
        for (int h = 0; h < tc.n_head; ++h) {
            const int g = h / group;
            sc.assign(static_cast<size_t>(n_vis), 0.0);
            double mx = -1e300;
            for (int64_t j = 0; j < n_vis; ++j) {
                double s = 0;
                for (int c = 0; c < d; ++c) {
                    s += double(q[i * q_stride + h * d + c]) *
                         cb::fp16_to_fp32(k[j * kv_stride + g * d + c]);
                }
                sc[j] = s * a.scale;
                mx = std::max(mx, sc[j]);
            }
            double sum = 0;
            for (auto& s : sc) sum += (s = std::exp(s - mx));
            std::fill(ref.begin(), ref.end(), 0.0);
            for (int64_t j = 0; j < n_vis; ++j) {
                for (int c = 0; c < d; ++c) {
                    ref[c] += sc[j] / sum * cb::fp16_to_fp32(v[j * kv_stride + g * d + c]);
                }
            }
            for (int c = 0; c < d; ++c) {
                const float got = out[i * out_stride + h * d + c];
                if (!(std::fabs(got - ref[c]) <= tol) && bad++ < 5) {
                    ADD_FAILURE() << "q" << i << " pos=" << tc.q_pos[i] << " head " << h
                                  << " dim " << c << ": got " << got << " ref " << ref[c]
                                  << " (n_keys=" << tc.n_keys << ", d=" << d << ")";
                }
            }
        }
        for (int64_t c = int64_t(tc.n_head) * d; c < out_stride; ++c) {
            ASSERT_EQ(out[i * out_stride + c], -5.f);
        }
    }
}

std::vector<int32_t> iota_pos(int32_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) p[i] = i;
    return p;
}

}  // namespace

TEST(Ops, Attention) {
    std::vector<attn_case> cases;
    for (auto hd : {std::array<int, 3>{9, 3, 64}, std::array<int, 3>{4, 4, 64},
                    std::array<int, 3>{6, 2, 40}, std::array<int, 3>{2, 2, 128}}) {
        const int nh = hd[0], nkv = hd[1], d = hd[2];
        cases.push_back({nh, nkv, d, iota_pos(150), 150});            // causal prefill
        cases.push_back({nh, nkv, d, {0}, 1});                        // first token
        cases.push_back({nh, nkv, d, {0, 5, 3, 200, 64, 63, 65, 127, 128, 1, 199, 150, 17, 90,
                                      91, 33, 2},
                         260});                                       // scattered, future keys
        cases.push_back({nh, nkv, d, {999}, 1000});                   // decode (split keys)
        cases.push_back({nh, nkv, d, {700}, 1200});                   // decode, future keys
        cases.push_back({nh, nkv, d, {500, 20}, 300});                // query beyond n_keys
    }
    // Blend-like: a sorted selection of rows against all keys, several query blocks.
    std::vector<int32_t> sel;
    for (int32_t p = 3; p < 700; p += 7) sel.push_back(p);
    cases.push_back({9, 3, 64, sel, 720});
    for_each_config([&](cb::thread_pool& pool) {
        uint32_t seed = 80;
        for (const auto& tc : cases) check_attention(pool, tc, seed += 3);
    });
}

// Heads that do not group over the KV heads are an argument error that leaves the output alone;
// n_kv_head = 0 is multi-head attention.
TEST(Ops, AttentionRejectsHeadsThatDoNotGroup) {
    cb::thread_pool pool(2);
    const std::vector<float> q = random_vec(4 * 8, 5);
    const std::vector<uint16_t> k(2 * 8, cb::fp32_to_fp16(0.5f)), v(k);
    const int32_t pos[] = {1};
    std::vector<float> out(8, -5.f);
    cb::attention_args a;
    a.q = q.data();
    a.n_q = 1;
    a.q_stride = 8;
    a.q_pos = pos;
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = 8;
    a.n_keys = 2;
    a.n_head = 4;
    a.head_dim = 2;
    a.out = out.data();
    a.out_stride = 8;
    for (int n_kv : {3, -2}) {
        a.n_kv_head = n_kv;
        try {
            cb::attention(pool, a);
            ADD_FAILURE() << n_kv << " KV heads accepted";
        } catch (const cb::kernel_error& e) {
            EXPECT_EQ(e.code(), cb::kernel_status::invalid_arg) << e.what();
        }
        for (float o : out) ASSERT_EQ(o, -5.f);
    }
    a.n_kv_head = 0;  // MHA: equal keys and values give every head the value 0.5
    cb::attention(pool, a);
    for (float o : out) EXPECT_NEAR(o, 0.5f, 1e-3f);
}
