// The integer GEMM's prefill (kernels/cpu/igemm.h) on AMX tiles against AVX-512 VNNI, through
// matmul (activation quantization included) on Qwen2.5-Coder-1.5B shapes (d 1536, ffn 8960):
// GOP/s (2 m n k per call) to set against the machine's int8 peaks. The amx rows report an error
// on machines without AMX. Run on a Sapphire Rapids (or later) Xeon:
//   build/bin/bench_igemm_amx [--benchmark_filter=q4_K]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants.h"

namespace cb = cacheblend;
using cb::dtype;

namespace {

// Args: type, m, n (output rows), k, threads, isa (2 avx512, 3 amx).
void bm_igemm_prefill(benchmark::State& st) {
    const auto t = static_cast<dtype>(st.range(0));
    const int64_t m = st.range(1), n = st.range(2), k = st.range(3);
    const auto isa = static_cast<cb::cpu_isa>(st.range(5));
    const cb::cpu_isa saved = cb::cpu_isa_active();
    if (cb::cpu_isa_set_override(isa) != isa) {
        cb::cpu_isa_set_override(saved);
        st.SkipWithError("this CPU lacks the level");
        return;
    }
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> row(static_cast<size_t>(k));
    const size_t rb = cb::dtype_row_bytes(t, k);
    std::vector<unsigned char> wdata(rb * static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
        for (auto& v : row) v = dist(rng);
        cb::quantize_row(t, row.data(), wdata.data() + r * rb, k);
    }
    cb::weight_view w;
    w.type = t;
    w.data = wdata.data();
    w.rows = n;
    w.cols = k;
    w.row_bytes = rb;
    std::vector<float> x(static_cast<size_t>(m * k));
    for (auto& v : x) v = dist(rng);
    std::vector<float> y(static_cast<size_t>(m * n));
    cb::thread_pool pool(static_cast<int>(st.range(4)));
    for (auto _ : st) {
        cb::matmul(pool, w, x.data(), m, k, y.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    cb::cpu_isa_set_override(saved);
    st.counters["GOP/s"] = benchmark::Counter(2.0 * m * n * k * st.iterations() / 1e9, benchmark::Counter::kIsRate);
    st.SetLabel(std::string(cb::dtype_name(t)) + " " + cb::cpu_isa_name(isa));
}

void args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"type", "m", "n", "k", "threads", "isa"});
    for (dtype t : {dtype::q4_k, dtype::q6_k, dtype::q5_0}) {
        for (auto nk : {std::pair<int64_t, int64_t>{1536, 1536}, {8960, 1536}, {1536, 8960}}) {
            if (t == dtype::q5_0 && nk.second % 32 != 0) continue;
            for (int isa : {2, 3}) b->Args({static_cast<int64_t>(t), 512, nk.first, nk.second, 2, isa});
        }
    }
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(bm_igemm_prefill)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
