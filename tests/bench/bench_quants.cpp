// Decode GEMV: one quantized activation row times a quantized weight matrix, single thread,
// per ISA level. Reports GB/s of weight bytes streamed. "cold" cycles through 192 MiB of weight
// copies so the weights come from DRAM, as in decode (96 MB of weights per token > 32 MB L3).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants.h"
#include "kernels/cpu/thread-pool.h"
#include "kernels/dtype.h"
#include "kernels/memory.h"

using namespace cacheblend;

namespace {

struct gemv_data {
    aligned_array<uint8_t> w;
    std::vector<uint8_t> a;
    std::vector<float> out;
    size_t row_bytes = 0;
    size_t mat_bytes = 0;
    int64_t copies = 1;
};

gemv_data make_data(dtype t, int64_t rows, int64_t cols, bool cold) {
    gemv_data g;
    g.row_bytes = dtype_row_bytes(t, cols);
    g.mat_bytes = g.row_bytes * rows;
    g.copies = cold ? std::max<int64_t>(1, (192ll << 20) / static_cast<int64_t>(g.mat_bytes)) : 1;
    g.w.resize(g.mat_bytes * g.copies);
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
        for (float& x : row) x = dist(rng);
        quantize_row(t, row.data(), g.w.data() + r * g.row_bytes, cols);
    }
    for (int64_t c = 1; c < g.copies; ++c) {
        std::memcpy(g.w.data() + c * g.mat_bytes, g.w.data(), g.mat_bytes);
    }
    for (float& x : row) x = dist(rng);
    g.a.resize(dtype_row_bytes(vec_dot_type(t), cols));
    quantize_row(vec_dot_type(t), row.data(), g.a.data(), cols);
    g.out.resize(rows);
    return g;
}

void bm_gemv(benchmark::State& state) {
    const dtype t = static_cast<dtype>(state.range(0));
    const int64_t rows = state.range(1), cols = state.range(2);
    const cpu_isa isa = static_cast<cpu_isa>(state.range(3));
    const bool cold = state.range(4) != 0;
    if (static_cast<int>(isa) > static_cast<int>(cpu_isa_detected())) {
        state.SkipWithError("ISA level not available on this machine");
        return;
    }
    cpu_isa_set_override(isa);
    gemv_data g = make_data(t, rows, cols, cold);
    int64_t c = 0;
    for (auto _ : state) {
        vec_dot_rows(t, cols, g.w.data() + c * g.mat_bytes, g.row_bytes, rows, g.a.data(),
                     g.out.data());
        benchmark::DoNotOptimize(g.out.data());
        benchmark::ClobberMemory();
        if (++c == g.copies) c = 0;
    }
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(g.mat_bytes),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
    state.SetLabel(std::string(dtype_name(t)) + " " + cpu_isa_name(isa) + (cold ? " cold" : ""));
    cpu_isa_set_override(cpu_isa_detected());
}

void gemv_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"type", "rows", "cols", "isa", "cold"});
    for (dtype t : {dtype::q4_1, dtype::q8_0}) {
        for (auto shape : {std::pair<int64_t, int64_t>{576, 1536}, {1536, 576}, {49152, 576}}) {
            for (int isa = 0; isa <= 2; ++isa) {
                for (int cold = 0; cold <= 1; ++cold) {
                    b->Args({static_cast<int64_t>(t), shape.first, shape.second, isa, cold});
                }
            }
        }
    }
}

BENCHMARK(bm_gemv)->Apply(gemv_args)->Unit(benchmark::kMicrosecond);

// All decode GEMVs of one SmolLM2-135M token (30 layers of q/k/v/o/gate/up/down in q4_1, the
// tied 49152x576 q8_0 output): ~96 MB of weights, split by rows over the benchmark's threads
// as the decode matmul does. tok/s here is the GEMV-only ceiling of decode.
struct decode_model {
    struct mat {
        dtype t;
        int64_t rows, cols;
        size_t row_bytes;
        const uint8_t* w;
        const uint8_t* a;
    };
    std::vector<mat> mats;
    aligned_array<uint8_t> weights;
    std::vector<uint8_t> act_q8_0, act_q8_1, act_q8_1_ffn;
    size_t total = 0;
};

