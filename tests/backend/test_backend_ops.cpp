// Every op of core/engine/backend.h on every available non-CPU backend against the CPU backend,
// with a per-op NMSE tolerance (llama.cpp's test-backend-ops idea). Inputs are uploaded
// to each backend's own memory, the op runs there, and the whole output buffers (padding
// included, so writes outside the rows are caught) come back to be compared.
//
// Without a GPU (or in a build without CBL_CUDA) there is nothing to compare: the test exits 77,
// which ctest reports as skipped. CBL_BACKEND_OPS_SELFTEST=1 compares only a 3-thread CPU
// backend, so the harness itself runs in every build (ctest: test_backend_ops_selftest).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/engine/backend.h"
#include "kernels/cpu/quants.h"
#include "kernels/dtype.h"
#include "kernels/fp16.h"
#include "kernels/kernel-error.h"
#if CBL_WITH_CUDA
#include "kernels/cuda/backend-cuda.h"
#endif

namespace cb = cacheblend;
using cb::dtype;

namespace {

struct candidate {
    std::string name;
    std::function<std::unique_ptr<cb::backend>()> make;
};

std::vector<candidate>& candidates() {
    static std::vector<candidate> v;
    return v;
}

// Fills candidates(); returns why there are none when it stays empty.
std::string find_candidates() {
    const char* self = std::getenv("CBL_BACKEND_OPS_SELFTEST");
    if (self && std::string(self) == "1") {
        candidates().push_back({"cpu (3 threads, self-test)", [] {
                                    return cb::create_cpu_backend(3);
                                }});
        return "";
    }
#if CBL_WITH_CUDA
    const int n = cb::cuda_device_count();
    for (int d = 0; d < n; ++d) {
        candidates().push_back({"cuda:" + std::to_string(d), [d] {
                                    return cb::create_cuda_backend(d);
                                }});
    }
    if (n > 0) return "";
    try {
        cb::create_cuda_backend(0);
    } catch (const std::exception& e) {
        return std::string("built with CUDA, but no CUDA device is usable: ") + e.what();
    }
    return "built with CUDA, but no CUDA device is present";
#else
    return "built without the CUDA backend (CBL_CUDA=OFF)";
#endif
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

std::vector<float> from_f16(const std::vector<uint16_t>& h) {
    std::vector<float> v(h.size());
    for (size_t i = 0; i < h.size(); ++i) v[i] = cb::fp16_to_fp32(h[i]);
    return v;
}

// A backend buffer holding a copy of host data.
template <typename T>
cb::backend_buffer put(cb::backend& be, const std::vector<T>& v) {
    const size_t bytes = v.size() * sizeof(T);
    cb::backend_buffer b(be, bytes ? bytes : 1);
    if (bytes) be.upload(b.as<void>(), v.data(), bytes);
    return b;
}

template <typename T>
std::vector<T> get(cb::backend& be, const cb::backend_buffer& b, size_t n) {
    std::vector<T> v(n);
    be.synchronize();
    if (n) be.download(v.data(), b.as<void>(), n * sizeof(T));
    return v;
}

// Normalized mean squared error of got against ref; infinite when NaN or inf placement differs.
double nmse(const std::vector<float>& ref, const std::vector<float>& got) {
    if (ref.size() != got.size()) return INFINITY;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(ref[i]) || !std::isfinite(got[i])) {
            if (std::isnan(ref[i]) != std::isnan(got[i])) return INFINITY;
            if (!std::isnan(ref[i]) && ref[i] != got[i]) return INFINITY;
            continue;
        }
        const double e = double(got[i]) - double(ref[i]);
        num += e * e;
        den += double(ref[i]) * double(ref[i]);
    }
    return den > 0 ? num / den : num;
}

// One op invocation: run() sets up inputs on the given backend, runs the op and returns its
// output buffers as floats (f16 outputs converted).
struct op_case {
    std::string name;
    double max_nmse;
    std::function<std::vector<std::vector<float>>(cb::backend&)> run;
};

void check(const op_case& c) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<cb::backend> cpu = cb::create_cpu_backend(2);
    const std::vector<std::vector<float>> ref = c.run(*cpu);
    for (const candidate& cand : candidates()) {
        std::unique_ptr<cb::backend> be = cand.make();
        const std::vector<std::vector<float>> got = c.run(*be);
        ASSERT_EQ(ref.size(), got.size());
        for (size_t i = 0; i < ref.size(); ++i) {
            const double err = nmse(ref[i], got[i]);
            EXPECT_LE(err, c.max_nmse) << cand.name << ": " << c.name << " output " << i;
        }
    }
}

// Per-op tolerances (NMSE). Exact ops still get a little room for reordered float sums.
constexpr double k_nmse_exact = 1e-12;
constexpr double k_nmse_row = 1e-10;      // rms_norm, rope, swiglu, kv_deviation
constexpr double k_nmse_matmul = 5e-4;    // f16 GEMM vs int8 GEMV / f32 GEMM (ggml's bound)
constexpr double k_nmse_attention = 5e-4; // ggml's CPU path rounds Q and the accumulator to f16
constexpr double k_nmse_relocate = 1e-7;  // cosf may move a K value across an f16 rounding edge

// Quantized weight rows of `type` (quantize_row of random data) as raw bytes.
std::vector<uint8_t> make_weights(dtype type, int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = cb::dtype_row_bytes(type, cols);
    std::vector<uint8_t> data(rb * rows);
    const std::vector<float> src = random_vec(size_t(rows * cols), seed);
    for (int64_t r = 0; r < rows; ++r) cb::quantize_row(type, &src[r * cols], &data[r * rb], cols);
    return data;
}

cb::weight_view view_of(dtype type, const cb::backend_buffer& b, int64_t rows, int64_t cols) {
    cb::weight_view w;
    w.type = type;
    w.data = b.as<void>();
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = cb::dtype_row_bytes(type, cols);
    return w;
}

// Every type GGUF files of the supported architectures carry, K-quants included (the default
// models are Q4_K_M: q4_K, q6_K, q5_0, q8_0).
const dtype k_weight_types[] = {dtype::f32,  dtype::f16,  dtype::bf16, dtype::q4_0, dtype::q4_1,
                                dtype::q5_0, dtype::q5_1, dtype::q8_0, dtype::q2_k, dtype::q3_k,
                                dtype::q4_k, dtype::q5_k, dtype::q6_k};

