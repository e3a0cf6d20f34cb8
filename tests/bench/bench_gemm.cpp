// Throughput of the forward pass's compute kernels on SmolLM2-135M shapes:
//   matmul     GFLOP/s for f32 / q4_1 (/ q8_0 head) weights, prefill (m = 512, 2048) and decode
//   attention  GFLOP/s for causal prefill (512, 2048 tokens) and one decode query
//   pool       thread_pool::run round trip
// Run: build/bin/bench_gemm [--benchmark_filter=...] [--benchmark_repetitions=N]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants.h"
#include "kernels/fp16.h"

namespace cb = cacheblend;
using cb::dtype;

namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

struct weights {
    std::vector<unsigned char> data;
    cb::weight_view view;
};

weights make_weights(dtype t, int64_t rows, int64_t cols) {
    weights w;
    const size_t rb = cb::dtype_row_bytes(t, cols);
    w.data.resize(rb * rows);
    const std::vector<float> row = random_vec(static_cast<size_t>(cols), 1);
    std::vector<float> tmp(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) tmp[c] = row[(c + r) % cols] * (1.f + 0.001f * r);
        cb::quantize_row(t, tmp.data(), w.data.data() + r * rb, cols);
    }
    w.view.type = t;
    w.view.data = w.data.data();
    w.view.rows = rows;
    w.view.cols = cols;
    w.view.row_bytes = rb;
    return w;
}

// Args: type, m, n (output rows), k, threads.
void bm_matmul(benchmark::State& st) {
    const auto t = static_cast<dtype>(st.range(0));
    const int64_t m = st.range(1), n = st.range(2), k = st.range(3);
    cb::thread_pool pool(static_cast<int>(st.range(4)));
    const weights w = make_weights(t, n, k);
    const std::vector<float> x = random_vec(static_cast<size_t>(m * k), 2);
    std::vector<float> y(static_cast<size_t>(m * n));
    for (auto _ : st) {
        cb::matmul(pool, w.view, x.data(), m, k, y.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    st.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * st.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
    st.SetLabel(cb::dtype_name(t));
}

void matmul_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"type", "m", "n", "k", "threads"});
    for (dtype t : {dtype::f32, dtype::q4_1}) {
        for (int64_t m : {512, 2048}) {
            for (auto nk : {std::pair<int64_t, int64_t>{576, 576}, {192, 576}, {1536, 576},
                            {576, 1536}}) {
                for (int th : {1, 2}) {
                    b->Args({static_cast<int64_t>(t), m, nk.first, nk.second, th});
                }
            }
        }
    }
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(bm_matmul)->Apply(matmul_args);

void decode_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"type", "m", "n", "k", "threads"});
    for (int th : {1, 2}) {
        b->Args({static_cast<int64_t>(dtype::q8_0), 1, 49152, 576, th});  // tied output head
        b->Args({static_cast<int64_t>(dtype::q4_1), 1, 49152, 576, th});
        b->Args({static_cast<int64_t>(dtype::q4_1), 1, 1536, 576, th});
        b->Args({static_cast<int64_t>(dtype::q4_1), 1, 576, 1536, th});
        b->Args({static_cast<int64_t>(dtype::q4_1), 4, 576, 576, th});
        b->Args({static_cast<int64_t>(dtype::q4_1), 8, 576, 576, th});
        b->Args({static_cast<int64_t>(dtype::q4_1), 16, 576, 576, th});
    }
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(bm_matmul)->Name("bm_matmul_decode")->Apply(decode_args);

// The decode matmuls of Qwen2.5-Coder-1.5B Q4_K_M, cold: 10 layers (q, k, v, o, gate, up, down
// of d 1536, ffn 8960, 2 KV heads; v and down in q6_K every other layer, as llama.cpp's Q4_K_M
// mix does), ~260 MB of weights, more than any L3, so the weights stream from DRAM as in a real
// token. GB/s of weight bytes is what to compare with the machine's read bandwidth.
// Args: threads, layers (1: hot, in L3; 10: cold).
struct cold_layers {
    std::vector<weights> mats;
    size_t bytes = 0;
};

const cold_layers& qwen15_layers() {
    static const cold_layers c = [] {
        cold_layers d;
        const int64_t dm = 1536, ff = 8960, kv = 256;
        for (int l = 0; l < 10; ++l) {
            const dtype vd = l % 2 ? dtype::q6_k : dtype::q4_k;
            const std::pair<dtype, std::pair<int64_t, int64_t>> shapes[] = {
                {dtype::q4_k, {dm, dm}}, {dtype::q4_k, {kv, dm}}, {vd, {kv, dm}},
                {dtype::q4_k, {dm, dm}}, {dtype::q4_k, {ff, dm}}, {dtype::q4_k, {ff, dm}},
                {vd, {dm, ff}}};
            for (const auto& s : shapes) {
                // 64 quantized rows repeated: random-enough weights without minutes of quantizing.
                weights w = make_weights(s.first, 64, s.second.second);
                const size_t rb = w.view.row_bytes;
                w.data.resize(rb * s.second.first);
                for (int64_t r = 64; r < s.second.first; ++r) {
                    std::copy_n(w.data.begin() + (r % 64) * rb, rb, w.data.begin() + r * rb);
                }
                w.view.data = w.data.data();
                w.view.rows = s.second.first;
                d.bytes += w.data.size();
                d.mats.push_back(std::move(w));
            }
        }
        return d;
    }();
    return c;
}