const decode_model& get_decode_model() {
    static const decode_model m = [] {
        decode_model d;
        struct shape {
            dtype t;
            int64_t rows, cols;
        };
        std::vector<shape> shapes;
        for (int l = 0; l < 30; ++l) {
            for (auto s : {shape{dtype::q4_1, 576, 576},
                           {dtype::q4_1, 192, 576},
                           {dtype::q4_1, 192, 576},
                           {dtype::q4_1, 576, 576},
                           {dtype::q4_1, 1536, 576},
                           {dtype::q4_1, 1536, 576},
                           {dtype::q4_1, 576, 1536}}) {
                shapes.push_back(s);
            }
        }
        shapes.push_back({dtype::q8_0, 49152, 576});
        for (const shape& s : shapes) d.total += dtype_row_bytes(s.t, s.cols) * s.rows;
        d.weights.resize(d.total);
        std::mt19937 rng(5);
        std::normal_distribution<float> dist(0.f, 1.f);
        std::vector<float> row(1536);
        for (float& x : row) x = dist(rng);
        d.act_q8_0.resize(dtype_row_bytes(dtype::q8_0, 576));
        d.act_q8_1.resize(dtype_row_bytes(dtype::q8_1, 576));
        d.act_q8_1_ffn.resize(dtype_row_bytes(dtype::q8_1, 1536));
        quantize_row(dtype::q8_0, row.data(), d.act_q8_0.data(), 576);
        quantize_row(dtype::q8_1, row.data(), d.act_q8_1.data(), 576);
        quantize_row(dtype::q8_1, row.data(), d.act_q8_1_ffn.data(), 1536);
        size_t off = 0;
        for (const shape& s : shapes) {
            const size_t rb = dtype_row_bytes(s.t, s.cols);
            uint8_t* w = d.weights.data() + off;
            for (int64_t r = 0; r < s.rows; ++r) {
                if (r < 64) {
                    for (int64_t c = 0; c < s.cols; ++c) row[c] = dist(rng);
                    quantize_row(s.t, row.data(), w + r * rb, s.cols);
                } else {
                    std::memcpy(w + r * rb, w + (r % 64) * rb, rb);
                }
            }
            const uint8_t* a = s.t == dtype::q8_0 ? d.act_q8_0.data()
                               : s.cols == 1536   ? d.act_q8_1_ffn.data()
                                                  : d.act_q8_1.data();
            d.mats.push_back({s.t, s.rows, s.cols, rb, w, a});
            off += rb * s.rows;
        }
        return d;
    }();
    return m;
}

void bm_decode_sim(benchmark::State& state) {
    const cpu_isa isa = static_cast<cpu_isa>(state.range(0));
    const int nt = static_cast<int>(state.range(1));
    if (static_cast<int>(isa) > static_cast<int>(cpu_isa_detected())) {
        state.SkipWithError("ISA level not available on this machine");
        return;
    }
    cpu_isa_set_override(isa);
    const decode_model& m = get_decode_model();
    std::vector<float> out(49152);
    thread_pool pool(nt);
    for (auto _ : state) {
        // One pool.run per matrix, rows split in multiples of 4: a barrier per matmul as in
        // the forward pass.
        for (const auto& mt : m.mats) {
            pool.run([&](int ith, int nth) {
                const int64_t r0 = (mt.rows * ith / nth) & ~3;
                const int64_t r1 = ith + 1 == nth ? mt.rows : (mt.rows * (ith + 1) / nth) & ~3;
                vec_dot_rows(mt.t, mt.cols, mt.w + r0 * mt.row_bytes, mt.row_bytes, r1 - r0, mt.a,
                             out.data() + r0);
            });
        }
        benchmark::ClobberMemory();
    }
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(m.total),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
    state.counters["tok/s"] =
        benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(std::string(cpu_isa_name(isa)) + " " + std::to_string(nt) + " threads");
    cpu_isa_set_override(cpu_isa_detected());
}

