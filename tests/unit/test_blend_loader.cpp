// The blended prefill's layer loader (core/blend/blend-loader.h) with one and several reading
// threads: the same rows in the same places, a layer's chunks really read at once, the first
// failing reader reported and nothing after it published, and no hang when a request ends early.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/blend/blend-loader.h"
#include "core/util/error.h"
#include "kernels/cpu/backend-cpu.h"

using namespace cacheblend;

namespace {

constexpr int64_t k_kv_dim = 8;

// The value a fake chunk puts at (layer, token, column): distinct for every chunk, layer and cell.
float k_value(int chunk, int32_t layer, int64_t t, int64_t j) {
    return static_cast<float>(chunk * 100000 + layer * 1000 + t * k_kv_dim + j);
}
uint16_t v_value(int chunk, int32_t layer, int64_t t, int64_t j) {
    return static_cast<uint16_t>(chunk * 4000 + layer * 100 + t * k_kv_dim + j);
}
// K's bits when the loader asks for f16 keys (as the f16 format stores them): distinct as well.
uint16_t k16_value(int chunk, int32_t layer, int64_t t, int64_t j) {
    return static_cast<uint16_t>(v_value(chunk, layer, t, j) ^ 0x5555u);
}

// Counts how many reads of layer `rendezvous_layer` are in progress at once, across readers, and
// holds each such read until `want` are (or 2 s pass: a loader that reads one chunk at a time
// then shows a peak of 1 instead of hanging).
struct overlap_probe {
    std::mutex mu;
    std::condition_variable cv;
    int now = 0, peak = 0, want = 0;
    int32_t rendezvous_layer = -1;

    void enter() {
        std::unique_lock<std::mutex> lk(mu);
        peak = std::max(peak, ++now);
        cv.notify_all();
        cv.wait_for(lk, std::chrono::seconds(2), [&] { return now >= want || peak >= want; });
    }
    void leave() {
        std::lock_guard<std::mutex> lk(mu);
        --now;
    }
};

class fake_reader final : public chunk_kv_reader {
public:
    fake_reader(int chunk, int32_t n_tokens, int32_t n_layer, overlap_probe* probe = nullptr)
        : chunk_(chunk), probe_(probe) {
        meta_.n_layer = n_layer;
        meta_.n_tokens = n_tokens;
        meta_.n_kv_head = 2;
        meta_.head_dim = 4;
        tokens_.assign(static_cast<size_t>(n_tokens), 7);
    }
    const chunk_kv_meta& meta() const override { return meta_; }
    const std::vector<token_id>& tokens() const override { return tokens_; }
    uint64_t bytes_read() const override { return bytes_; }
    void read_layer_as(int32_t layer, void* k, dtype k_type, uint16_t* v, int64_t ld) override {
        if (layer == fail_layer) throw error(status::corrupt, "fake: layer is damaged");
        const bool probed = probe_ && layer == probe_->rendezvous_layer;
        if (probed) probe_->enter();
        for (int64_t t = 0; t < meta_.n_tokens; ++t) {
            for (int64_t j = 0; j < k_kv_dim; ++j) {
                if (k_type == dtype::f16) {
                    static_cast<uint16_t*>(k)[t * ld + j] = k16_value(chunk_, layer, t, j);
                } else {
                    static_cast<float*>(k)[t * ld + j] = k_value(chunk_, layer, t, j);
                }
                v[t * ld + j] = v_value(chunk_, layer, t, j);
            }
        }
        bytes_ += static_cast<uint64_t>(meta_.n_tokens) * k_kv_dim * 4;
        if (probed) probe_->leave();
    }
    int32_t fail_layer = -1;

private:
    int chunk_;
    overlap_probe* probe_;
    chunk_kv_meta meta_;
    std::vector<token_id> tokens_;
    uint64_t bytes_ = 0;
};

struct chunks {
    std::vector<std::unique_ptr<fake_reader>> owned;
    std::vector<chunk_kv_reader*> readers;
    std::vector<int64_t> offsets;
    int64_t n_rows = 0;

    chunks(const std::vector<int32_t>& sizes, int32_t n_layer, overlap_probe* probe = nullptr) {
        for (size_t c = 0; c < sizes.size(); ++c) {
            owned.push_back(
                std::make_unique<fake_reader>(static_cast<int>(c), sizes[c], n_layer, probe));
            readers.push_back(owned.back().get());
            offsets.push_back(n_rows);
            n_rows += sizes[c];
        }
    }
};

// Every row of `layer` holds its chunk's values, K in the type the loader was asked for.
void expect_layer(const chunks& ch, int32_t layer, const kv_layer_rows& rows) {
    for (size_t c = 0; c < ch.owned.size(); ++c) {
        const int32_t n = ch.owned[c]->meta().n_tokens;
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t j = 0; j < k_kv_dim; ++j) {
                const int64_t at = (ch.offsets[c] + t) * k_kv_dim + j;
                if (rows.k_type == dtype::f16) {
                    ASSERT_EQ(static_cast<const uint16_t*>(rows.k)[at],
                              k16_value(static_cast<int>(c), layer, t, j))
                        << "chunk " << c << " layer " << layer << " row " << t;
                } else {
                    ASSERT_EQ(static_cast<const float*>(rows.k)[at],
                              k_value(static_cast<int>(c), layer, t, j))
                        << "chunk " << c << " layer " << layer << " row " << t;
                }
                ASSERT_EQ(rows.v[at], v_value(static_cast<int>(c), layer, t, j));
            }
        }
    }
}

