// cbl-engine-bench: the engine's speed on one device without the C ABI, the retrieval libraries
// or a tokenizer pass, so it builds where only the engine does (CBL_ENGINE_ONLY, GPU machines;
// scripts/gpu-check.sh). Prefill of 512 tokens and decode of 128 (tokens/s, median of 3 runs after
// a warm-up, token ids drawn from the vocabulary with a fixed seed, as `cacheblend bench` does;
// decode also op by op where the device replays a recorded step: CUDA graphs against launches),
// then time to first token of a RAG-shaped prompt (preamble, 6 chunks of 380 tokens, a 16-token
// question) in full prefill and blended at r = 0.15 from a temporary f16 KV store, and how fast
// the blend's loader reads that store's layers (checked, copied into its host buffers) with 1, 2,
// 4 and 8 threads: on a GPU that rate, not compute, can bound the blended TTFT.
//   cbl-engine-bench MODEL [--device D] [--threads N] [--smoke]
// MODEL is a file or a model name (core/model/model-registry.h). --smoke: tiny sizes and one run
// each, to prove the tool works (ctest: cbl_engine_bench_smoke). Prints one JSON object per line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/blend/blend-loader.h"
#include "core/blend/blend.h"
#include "core/engine/session.h"
#include "core/kvstore/kv-store.h"
#include "core/model/model-registry.h"
#include "core/model/model.h"
#include "core/prompt/rag-prompt.h"
#include "util/random-tokens.h"

using namespace cacheblend;

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// What one invocation measures.
struct sizes {
    int prefill = 512, decode = 128, chunks = 6, chunk_tokens = 380, runs = 3;
};

// Median of `runs` timed runs, after one warm-up when there are several.
template <typename F>
double timed(int runs, F&& run) {
    if (runs > 1) run();
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = clock_type::now();
        run();
        ms.push_back(ms_since(t0));
    }
    return median(ms);
}

// The blend's loader alone over every stored layer of the request's chunks (page cache warm):
// GB/s of store bytes read, checked and copied into the loader's host buffers (keys as stored, as
// the blend reads them).
void bench_load(session& s, blend_engine& eng, kv_store& store, const blend_request& req,
                int runs) {
    const int32_t n_layer = s.get_model().hparams().n_layer;
    std::vector<int32_t> layers;
    for (int32_t l = 0; l < n_layer; ++l) layers.push_back(l);
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    loader_memory mem;
    for (int threads : {1, 2, 4, 8}) {
        if (threads > 1 && static_cast<unsigned>(threads) > cores) break;
        uint64_t bytes = 0;
        const double ms = timed(runs, [&] {
            std::vector<std::unique_ptr<chunk_kv_reader>> owned;
            std::vector<chunk_kv_reader*> readers;
            std::vector<int64_t> offsets;
            int64_t rows = 0;
            for (const auto& c : req.chunks) {
                const auto n = static_cast<int32_t>(c.size());  // stored: the chunk's rows
                owned.push_back(store.lookup(eng.key_of(req.preamble, c), eng.meta_of(n)));
                if (!owned.back())
                    throw std::runtime_error("bench_load: a stored chunk is missing");
                readers.push_back(owned.back().get());
                offsets.push_back(rows);
                rows += owned.back()->meta().n_tokens;
            }
            layer_loader loader(s.get_backend(), &mem, readers, offsets, rows,
                                s.get_model().hparams().kv_dim(),
                                stored_k_type(blend_params{}.format), layers, threads);
            double wait = 0;
            for (int32_t l : layers) {
                loader.acquire(l, &wait);
                loader.release(l);
            }
            bytes = loader.bytes();
        });
        std::printf(
            "{\"bench\":\"kv_load\",\"device\":\"%s\",\"threads\":%d,\"bytes\":%llu,"
            "\"ms\":%.1f,\"gb_per_s\":%.2f}\n",
            s.get_backend().name(), threads, static_cast<unsigned long long>(bytes), ms,
            static_cast<double>(bytes) / (ms * 1e6));
    }
}