BENCHMARK(bm_decode_sim)
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Other weight types of common Q4_K_M downloads, hot only, 1536x576-ish shapes.
void other_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"type", "rows", "cols", "isa", "cold"});
    for (dtype t : {dtype::q4_0, dtype::q5_0, dtype::q5_1, dtype::q4_k, dtype::q6_k, dtype::q2_k,
                    dtype::q3_k, dtype::q5_k, dtype::f16, dtype::bf16, dtype::f32}) {
        const int64_t cols = (t == dtype::q4_k || t == dtype::q6_k || t == dtype::q2_k ||
                              t == dtype::q3_k || t == dtype::q5_k)
                                 ? 1536
                                 : 576;
        const int64_t rows = cols == 1536 ? 576 : 1536;
        for (int isa = 0; isa <= 2; ++isa) {
            b->Args({static_cast<int64_t>(t), rows, cols, isa, 0});
        }
    }
}

BENCHMARK(bm_gemv)->Name("bm_gemv_other")->Apply(other_args)->Unit(benchmark::kMicrosecond);

// Activation quantization and weight-panel dequantization (prefill GEMM), per element.
void bm_quantize_act(benchmark::State& state) {
    const dtype t = static_cast<dtype>(state.range(0));
    const cpu_isa isa = static_cast<cpu_isa>(state.range(1));
    if (static_cast<int>(isa) > static_cast<int>(cpu_isa_detected())) {
        state.SkipWithError("ISA level not available on this machine");
        return;
    }
    cpu_isa_set_override(isa);
    const int64_t n = 1536;
    std::vector<float> x(n);
    std::mt19937 rng(2);
    std::normal_distribution<float> dist(0.f, 1.f);
    for (float& v : x) v = dist(rng);
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    for (auto _ : state) {
        quantize_row(t, x.data(), q.data(), n);
        benchmark::DoNotOptimize(q.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
    state.SetLabel(std::string(dtype_name(t)) + " " + cpu_isa_name(isa));
    cpu_isa_set_override(cpu_isa_detected());
}

BENCHMARK(bm_quantize_act)
    ->ArgsProduct({{static_cast<int64_t>(dtype::q8_0), static_cast<int64_t>(dtype::q8_1),
                    static_cast<int64_t>(dtype::q8_k)},
                   {0, 1, 2}});

void bm_dequantize(benchmark::State& state) {
    const dtype t = static_cast<dtype>(state.range(0));
    const cpu_isa isa = static_cast<cpu_isa>(state.range(1));
    if (static_cast<int>(isa) > static_cast<int>(cpu_isa_detected())) {
        state.SkipWithError("ISA level not available on this machine");
        return;
    }
    cpu_isa_set_override(isa);
    const int64_t n = 1536 * 64;  // a 64-row panel of 1536 columns
    std::vector<float> x(n), y(n);
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.f, 1.f);
    for (float& v : x) v = dist(rng);
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    for (auto _ : state) {
        dequantize_row(t, q.data(), y.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
    state.SetLabel(std::string(dtype_name(t)) + " " + cpu_isa_name(isa));
    cpu_isa_set_override(cpu_isa_detected());
}

BENCHMARK(bm_dequantize)
    ->ArgsProduct({{static_cast<int64_t>(dtype::q4_1), static_cast<int64_t>(dtype::q8_0),
                    static_cast<int64_t>(dtype::q4_0), static_cast<int64_t>(dtype::q5_0),
                    static_cast<int64_t>(dtype::q4_k), static_cast<int64_t>(dtype::q6_k),
                    static_cast<int64_t>(dtype::f16)},
                   {0, 1, 2}});

}  // namespace

BENCHMARK_MAIN();