std::string shape(const char* op, dtype t, int64_t a, int64_t b, int64_t c) {
    return std::string(op) + " " + cb::dtype_name(t) + " " + std::to_string(a) + "x" +
           std::to_string(b) + "x" + std::to_string(c);
}

}  // namespace

TEST(BackendOps, Matmul) {
    for (dtype t : k_weight_types) {
        for (int64_t m : {1, 2, 4, 5, 33, 130}) {
            for (bool bias : {false, true}) {
                const int64_t n = 96, k = 256, ldx = k + 3, ldy = n + 5;
                const std::vector<uint8_t> w = make_weights(t, n, k, 1);
                const std::vector<float> x = random_vec(size_t(m * ldx), 2);
                const std::vector<float> bv = random_vec(size_t(n), 3);
                const std::vector<float> y0(size_t(m * ldy), 7.f);
                check({shape("matmul", t, m, n, k) + (bias ? " +bias" : ""), k_nmse_matmul,
                       [&](cb::backend& be) {
                           cb::backend_buffer wb = put(be, w), xb = put(be, x), bb = put(be, bv),
                                              yb = put(be, y0);
                           be.matmul(view_of(t, wb, n, k), xb.as<float>(), m, ldx, yb.as<float>(),
                                     ldy, bias ? bb.as<float>() : nullptr);
                           return std::vector<std::vector<float>>{get<float>(be, yb, y0.size())};
                       }});
            }
        }
    }
}

// What the small Matmul shapes do not reach: decode rows longer than one 256-column warp step and
// with a tail past the last multiple of 8 (f32/f16/bf16 rows may have one), rows stored further
// apart than their packed size (a strided view), and a weight too big for one dequantized panel
// (kernels/cuda/dispatch.cu stages at most 64 MiB of f16 at a time: 20000 x 2048 is two panels).
TEST(BackendOps, MatmulLongRowsStridedRowsAndSeveralPanels) {
    struct shape_case {
        dtype t;
        int64_t n, k, pad;  // pad: bytes between one row's end and the next row
        std::vector<int64_t> ms;
    };
    const std::vector<shape_case> cases = {
        {dtype::f32, 40, 777, 0, {1, 3, 9}},   {dtype::f16, 40, 777, 0, {1, 3, 9}},
        {dtype::bf16, 40, 777, 0, {1, 3, 9}},  {dtype::f16, 24, 520, 16, {1, 70}},
        {dtype::q6_k, 40, 1024, 0, {1, 4, 9}}, {dtype::q4_k, 24, 512, 144, {1, 70}},
        {dtype::q8_0, 24, 544, 34, {2, 70}},   {dtype::q8_0, 20000, 2048, 0, {1, 6}},
    };
    for (const shape_case& c : cases) {
        const size_t packed = cb::dtype_row_bytes(c.t, c.k), rb = packed + size_t(c.pad);
        const std::vector<uint8_t> dense = make_weights(c.t, c.n, c.k, 21);
        std::vector<uint8_t> w(rb * size_t(c.n), 0xA5);  // padding that decodes to garbage
        for (int64_t r = 0; r < c.n; ++r) {
            std::copy_n(&dense[size_t(r) * packed], packed, &w[size_t(r) * rb]);
        }
        for (int64_t m : c.ms) {
            const int64_t ldx = c.k + 1, ldy = c.n + 3;
            const std::vector<float> x = random_vec(size_t(m * ldx), 22);
            const std::vector<float> y0(size_t(m * ldy), 7.f);
            check({shape("matmul", c.t, m, c.n, c.k) + " row_bytes " + std::to_string(rb),
                   k_nmse_matmul, [&](cb::backend& be) {
                       cb::backend_buffer wb = put(be, w), xb = put(be, x), yb = put(be, y0);
                       cb::weight_view v = view_of(c.t, wb, c.n, c.k);
                       v.row_bytes = rb;
                       be.matmul(v, xb.as<float>(), m, ldx, yb.as<float>(), ldy, nullptr);
                       return std::vector<std::vector<float>>{get<float>(be, yb, y0.size())};
                   }});
        }
    }
}

// Activations beyond f16's range ("massive activations" entering ffn_down): the GEMM path stages
// x as f16 and must scale such rows into range rather than turn them into inf. Rows alternate
// between plain values and rows with outliers up to 1e6; every output must be finite.
TEST(BackendOps, MatmulActivationsBeyondHalfRange) {
    for (dtype t : {dtype::f16, dtype::q8_0, dtype::q4_k, dtype::q6_k}) {
        for (bool bias : {false, true}) {
            const int64_t m = 40, n = 64, k = 512, ldx = k, ldy = n;
            const std::vector<uint8_t> w = make_weights(t, n, k, 11);
            std::vector<float> x = random_vec(size_t(m * ldx), 12, -4.f, 4.f);
            for (int64_t r = 1; r < m; r += 2) {
                x[size_t(r * ldx + (r * 37) % k)] = 1e6f;
                x[size_t(r * ldx + (r * 91) % k)] = -7e4f * float(r);
            }
            const std::vector<float> bv = random_vec(size_t(n), 13);
            const std::vector<float> y0(size_t(m * ldy), 7.f);
            check({shape("matmul beyond f16", t, m, n, k) + (bias ? " +bias" : ""), k_nmse_matmul,
                   [&](cb::backend& be) {
                       cb::backend_buffer wb = put(be, w), xb = put(be, x), bb = put(be, bv),
                                          yb = put(be, y0);
                       be.matmul(view_of(t, wb, n, k), xb.as<float>(), m, ldx, yb.as<float>(), ldy,
                                 bias ? bb.as<float>() : nullptr);
                       const std::vector<float> y = get<float>(be, yb, y0.size());
                       for (float v : y) EXPECT_TRUE(std::isfinite(v)) << v;
                       // One output per row: the plain rows' error is not hidden by the
                       // outlier rows' energy.
                       std::vector<std::vector<float>> rows;
                       for (int64_t r = 0; r < m; ++r) {
                           rows.emplace_back(y.begin() + r * ldy, y.begin() + (r + 1) * ldy);
                       }
                       return rows;
                   }});
        }
    }
}