void bench(const std::string& path, const std::string& device, int threads, const sizes& z) {
    const std::shared_ptr<const model> m = model::load(path);
    session_params sp;
    sp.device = device;
    sp.n_threads = threads;
    sp.n_ctx = 4096;
    session s(m, sp);
    const char* dev = s.get_backend().name();

    const std::vector<token_id> prompt = cbltest::random_tokens(*m, z.prefill, 1);
    const double prefill_ms = timed(z.runs, [&] {
        s.reset();
        s.prefill(prompt);
    });
    std::printf("{\"bench\":\"prefill\",\"device\":\"%s\",\"tokens\":%d,\"tokens_per_s\":%.1f}\n",
                dev, z.prefill, z.prefill * 1e3 / prefill_ms);

    // Decode as the engine runs it (on a device that records, one recorded step replayed per
    // token: core/engine/forward.h) and, where it recorded, op by op for the comparison.
    const std::vector<token_id> p16 = cbltest::random_tokens(*m, 16, 2);
    for (const bool record : {true, false}) {
        s.engine(1).set_decode_recording(record);
        const double decode_ms = timed(z.runs, [&] {
            s.reset();
            s.prefill(p16);
            for (int i = 0; i < z.decode; ++i) s.decode(p16[size_t(i % 16)]);
        });
        // The 16-token prefill is in the time too; it is small beside 128 decode steps.
        const forward_engine& fwd = s.engine(1);
        const bool replayed = fwd.decode_replays() > 0;
        std::string why = replayed ? "" : fwd.decode_recording_off();
        std::replace(why.begin(), why.end(), '"', '\'');
        std::printf(
            "{\"bench\":\"%s\",\"device\":\"%s\",\"tokens\":%d,\"tokens_per_s\":%.1f,"
            "\"replayed\":%s,\"op_by_op_why\":\"%s\"}\n",
            record ? "decode" : "decode_op_by_op", dev, z.decode, z.decode * 1e3 / decode_ms,
            replayed ? "true" : "false", why.c_str());
        std::fflush(stdout);
        if (!replayed) break;  // nothing recorded: the op-by-op run would be the same one
    }
    s.engine(1).set_decode_recording(true);

    blend_request req;
    req.preamble = cbltest::random_tokens(*m, 24, 3);
    for (int c = 0; c < z.chunks; ++c) {
        req.chunks.push_back(cbltest::random_tokens(*m, z.chunk_tokens, 10 + uint32_t(c)));
    }
    req.question = cbltest::random_tokens(*m, 16, 4);
    char tmpl[] = "/tmp/cbl-engine-bench-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    const std::string dir = tmpl;
    double full_ms = 0, blend_ms = 0;
    blend_stats st;  // the last blended run's: where its time went
    {
        kv_store_params kp;
        kp.dir = dir + "/kv";
        std::shared_ptr<kv_store> store = kv_store::open(kp);
        blend_params bp;
        bp.write_back = false;
        bp.mode = blend_mode::full;
        blend_engine full(s, store, bp);
        full_ms = timed(z.runs, [&] { full.prefill(req, &st); });
        bp.mode = blend_mode::blend;
        blend_engine blend(s, store, bp);
        for (const auto& c : req.chunks) blend.precompute_chunk(req.preamble, c);
        blend_ms = timed(z.runs, [&] { blend.prefill(req, &st); });
        bench_load(s, blend, *store, req, z.runs);
    }
    const std::string rm = "rm -rf '" + dir + "'";
    if (std::system(rm.c_str()) != 0)
        std::fprintf(stderr, "cbl-engine-bench: %s failed\n", rm.c_str());
    // load_wait_ms: compute waiting for stored layers (on a device, uploads that did not hide
    // under the previous layer); relocate_ms and select_ms are host-side enqueue time there.
    std::printf(
        "{\"bench\":\"ttft\",\"device\":\"%s\",\"prompt_tokens\":%zu,\"full_ms\":%.1f,"
        "\"blend_ms\":%.1f,\"ratio\":0.15,\"speedup\":%.2f,\"blend_load_ms\":%.1f,"
        "\"blend_load_wait_ms\":%.1f,\"blend_dense_ms\":%.1f,\"blend_relocate_ms\":%.1f,"
        "\"blend_select_ms\":%.1f}\n",
        dev, request_prompt(req).size(), full_ms, blend_ms, full_ms / blend_ms, st.load_ms,
        st.load_wait_ms, st.dense_ms, st.relocate_ms, st.select_ms);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: cbl-engine-bench MODEL [--device D] [--threads N] [--smoke]\n");
        return 2;
    }
    std::string device = "cpu";
    int threads = 0;
    sizes z;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--smoke") {
            z = {64, 8, 2, 48, 1};
        } else if (a == "--device" && i + 1 < argc) {
            device = argv[++i];
        } else if (a == "--threads" && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "cbl-engine-bench: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    try {
        const model_ref ref = resolve_model(argv[1]);
        bench(ref.path, device, threads, z);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cbl-engine-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