// Acquires layers [from, to) in order, checks each and lets its slot go.
void expect_layers(layer_loader& loader, const chunks& ch, int32_t from, int32_t to) {
    for (int32_t l = from; l < to; ++l) {
        double wait = 0;
        const kv_layer_rows rows = loader.acquire(l, &wait);
        expect_layer(ch, l, rows);
        loader.release(l);
    }
}

TEST(BlendLoader, EveryThreadCountFillsTheSameRows) {
    const auto be = make_cpu_backend(1);
    const chunks ch({5, 17, 1, 9, 33, 2, 12}, 6);
    for (int threads : {1, 2, 3, 7, 16}) {
        SCOPED_TRACE(threads);
        loader_memory mem;
        layer_loader loader(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim, dtype::f32,
                            {1, 2, 3, 4, 5}, threads);
        expect_layers(loader, ch, 1, 6);
        EXPECT_GT(loader.busy_ms(), 0);
    }
}

// f16 keys (the f16 format, as stored) land at the same rows, half as wide: the offsets into the
// K slot are in elements of the asked type.
TEST(BlendLoader, F16KeysLandAsStored) {
    const auto be = make_cpu_backend(1);
    const chunks ch({5, 17, 1, 9, 33}, 4);
    for (int threads : {1, 3}) {
        SCOPED_TRACE(threads);
        loader_memory mem;
        layer_loader loader(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim, dtype::f16,
                            {0, 1, 2, 3}, threads);
        EXPECT_EQ(loader.k_type(), dtype::f16);
        expect_layers(loader, ch, 0, 4);
    }
    loader_memory mem;
    EXPECT_THROW(layer_loader(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim, dtype::q8_0,
                              {0}, 1),
                 error)
        << "keys are f32 or f16";
}

TEST(BlendLoader, ALayersChunksAreReadAtOnce) {
    const auto be = make_cpu_backend(1);
    overlap_probe probe;
    probe.rendezvous_layer = 2;
    probe.want = 3;
    const chunks ch({4, 4, 4, 4, 4, 4}, 4, &probe);
    loader_memory mem;
    layer_loader loader(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim, dtype::f32,
                        {0, 1, 2, 3}, 3);
    expect_layers(loader, ch, 0, 4);
    EXPECT_EQ(probe.peak, 3) << "three threads read layer 2's six chunks";
}

TEST(BlendLoader, TheFailingReaderIsReportedAndItsLayerNeverPublished) {
    const auto be = make_cpu_backend(1);
    chunks ch({6, 6, 6, 6, 6}, 5);
    ch.owned[3]->fail_layer = 2;
    for (int threads : {1, 4}) {
        SCOPED_TRACE(threads);
        loader_memory mem;
        layer_loader loader(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim, dtype::f32,
                            {0, 1, 2, 3, 4}, threads);
        expect_layers(loader, ch, 0, 2);
        double wait = 0;
        try {
            loader.acquire(2, &wait);
            FAIL() << "layer 2 published";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::corrupt);
        }
        EXPECT_EQ(loader.failed_reader(), ch.readers[3]);
        EXPECT_THROW(loader.acquire(3, &wait), error) << "nothing is loaded after the failure";
    }
}

// A request that fails in compute destroys its loader with layers still to read: the threads
// stop (the test would hang otherwise) and every write into the slots is over.
TEST(BlendLoader, DestroyingMidStreamStopsEveryThread) {
    const auto be = make_cpu_backend(1);
    const chunks ch({64, 64, 64, 64, 64, 64, 64, 64}, 40);
    std::vector<int32_t> layers;
    for (int32_t l = 0; l < 40; ++l) layers.push_back(l);
    for (int threads : {1, 4}) {
        loader_memory mem;
        {
            layer_loader loader(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim, dtype::f32,
                                layers, threads);
            double wait = 0;
            loader.acquire(0, &wait);
        }
        {
            layer_loader never_acquired(*be, &mem, ch.readers, ch.offsets, ch.n_rows, k_kv_dim,
                                        dtype::f32, layers, threads);
        }
    }
}

TEST(BlendLoader, AutomaticThreadCountLeavesTheCpuBackendsCoresAlone) {
    const auto be = make_cpu_backend(1);
    EXPECT_EQ(loader_threads(*be, 0, 6), 1);
    EXPECT_EQ(loader_threads(*be, 3, 6), 3);
    EXPECT_EQ(loader_threads(*be, 8, 2), 2) << "no more threads than chunks";
    EXPECT_EQ(loader_threads(*be, 0, 0), 1);
}

}  // namespace