TEST(BackendOps, GetRows) {
    for (dtype t : k_weight_types) {
        const int64_t rows = 50, cols = 256, ldy = cols + 4;  // one K-quant super-block
        const std::vector<uint8_t> w = make_weights(t, rows, cols, 4);
        const std::vector<int32_t> ids = {0, 49, 7, 7, 13, -1, 50, 1000};  // outside: zero rows
        const std::vector<float> y0(ids.size() * ldy, 7.f);
        check({shape("get_rows", t, int64_t(ids.size()), rows, cols), k_nmse_exact,
               [&](cb::backend& be) {
                   cb::backend_buffer wb = put(be, w), ib = put(be, ids), yb = put(be, y0);
                   be.get_rows(view_of(t, wb, rows, cols), ib.as<int32_t>(), int64_t(ids.size()),
                               yb.as<float>(), ldy);
                   return std::vector<std::vector<float>>{get<float>(be, yb, y0.size())};
               }});
    }
}

TEST(BackendOps, RmsNorm) {
    for (int64_t n : {7, 576, 2048}) {
        for (bool in_place : {false, true}) {
            const int64_t m = 9, ld = n + 3;
            const std::vector<float> x = random_vec(size_t(m * ld), 5, -4.f, 4.f);
            const std::vector<float> g = random_vec(size_t(n), 6, 0.5f, 1.5f);
            const std::vector<float> y0(size_t(m * ld), 7.f);
            check({"rms_norm n=" + std::to_string(n) + (in_place ? " in place" : ""), k_nmse_row,
                   [&](cb::backend& be) {
                       cb::backend_buffer xb = put(be, x), gb = put(be, g), yb = put(be, y0);
                       float* y = in_place ? xb.as<float>() : yb.as<float>();
                       be.rms_norm(xb.as<float>(), m, n, ld, gb.as<float>(), 1e-5f, y, ld);
                       return std::vector<std::vector<float>>{
                           get<float>(be, in_place ? xb : yb, x.size())};
                   }});
        }
    }
}

namespace {

struct rope_case {
    cb::rope_style style;
    int head_dim, n_dims;
    float base, scale;
    bool factors;
};

const rope_case k_rope_cases[] = {
    {cb::rope_style::norm, 64, 64, 100000.f, 1.f, false},   // SmolLM2 (GGUF llama)
    {cb::rope_style::norm, 128, 128, 500000.f, 1.f, true},  // Llama 3 with rope_freqs
    {cb::rope_style::neox, 64, 64, 1000000.f, 1.f, false},  // qwen2
    {cb::rope_style::neox, 96, 64, 10000.f, 0.25f, false},  // partial rotation, linear scaling
};

std::string rope_name(const char* op, const rope_case& rc) {
    return std::string(op) + (rc.style == cb::rope_style::neox ? " neox" : " norm") +
           " head_dim=" + std::to_string(rc.head_dim) + " n_dims=" + std::to_string(rc.n_dims) +
           (rc.factors ? " +freq_factors" : "");
}

cb::rope_params params_of(const rope_case& rc, const float* factors) {
    cb::rope_params p;
    p.style = rc.style;
    p.n_dims = rc.n_dims;
    p.freq_base = rc.base;
    p.freq_scale = rc.scale;
    p.freq_factors = rc.factors ? factors : nullptr;
    return p;
}

}  // namespace

TEST(BackendOps, Rope) {
    const std::vector<int32_t> pos = {0, 1, 2, 17, 511, 3000, 4095, 70000};
    const int n_head = 3;
    for (const rope_case& rc : k_rope_cases) {
        const int64_t m = int64_t(pos.size()), ld = int64_t(n_head) * rc.head_dim + 5;
        const std::vector<float> x = random_vec(size_t(m * ld), 7, -2.f, 2.f);
        const std::vector<float> ff = random_vec(size_t(rc.n_dims / 2), 8, 1.f, 8.f);
        check({rope_name("rope", rc), k_nmse_row, [&](cb::backend& be) {
                   cb::backend_buffer xb = put(be, x), pb = put(be, pos), fb = put(be, ff);
                   be.rope(xb.as<float>(), m, ld, n_head, rc.head_dim, pb.as<int32_t>(),
                           params_of(rc, fb.as<float>()));
                   return std::vector<std::vector<float>>{get<float>(be, xb, x.size())};
               }});
    }
}

