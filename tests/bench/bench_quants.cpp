// Decode GEMV: one quantized activation row times a quantized weight matrix, single thread,
// per ISA level. Reports GB/s of weight bytes streamed. "cold" cycles through 192 MiB of weight
// copies so the weights come from DRAM, as in decode (96 MB of weights per token > 32 MB L3).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants.h"
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

// Other weight types of common Q4_K_M downloads, hot only, 1536x576-ish shapes.
void other_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"type", "rows", "cols", "isa", "cold"});
    for (dtype t : {dtype::q4_0, dtype::q5_0, dtype::q5_1, dtype::q4_k, dtype::q6_k, dtype::q2_k,
                    dtype::q3_k, dtype::q5_k, dtype::f16, dtype::bf16, dtype::f32}) {
        const int64_t cols = (t == dtype::q4_k || t == dtype::q6_k || t == dtype::q2_k ||
                              t == dtype::q3_k || t == dtype::q5_k) ? 1536 : 576;
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