void bm_decode_qwen15_cold(benchmark::State& st) {
    cb::thread_pool pool(static_cast<int>(st.range(0)));
    const cold_layers& c = qwen15_layers();
    const size_t n_mats = static_cast<size_t>(st.range(1)) * 7;  // 1 layer (26 MB) stays in L3
    size_t bytes = 0;
    for (size_t i = 0; i < n_mats; ++i) bytes += c.mats[i].data.size();
    const std::vector<float> x = random_vec(8960, 6);
    std::vector<float> y(8960);
    for (auto _ : st) {
        for (size_t i = 0; i < n_mats; ++i) {
            const weights& w = c.mats[i];
            cb::matmul(pool, w.view, x.data(), 1, w.view.cols, y.data(), w.view.rows);
        }
        benchmark::DoNotOptimize(y.data());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * st.iterations() / 1e9,
                                             benchmark::Counter::kIsRate);
}
BENCHMARK(bm_decode_qwen15_cold)
    ->ArgNames({"threads", "layers"})
    ->ArgsProduct({{1, 2}, {1, 10}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// SmolLM2-135M attention for one layer: 9 query heads, 3 KV heads, head_dim 64.
// Args: n_q (queries; 1 = decode of the last position), n_keys, threads.
void bm_attention(benchmark::State& st) {
    const int64_t n_q = st.range(0), n_keys = st.range(1);
    cb::thread_pool pool(static_cast<int>(st.range(2)));
    const int n_head = 9, n_kv = 3, d = 64;
    const std::vector<float> q = random_vec(static_cast<size_t>(n_q * n_head * d), 3);
    const std::vector<float> kf = random_vec(static_cast<size_t>(n_keys * n_kv * d), 4);
    const std::vector<float> vf = random_vec(kf.size(), 5);
    std::vector<uint16_t> k(kf.size()), v(vf.size());
    cb::fp32_to_fp16_row(kf.data(), k.data(), static_cast<int64_t>(k.size()));
    cb::fp32_to_fp16_row(vf.data(), v.data(), static_cast<int64_t>(v.size()));
    std::vector<int32_t> pos(static_cast<size_t>(n_q));
    for (int64_t i = 0; i < n_q; ++i) pos[i] = static_cast<int32_t>(n_keys - n_q + i);
    std::vector<float> out(q.size());
    cb::attention_args a;
    a.q = q.data();
    a.n_q = n_q;
    a.q_stride = n_head * d;
    a.q_pos = pos.data();
    a.k = k.data();
    a.v = v.data();
    a.kv_stride = n_kv * d;
    a.n_keys = n_keys;
    a.n_head = n_head;
    a.n_kv_head = n_kv;
    a.head_dim = d;
    a.scale = 1.f / std::sqrt(static_cast<float>(d));
    a.out = out.data();
    a.out_stride = n_head * d;
    double pairs = 0;  // visible (query, key) pairs
    for (int64_t i = 0; i < n_q; ++i) pairs += pos[i] + 1;
    for (auto _ : st) {
        cb::attention(pool, a);
        benchmark::DoNotOptimize(out.data());
    }
    // QK^T and PV: 2 flops per multiply-add, 2 * head_dim multiply-adds per pair and head.
    st.counters["GFLOP/s"] = benchmark::Counter(pairs * n_head * d * 4.0 * st.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(bm_attention)
    ->ArgNames({"n_q", "n_keys", "threads"})
    ->Args({512, 512, 1})->Args({512, 512, 2})
    ->Args({2048, 2048, 1})->Args({2048, 2048, 2})
    ->Args({1, 2048, 1})->Args({1, 2048, 2})
    ->Args({1, 8192, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Round trip of an almost empty job. Mean time plus the median and 90th percentile of single runs
// (the median is what a decode step sees; the mean also carries descheduling on a busy machine).
void bm_pool_run(benchmark::State& st) {
    cb::thread_pool pool(static_cast<int>(st.range(0)));
    std::vector<int> sink(64 * 16);
    std::vector<double> lat;
    lat.reserve(1 << 20);
    for (auto _ : st) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.run([&](int ith, int) { sink[ith * 16] += 1; });
        const auto t1 = std::chrono::steady_clock::now();
        if (lat.size() < lat.capacity()) {
            lat.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
        }
    }
    benchmark::DoNotOptimize(sink.data());
    if (!lat.empty()) {
        std::sort(lat.begin(), lat.end());
        st.counters["p50_ns"] = lat[lat.size() / 2];
        st.counters["p90_ns"] = lat[lat.size() * 9 / 10];
    }
}
BENCHMARK(bm_pool_run)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kNanosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