// Keys in f32 (the exact and q8 formats) and in f16 (the f16 format, as stored).
TEST(BackendOps, RelocateKv) {
    const int n_kv_head = 3;
    for (const cb::dtype kt : {cb::dtype::f32, cb::dtype::f16})
        for (const rope_case& rc : k_rope_cases) {
            const int64_t width = int64_t(n_kv_head) * rc.head_dim, ld_src = width + 2;
            const int64_t n = 20, n_ctx = 128, ld_cache = width + 4;
            std::vector<int32_t> pos(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = int32_t(6 * i + 5);
            const std::vector<float> k = random_vec(size_t(n * ld_src), 9, -3.f, 3.f);
            const std::vector<uint16_t> k16 = to_f16(k);
            const std::vector<uint16_t> v = to_f16(random_vec(size_t(n * ld_src), 10, -3.f, 3.f));
            const std::vector<uint16_t> c0(size_t(n_ctx * ld_cache), cb::fp32_to_fp16(0.5f));
            const std::vector<float> ff = random_vec(size_t(rc.n_dims / 2), 8, 1.f, 8.f);
            const std::string name =
                rope_name(kt == cb::dtype::f16 ? "relocate_kv f16 keys" : "relocate_kv", rc);
            check({name, k_nmse_relocate, [&](cb::backend& be) {
                       cb::backend_buffer kb = kt == cb::dtype::f16 ? put(be, k16) : put(be, k),
                                          vb = put(be, v), pb = put(be, pos), fb = put(be, ff),
                                          kc = put(be, c0), vc = put(be, c0);
                       be.relocate_kv(kb.as<void>(), kt, vb.as<uint16_t>(), n, ld_src,
                                      pb.as<int32_t>(), n_kv_head, rc.head_dim,
                                      params_of(rc, fb.as<float>()), kc.as<uint16_t>(),
                                      vc.as<uint16_t>(), ld_cache);
                       return std::vector<std::vector<float>>{
                           from_f16(get<uint16_t>(be, kc, c0.size())),
                           from_f16(get<uint16_t>(be, vc, c0.size()))};
                   }});
        }
}

// rope_qk_store_kv: the four calls as one op. Against the CPU (which makes the four calls; a
// device's cosf may move a K value across an f16 rounding edge, hence relocate_kv's tolerance),
// and on each device against its own four calls bit for bit (the same arithmetic in one launch).
// Partial rotation stores unrotated dims too; grouped KV heads; rows of up to 512 keys and values
// (more than a block's threads); padded rows and cache.
TEST(BackendOps, RopeQkStoreKv) {
    const int n_head = 8, n_kv_head = 4;
    const std::vector<int32_t> pos = {0, 5, 17, 63, 2, 40, 41};
    for (const rope_case& rc : k_rope_cases) {
        const int64_t m = int64_t(pos.size()), n_ctx = 64;
        const int64_t ldq = int64_t(n_head) * rc.head_dim + 3;
        const int64_t kd = int64_t(n_kv_head) * rc.head_dim, ldkv = kd + 5, ld_cache = kd + 8;
        const std::vector<float> q = random_vec(size_t(m * ldq), 31, -2.f, 2.f);
        const std::vector<float> k = random_vec(size_t(m * ldkv), 32, -2.f, 2.f);
        const std::vector<float> v = random_vec(size_t(m * ldkv), 33, -2.f, 2.f);
        const std::vector<float> ff = random_vec(size_t(rc.n_dims / 2), 8, 1.f, 8.f);
        const std::vector<uint16_t> c0(size_t(n_ctx * ld_cache), 0x3c00);
        // q and k after the op, then both caches (f16 as float).
        auto run = [&](cb::backend& be, bool fused) {
            cb::backend_buffer qb = put(be, q), kb = put(be, k), vb = put(be, v), pb = put(be, pos),
                               fb = put(be, ff), kc = put(be, c0), vc = put(be, c0);
            cb::rope_store_args a;
            a.q = qb.as<float>();
            a.ldq = ldq;
            a.n_head = n_head;
            a.k = kb.as<float>();
            a.v = vb.as<float>();
            a.ldkv = ldkv;
            a.n_kv_head = n_kv_head;
            a.head_dim = rc.head_dim;
            a.m = m;
            a.pos = pb.as<int32_t>();
            a.rope = params_of(rc, fb.as<float>());
            a.k_cache = kc.as<uint16_t>();
            a.v_cache = vc.as<uint16_t>();
            a.ld_cache = ld_cache;
            if (fused) {
                be.rope_qk_store_kv(a);
            } else {
                be.backend::rope_qk_store_kv(a);  // the four calls
            }
            return std::vector<std::vector<float>>{get<float>(be, qb, q.size()),
                                                   get<float>(be, kb, k.size()),
                                                   from_f16(get<uint16_t>(be, kc, c0.size())),
                                                   from_f16(get<uint16_t>(be, vc, c0.size()))};
        };
        check({rope_name("rope_qk_store_kv", rc), k_nmse_relocate,
               [&](cb::backend& be) { return run(be, true); }});
        for (const candidate& cand : candidates()) {
            std::unique_ptr<cb::backend> be = cand.make();
            EXPECT_EQ(run(*be, true), run(*be, false))
                << cand.name << ": " << rope_name("rope_qk_store_kv", rc);
        }
    }
}

TEST(BackendOps, StoreRowsF16) {
    const int64_t m = 11, n = 192, ldsrc = n + 1, n_ctx = 64, ld_cache = n + 8;
    std::vector<float> src = random_vec(size_t(m * ldsrc), 11, -70000.f, 70000.f);
    src[3] = 1e-6f;  // half subnormal
    src[4] = 65520.f;  // rounds to inf
    std::vector<int32_t> pos(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) pos[size_t(i)] = int32_t((i * 37) % n_ctx);
    const std::vector<uint16_t> c0(size_t(n_ctx * ld_cache), 0x3c00);
    check({"store_rows_f16", 0.0, [&](cb::backend& be) {
               cb::backend_buffer sb = put(be, src), pb = put(be, pos), cb_ = put(be, c0);
               be.store_rows_f16(sb.as<float>(), m, n, ldsrc, pb.as<int32_t>(),
                                 cb_.as<uint16_t>(), ld_cache);
               return std::vector<std::vector<float>>{
                   from_f16(get<uint16_t>(be, cb_, c0.size()))};
           }});
}

// gather_rows in both forms (whole 4-byte words; odd byte lengths and strides), with the source
// uploaded through alloc_host + upload_async as the blend path streams stored layers; exact.
TEST(BackendOps, GatherRowsAndAsyncUpload) {
    const int64_t src_rows = 40, n = 17;
    std::vector<int32_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t((i * 7 + 3) % src_rows);
    for (const size_t row_bytes : {size_t(256) * 4, size_t(37)}) {
        const size_t src_stride = row_bytes + (row_bytes % 4 ? 3 : 64);
        const size_t dst_stride = row_bytes + (row_bytes % 4 ? 1 : 0);
        std::vector<uint8_t> src(src_rows * src_stride);
        for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
        const std::vector<uint8_t> d0(size_t(n) * dst_stride, 0xEE);
        check({"gather_rows row_bytes=" + std::to_string(row_bytes), 0.0, [&](cb::backend& be) {
                   void* host = be.alloc_host(src.size());
                   std::memcpy(host, src.data(), src.size());
                   cb::backend_buffer sb(be, src.size());
                   const uint64_t t = be.upload_async(sb.as<void>(), host, src.size());
                   be.wait_upload(t);
                   cb::backend_buffer ib = put(be, idx), db = put(be, d0);
                   be.gather_rows(sb.as<void>(), src_stride, ib.as<int32_t>(), n, row_bytes,
                                  db.as<void>(), dst_stride);
                   be.finish_upload(t);
                   be.free_host(host);
                   const std::vector<uint8_t> out = get<uint8_t>(be, db, d0.size());
                   return std::vector<std::vector<float>>{
                       std::vector<float>(out.begin(), out.end())};
               }});
    }
}

namespace {

// One attention shape: heads, KV heads, head size, keys in the cache, the query rows' positions.
// Rows are padded; `aligned` pads them by whole 16-byte units, as the CUDA backend's GEMM path
// needs (kernels/cuda/attention-gemm.cuh: with 64 query rows or more), others by odd amounts.
struct attn_case {
    int n_head, n_kv_head, head_dim;
    int64_t n_keys;
    std::vector<int32_t> q_pos;
    bool aligned = false;
    float q_range = 4.f;  // q in [-q_range, q_range]: peaked attention; small: near-flat
    int64_t n_q() const { return int64_t(q_pos.size()); }
    int64_t q_ld() const { return int64_t(n_head) * head_dim + (aligned ? 4 : 3); }
    int64_t kv_ld() const { return int64_t(n_kv_head) * head_dim + (aligned ? 8 : 2); }
};

std::vector<int32_t> positions(int32_t from, int32_t to, int32_t step = 1) {
    std::vector<int32_t> p;
    for (int32_t i = from; i < to; i += step) p.push_back(i);
    return p;
}

std::vector<int32_t> joined(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// attention_args of a case over backend buffers of q, its positions and the K cache.
cb::attention_args args_of(const attn_case& ac, const cb::backend_buffer& qb,
                           const cb::backend_buffer& pb, const cb::backend_buffer& kb) {
    cb::attention_args a;
    a.q = qb.as<float>();
    a.n_q = ac.n_q();
    a.q_stride = ac.q_ld();
    a.q_pos = pb.as<int32_t>();
    a.k = kb.as<uint16_t>();
    a.kv_stride = ac.kv_ld();
    a.n_keys = ac.n_keys;
    a.n_head = ac.n_head;
    a.n_kv_head = ac.n_kv_head;
    a.head_dim = ac.head_dim;
    a.scale = 1.f / std::sqrt(float(ac.head_dim));
    return a;
}

// Runs attention of a case on `be` from host q, k, v and a prefilled output; returns the output.
std::vector<float> run_attention(cb::backend& be, const attn_case& ac, const std::vector<float>& q,
                                 const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                                 const std::vector<float>& o0, bool visible_keys_only = false) {
    cb::backend_buffer qb = put(be, q), pb = put(be, ac.q_pos), kb = put(be, k), vb = put(be, v),
                       ob = put(be, o0);
    cb::attention_args a = args_of(ac, qb, pb, kb);
    a.v = vb.as<uint16_t>();
    a.out = ob.as<float>();
    a.out_stride = ac.q_ld();
    a.visible_keys_only = visible_keys_only;
    be.attention(a);
    return get<float>(be, ob, o0.size());
}

}  // namespace

TEST(BackendOps, Attention) {
    std::vector<int32_t> prefill(200);
    for (size_t i = 0; i < prefill.size(); ++i) prefill[i] = int32_t(i);
    std::vector<int32_t> selected;  // blend: scattered recomputed rows, then the question
    for (int32_t p = 3; p < 300; p += 7) selected.push_back(p);
    for (int32_t p = 300; p < 320; ++p) selected.push_back(p);
    const attn_case cases[] = {
        {9, 3, 64, 200, prefill},   // SmolLM2 shape, full prefill
        {9, 3, 64, 320, selected},  // CacheBlend selected rows, causal by absolute position
        {9, 3, 64, 1000, {999}},    // decode
        {4, 4, 128, 50, {0, 10, 49, 60, -1}},  // MHA; past the keys; no visible key
        {8, 1, 80, 130, {5, 129}},             // MQA, head_dim not a multiple of 32
        // The same on the CUDA backend's GEMM path (64 rows or more, aligned rows).
        {9, 3, 64, 200, prefill, true},                                            // SmolLM2
        {9, 3, 64, 640, joined(positions(3, 600, 5), positions(600, 620)), true},  // blend
        {12, 2, 128, 300, positions(0, 300), true},  // Qwen2.5-1.5B: 6 query heads per KV head
        {14, 2, 64, 100, positions(0, 100), true},   // Qwen2.5-0.5B: 7 per KV head
        {4, 4, 128, 70, joined(positions(0, 64), {-1, 100, 69}), true},  // MHA, edges
        {8, 1, 80, 130, positions(0, 130, 2), true},                     // MQA, d = 80
        // Many keys: the scores are materialized per chunk of rows (here 116 + 38), most of them
        // masked (early positions), a few rows seeing every key.
        {24, 4, 64, 16000, joined(positions(0, 150), {15999, 5000, 16500, 7}), true},
        // Near-flat attention over 8000 keys: every weight matters, none dominates.
        {9, 3, 64, 8000, positions(7900, 8000), true, 0.05f},
    };
#if CBL_WITH_CUDA
    int n_cuda = 0;
    for (const candidate& c : candidates()) n_cuda += c.name.rfind("cuda:", 0) == 0;
    const char* forced = std::getenv("CBL_CUDA_ATTENTION");
    const bool rows_only = forced != nullptr && std::string(forced) == "rows";
#endif
    // CBL_BACKEND_OPS_SHORT=1 leaves out the thousands-of-keys cases, which take the CUDA
    // emulator minutes under ThreadSanitizer (scripts/test.sh): a race within a block shows at
    // any length, and every other build runs them.
    const char* short_env = std::getenv("CBL_BACKEND_OPS_SHORT");
    const bool short_run = short_env != nullptr && std::string(short_env) == "1";
    for (const attn_case& ac : cases) {
        if (short_run && ac.n_keys > 2000) continue;
        const int64_t n_q = ac.n_q(), q_ld = ac.q_ld(), kv_ld = ac.kv_ld();
        const std::vector<float> q = random_vec(size_t(n_q * q_ld), 12, -ac.q_range, ac.q_range);
        const std::vector<uint16_t> k =
            to_f16(random_vec(size_t(ac.n_keys * kv_ld), 13, -2.f, 2.f));
        const std::vector<uint16_t> v = to_f16(random_vec(size_t(ac.n_keys * kv_ld), 14));
        const std::vector<float> o0(size_t(n_q * q_ld), 7.f);
#if CBL_WITH_CUDA
        const int64_t gemm_calls = cb::cuda_attention_gemm_calls();
#endif
        const std::string name = "attention heads=" + std::to_string(ac.n_head) + "/" +
                                 std::to_string(ac.n_kv_head) + " d=" +
                                 std::to_string(ac.head_dim) + " n_q=" + std::to_string(n_q) +
                                 " n_keys=" + std::to_string(ac.n_keys);
        check({name, k_nmse_attention, [&](cb::backend& be) {
                   return std::vector<std::vector<float>>{run_attention(be, ac, q, k, v, o0)};
               }});
#if CBL_WITH_CUDA
        // The aligned cases of 64+ rows are there for the GEMM path: make sure it ran.
        if (ac.aligned && n_q >= 64 && n_cuda > 0 && !rows_only) {
            EXPECT_GE(cb::cuda_attention_gemm_calls() - gemm_calls, n_cuda)
                << name << ": the CUDA GEMM attention path did not run";
        }
#endif
    }
}

// attention_args::visible_keys_only: keys past the highest query position may never have been
// written (a recorded decode step passes the cache's size as n_keys), so a backend must read none
// of them. Here they are NaN: one read (the CUDA GEMM path's P V, 0 * NaN) spoils the output.
// 100 aligned rows would take that path without the flag.
TEST(BackendOps, AttentionReadsOnlyVisibleKeysWhenAsked) {
    const attn_case ac{9, 3, 64, 400, joined(positions(0, 99), {99}), true};
    const int64_t n_q = ac.n_q(), q_ld = ac.q_ld(), kv_ld = ac.kv_ld();
    const int64_t written = 100;  // rows [0, 100): up to the highest position, 99
    const std::vector<float> q = random_vec(size_t(n_q * q_ld), 21, -4.f, 4.f);
    std::vector<uint16_t> k = to_f16(random_vec(size_t(ac.n_keys * kv_ld), 22, -2.f, 2.f));
    std::vector<uint16_t> v = to_f16(random_vec(size_t(ac.n_keys * kv_ld), 23));
    std::fill(k.begin() + written * kv_ld, k.end(), uint16_t(0x7e00));  // f16 NaN
    std::fill(v.begin() + written * kv_ld, v.end(), uint16_t(0x7e00));
    const std::vector<float> o0(size_t(n_q * q_ld), 7.f);
#if CBL_WITH_CUDA
    const int64_t gemm_calls = cb::cuda_attention_gemm_calls();
#endif
    check({"attention, visible keys only", k_nmse_attention, [&](cb::backend& be) {
               std::vector<float> out = run_attention(be, ac, q, k, v, o0, true);
               for (int64_t i = 0; i < n_q; ++i) {
                   EXPECT_TRUE(std::isfinite(out[size_t(i * q_ld)])) << be.name() << " row " << i;
               }
               return std::vector<std::vector<float>>{out};
           }});
#if CBL_WITH_CUDA
    EXPECT_EQ(cb::cuda_attention_gemm_calls(), gemm_calls) << "the GEMM path read every key";
#endif
}

// A row that sees many keys is split over several blocks (kernels/cuda/attention.cu): decode rows
// (one and a few) against the CPU at positions that give one split, a split boundary and many
// splits, one row with no visible key beside them; twice on one backend, the same bits (each
// split's arrival counter is left as found), and with n_keys the cache's size and
// visible_keys_only (a recorded decode step) the same bits as n_keys = position + 1 (the split
// depends on the visible keys only).
TEST(BackendOps, AttentionSplitsLongRowsOverBlocks) {
    const attn_case cases[] = {
        {9, 3, 64, 3000, {2999}},                    // SmolLM2 decode
        {12, 2, 128, 3000, {2999, 63, 64, 127, 1}},  // Qwen2.5-1.5B, a few rows
        {14, 2, 64, 700, {699, -1}},                 // Qwen2.5-0.5B; a row seeing no key
        {9, 3, 64, 1500, {1499}},                    // shorter, for the sanitizers' runs
    };
#if CBL_WITH_CUDA
    const int64_t split_calls = cb::cuda_attention_split_calls();
    int n_cuda = 0;
    for (const candidate& c : candidates()) n_cuda += c.name.rfind("cuda:", 0) == 0;
#endif
    const char* short_env = std::getenv("CBL_BACKEND_OPS_SHORT");  // as in Attention
    const bool short_run = short_env != nullptr && std::string(short_env) == "1";
    for (const attn_case& ac : cases) {
        if (short_run && ac.n_keys > 2000) continue;
        const int64_t n_q = ac.n_q(), q_ld = ac.q_ld(), kv_ld = ac.kv_ld();
        const std::vector<float> q = random_vec(size_t(n_q * q_ld), 81, -4.f, 4.f);
        const std::vector<uint16_t> k =
            to_f16(random_vec(size_t(ac.n_keys * kv_ld), 82, -2.f, 2.f));
        const std::vector<uint16_t> v = to_f16(random_vec(size_t(ac.n_keys * kv_ld), 83));
        const std::vector<float> o0(size_t(n_q * q_ld), 7.f);
        const std::string name = "split attention heads=" + std::to_string(ac.n_head) +
                                 " n_q=" + std::to_string(n_q) +
                                 " n_keys=" + std::to_string(ac.n_keys);
        check({name, k_nmse_attention, [&](cb::backend& be) {
                   return std::vector<std::vector<float>>{run_attention(be, ac, q, k, v, o0)};
               }});
        for (const candidate& cand : candidates()) {
            std::unique_ptr<cb::backend> be = cand.make();
            const std::vector<float> once = run_attention(*be, ac, q, k, v, o0);
            EXPECT_EQ(run_attention(*be, ac, q, k, v, o0), once) << cand.name << ": " << name;
            if (n_q == 1) {  // exactly the keys up to the row's position, or the cache's size
                attn_case exact = ac;
                exact.n_keys = ac.q_pos[0] + 1;
                const size_t kept = size_t(exact.n_keys * kv_ld);
                const std::vector<uint16_t> k1(k.begin(), k.begin() + kept),
                    v1(v.begin(), v.begin() + kept);
                EXPECT_EQ(run_attention(*be, exact, q, k1, v1, o0), once) << cand.name;
                EXPECT_EQ(run_attention(*be, ac, q, k, v, o0, true), once) << cand.name;
            }
        }
    }
#if CBL_WITH_CUDA
    if (n_cuda > 0) {
        EXPECT_GT(cb::cuda_attention_split_calls(), split_calls)
            << "no attention call split its keys over blocks";
    }
#endif
}

TEST(BackendOps, SwigluAndAddRows) {
    const int64_t m = 13, n = 1536, ld = n + 3;
    const std::vector<float> gate = random_vec(size_t(m * ld), 15, -10.f, 10.f);
    const std::vector<float> up = random_vec(size_t(m * ld), 16, -3.f, 3.f);
    const std::vector<float> o0(size_t(m * ld), 7.f);
    check({"swiglu", k_nmse_row, [&](cb::backend& be) {
               cb::backend_buffer gb = put(be, gate), ub = put(be, up), ob = put(be, o0);
               be.swiglu(gb.as<float>(), ub.as<float>(), m, n, ld, ob.as<float>());
               return std::vector<std::vector<float>>{get<float>(be, ob, o0.size())};
           }});
    check({"swiglu in place", k_nmse_row, [&](cb::backend& be) {
               cb::backend_buffer gb = put(be, gate), ub = put(be, up);
               be.swiglu(gb.as<float>(), ub.as<float>(), m, n, ld, gb.as<float>());
               return std::vector<std::vector<float>>{get<float>(be, gb, gate.size())};
           }});
    check({"add_rows", k_nmse_exact, [&](cb::backend& be) {
               cb::backend_buffer yb = put(be, gate), xb = put(be, up);
               be.add_rows(yb.as<float>(), xb.as<float>(), m, n, ld);
               return std::vector<std::vector<float>>{get<float>(be, yb, gate.size())};
           }});
}

// The fused matmul forms (backend::matmuls, matmul_add, matmul_swiglu): against the CPU, and on
// each backend against its own default (the unfused calls) bit for bit. Decode sizes (1 and 4
// rows, one GEMV launch a weight type) and prefill sizes (the GEMM path, x staged once); q and k
// of one type with v of another (two launches, as in Q4_K_M files), biases, padded rows; with
// and without the RMSNorm of the input (a device's GEMV normalizes inside, in the bits of its norm
// kernel; inputs scaled up so the norm matters).
TEST(BackendOps, FusedMatmulsAreTheCallsTheyReplace) {
    const int64_t QD = 256, KD = 96, FF = 512, ldq = QD + 1, ldkv = KD + 2, ldf = FF + 5;
    struct type_case {
        dtype q, v, gate, up;
        int64_t E;  // the input's width: past 256 and not a multiple of 8, the norm's strided
                    // sum and the GEMV's column tail run (unquantized rows only)
    };
    const type_case types[] = {{dtype::q4_k, dtype::q4_k, dtype::q4_k, dtype::q4_k, 256},
                               {dtype::q4_k, dtype::q6_k, dtype::q5_0, dtype::q8_0, 256},
                               {dtype::f16, dtype::f32, dtype::f32, dtype::f32, 256},
                               {dtype::f16, dtype::f32, dtype::f16, dtype::f16, 903}};
    for (const type_case& tc : types) {
        const int64_t E = tc.E, ldx = E + 3, ldo = E + 4;
        const std::vector<uint8_t> wq = make_weights(tc.q, QD, E, 61),
                                   wk = make_weights(tc.q, KD, E, 62),
                                   wv = make_weights(tc.v, KD, E, 63),
                                   wg = make_weights(tc.gate, FF, E, 64),
                                   wu = make_weights(tc.up, FF, E, 65),
                                   wd = make_weights(tc.v, E, FF, 66);
        const std::vector<float> bq = random_vec(size_t(QD), 67), bk = random_vec(size_t(KD), 68),
                                 bv = random_vec(size_t(KD), 69);
        const std::vector<float> gamma = random_vec(size_t(E), 73, 0.5f, 1.5f);
        for (auto [m, normed] : {std::pair<int64_t, bool>{1, false},
                                 {4, false},
                                 {37, false},
                                 {1, true},
                                 {3, true},
                                 {37, true}}) {
            const std::vector<float> x = random_vec(size_t(m * ldx), 70, -20.f, 20.f);
            const std::vector<float> f = random_vec(size_t(m * ldf), 71, -3.f, 3.f);
            const std::vector<float> res = random_vec(size_t(m * ldo), 72);
            const std::vector<float> q0(size_t(m * ldq), 7.f), kv0(size_t(m * ldkv), 7.f),
                f0(size_t(m * ldf), 7.f);
            // q, k, v of matmuls; then x after matmul_add of the down weight; then matmul_swiglu's
            // out. fused: the backend's own ops; else the defaults in kernels/backend.h.
            auto run = [&](cb::backend& be, bool fused) {
                cb::backend_buffer wqb = put(be, wq), wkb = put(be, wk), wvb = put(be, wv),
                                   wgb = put(be, wg), wub = put(be, wu), wdb = put(be, wd),
                                   bqb = put(be, bq), bkb = put(be, bk), bvb = put(be, bv),
                                   xb = put(be, x), fb = put(be, f), rb = put(be, res),
                                   qb = put(be, q0), kb = put(be, kv0), vb = put(be, kv0),
                                   ob = put(be, f0), tb = put(be, f0), hb = put(be, res),
                                   gb = put(be, gamma), nb = put(be, x);
                const cb::pre_norm pn{gb.as<float>(), 1e-5f, nb.as<float>(), ldx};
                const cb::pre_norm* norm = normed ? &pn : nullptr;
                const cb::matmul_out outs[3] = {
                    {view_of(tc.q, wqb, QD, E), qb.as<float>(), ldq, bqb.as<float>()},
                    {view_of(tc.q, wkb, KD, E), kb.as<float>(), ldkv, bkb.as<float>()},
                    {view_of(tc.v, wvb, KD, E), vb.as<float>(), ldkv, bvb.as<float>()}};
                const cb::weight_view down = view_of(tc.v, wdb, E, FF);
                const cb::weight_view gate = view_of(tc.gate, wgb, FF, E),
                                      up = view_of(tc.up, wub, FF, E);
                if (fused) {
                    be.matmuls(xb.as<float>(), m, ldx, outs, 3, norm);
                    be.matmul_add(down, fb.as<float>(), m, ldf, rb.as<float>(), ldo,
                                  hb.as<float>());
                    be.matmul_swiglu(gate, up, xb.as<float>(), m, ldx, ob.as<float>(), ldf,
                                     tb.as<float>(), norm);
                } else {
                    be.backend::matmuls(xb.as<float>(), m, ldx, outs, 3, norm);
                    be.backend::matmul_add(down, fb.as<float>(), m, ldf, rb.as<float>(), ldo,
                                           hb.as<float>());
                    be.backend::matmul_swiglu(gate, up, xb.as<float>(), m, ldx, ob.as<float>(), ldf,
                                              tb.as<float>(), norm);
                }
                return std::vector<std::vector<float>>{get<float>(be, qb, q0.size()),
                                                       get<float>(be, kb, kv0.size()),
                                                       get<float>(be, vb, kv0.size()),
                                                       get<float>(be, rb, res.size()),
                                                       get<float>(be, ob, f0.size())};
            };
            const std::string name = shape("fused matmuls", tc.q, m, QD, E) + " v " +
                                     cb::dtype_name(tc.v) + " gate/up " + cb::dtype_name(tc.gate) +
                                     "/" + cb::dtype_name(tc.up) + (normed ? " normed" : "");
            check({name, k_nmse_matmul, [&](cb::backend& be) { return run(be, true); }});
            for (const candidate& cand : candidates()) {
                std::unique_ptr<cb::backend> be = cand.make();
                EXPECT_EQ(run(*be, true), run(*be, false)) << cand.name << ": " << name;
            }
        }
    }
}

// backend::record: ops recorded once read their inputs as they are at each replay, and a
// replay is the ops called one by one, bit for bit (the same kernels). An op that needs scratch
// memory (a GEMM batch) is not recorded: record throws, nothing ran, and the backend goes on,
// its earlier recording included. The CPU records nothing.
TEST(BackendOps, RecordedOpsReplayAsTheOpsCalledOneByOne) {
    const int64_t n = 512, k = 256, rows = 128;
    const std::vector<uint8_t> wq = make_weights(dtype::q4_k, n, k, 41);
    const std::vector<float> gamma = random_vec(size_t(k), 42);
    const std::vector<float> batch = random_vec(size_t(rows * k), 43);
    for (const candidate& cand : candidates()) {
        SCOPED_TRACE(cand.name);
        std::unique_ptr<cb::backend> be = cand.make();
        cb::backend_buffer wb = put(*be, wq), gb = put(*be, gamma), bb = put(*be, batch);
        cb::backend_buffer xb(*be, k * 4), hb(*be, k * 4), yb(*be, n * 4), yref(*be, n * 4);
        cb::backend_buffer by(*be, rows * n * 4);
        const cb::weight_view w = view_of(dtype::q4_k, wb, n, k);
        auto ops = [&](float* y) {
            be->rms_norm(xb.as<float>(), 1, k, k, gb.as<float>(), 1e-6f, hb.as<float>(), k);
            be->matmul(w, hb.as<float>(), 1, k, y, n, nullptr);
            be->add_rows(y, hb.as<float>(), 1, k, k);
        };
        std::unique_ptr<cb::recorded_ops> rec = be->record([&] { ops(yb.as<float>()); });
        if (!rec) {
            ASSERT_TRUE(be->host_memory()) << "a device backend records (CBL_CUDA_GRAPHS=0?)";
            continue;
        }
        for (uint32_t round = 0; round < 3; ++round) {
            const std::vector<float> x = random_vec(size_t(k), 50 + round);
            be->upload(xb.as<void>(), x.data(), x.size() * sizeof(float));
            rec->replay();
            ops(yref.as<float>());
            const std::vector<float> got = get<float>(*be, yb, size_t(n));
            EXPECT_EQ(got, get<float>(*be, yref, size_t(n))) << "replay " << round;
            EXPECT_NE(got[0], 0.f);
        }
        const std::vector<float> marker(size_t(rows * n), 7.f);
        be->upload(by.as<void>(), marker.data(), marker.size() * sizeof(float));
        try {
            be->record([&] { be->matmul(w, bb.as<float>(), rows, k, by.as<float>(), n, nullptr); });
            ADD_FAILURE() << "a GEMM batch's scratch was recorded";
        } catch (const cb::kernel_error& e) {
            EXPECT_EQ(e.code(), cb::kernel_status::unsupported) << e.what();
        }
        EXPECT_EQ(get<float>(*be, by, marker.size()), marker);  // the refused recording ran nothing
        be->matmul(w, bb.as<float>(), rows, k, by.as<float>(), n, nullptr);
        EXPECT_TRUE(std::isfinite(get<float>(*be, by, size_t(rows * n))[size_t(rows * n) - 1]));
        rec->replay();
        EXPECT_EQ(get<float>(*be, yb, size_t(n)), get<float>(*be, yref, size_t(n)));
    }
}

TEST(BackendOps, KvDeviation) {
    for (int64_t width : {64, 192, 1000}) {
        const int64_t n = 300, ld_f = width + 3, ld_c = width + 5;
        const std::vector<float> fresh = random_vec(size_t(n * ld_f), 17, -2.f, 2.f);
        const std::vector<uint16_t> cached = to_f16(random_vec(size_t(n * ld_c), 18, -2.f, 2.f));
        check({"kv_deviation width=" + std::to_string(width), k_nmse_row, [&](cb::backend& be) {
                   cb::backend_buffer fb = put(be, fresh), cb_ = put(be, cached);
                   cb::backend_buffer db(be, size_t(n) * sizeof(float));
                   be.kv_deviation(fb.as<float>(), ld_f, cb_.as<uint16_t>(), ld_c, n, width,
                                   db.as<float>());
                   return std::vector<std::vector<float>>{get<float>(be, db, size_t(n))};
               }});
    }
}

// The query selection policies' signal: each (query row, head)'s softmax over its visible keys,
// summed per key.
TEST(BackendOps, AttentionMass) {
    std::vector<int32_t> question;  // the question's rows at the end of a blended prompt
    for (int32_t p = 2990; p < 3000; ++p) question.push_back(p);
    const attn_case cases[] = {
        {12, 2, 128, 3000, question},          // Qwen2.5-1.5B shape
        {4, 4, 128, 50, {0, 10, 49, 60, -1}},  // MHA; past the keys; no visible key
        {8, 1, 80, 130, {5, 129}},             // MQA, head_dim not a multiple of 32
    };
    for (const attn_case& mc : cases) {
        const std::vector<float> q = random_vec(size_t(mc.n_q() * mc.q_ld()), 21, -2.f, 2.f);
        const std::vector<uint16_t> k = to_f16(random_vec(size_t(mc.n_keys * mc.kv_ld()), 22));
        const std::string name = "attention_mass heads=" + std::to_string(mc.n_head) + "/" +
                                 std::to_string(mc.n_kv_head) + " n_q=" + std::to_string(mc.n_q()) +
                                 " n_keys=" + std::to_string(mc.n_keys);
        check({name, k_nmse_row, [&](cb::backend& be) {
                   cb::backend_buffer qb = put(be, q), pb = put(be, mc.q_pos), kb = put(be, k);
                   cb::backend_buffer sb(be, size_t(mc.n_keys) * sizeof(float));
                   be.attention_mass(args_of(mc, qb, pb, kb), sb.as<float>());
                   return std::vector<std::vector<float>>{get<float>(be, sb, size_t(mc.n_keys))};
               }});
    }
}

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    const std::string why = find_candidates();
    if (candidates().empty()) {
        std::printf("test_backend_ops: SKIPPED: %s; no backend to compare with the CPU\n",
                    why.c_str());
        return 77;
    }
    for (const candidate& c : candidates()) std::printf("test_backend_ops: backend %s\n",
                                                        c.name.c_str());
    return RUN_ALL_TESTS();
}
