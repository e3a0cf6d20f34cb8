// Exactness of the blending engine on the real model (issue 3 "Exactness"):
// r = 1 reproduces full; reuse of a chunk placed where it was computed reproduces full (bit for
// bit with the exact KV format);
// relocated K equals K computed at the new position; the r = 0.15 selection equals a brute-force
// reference; corrupt store files are misses and the answer stays right.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "core/blend/blend.h"
#include "core/engine/forward.h"
#include "core/engine/kv-cache.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "kernels/fp16.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

std::string make_temp_dir() {
    char tmpl[] = "/tmp/cbl-blend-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return d ? d : "";
}

void remove_tree(const std::string& path) {
    std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cleanup of %s failed\n", path.c_str());
}

std::vector<std::string> kv_files(const std::string& dir) {
    std::vector<std::string> out;
    std::vector<std::string> stack{dir};
    while (!stack.empty()) {
        std::string d = stack.back();
        stack.pop_back();
        DIR* h = opendir(d.c_str());
        if (!h) continue;
        while (dirent* e = readdir(h)) {
            std::string n = e->d_name;
            if (n == "." || n == "..") continue;
            std::string p = d + "/" + n;
            struct stat st {};
            if (stat(p.c_str(), &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) stack.push_back(p);
            else if (n.size() > 3 && n.substr(n.size() - 3) == ".kv") out.push_back(p);
        }
        closedir(h);
    }
    return out;
}

// Damages a file: flips the bits of one byte at `where` (a fraction of its size) with 0x5a.
void flip_byte(const std::string& path, double where) {
    std::fstream fs(path, std::ios::in | std::ios::out | std::ios::binary);
    fs.seekg(0, std::ios::end);
    const auto at = static_cast<std::streamoff>(static_cast<double>(fs.tellg()) * where);
    char c = 0;
    fs.seekg(at);
    fs.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    fs.seekp(at);
    fs.write(&c, 1);
}

class BlendTest : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        model_ = model::load(path);
        session_params sp;
        sp.n_ctx = 1024;
        sp.n_threads = 2;
        session_ = std::make_unique<session>(model_, sp);
        dir_ = make_temp_dir();
        ASSERT_FALSE(dir_.empty());
        kv_store_params kp;
        kp.dir = dir_ + "/kv";
        store_ = kv_store::open(kp);
        const tokenizer& t = model_->vocab();
        req_.preamble = t.encode(
            "<|im_start|>system\nAnswer the question using the passages.<|im_end|>\n<|im_start|>user\n",
            false, true);
        const char* passages[] = {
            "The Amazon river flows through Brazil, Peru and Colombia. It carries more water than "
            "any other river and its basin covers about seven million square kilometres. The "
            "rainforest around it holds a tenth of the known species on Earth, and its seasonal "
            "floods reshape the channels every year.\n",
            "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, rises "
            "5,895 metres above sea level and was first climbed in 1889 by Hans Meyer and Ludwig "
            "Purtscheller. Its glaciers have shrunk by more than eighty percent since the early "
            "twentieth century.\n",
            "The Danube is Europe's second-longest river. It rises in the Black Forest of Germany "
            "and flows through ten countries before reaching the Black Sea in Romania. Four "
            "capital cities lie on its banks: Vienna, Bratislava, Budapest and Belgrade, and its "
            "delta is a protected wetland.\n",
        };
        for (const char* p : passages) req_.chunks.push_back(t.encode(p, false, false));
        // Kernels may choose numerics by batch size (llama.cpp switches attention kernels at 64
        // query rows); keep every precompute batch ([P][C]) in the large-batch regime.
        for (const auto& c : req_.chunks) ASSERT_GE(req_.preamble.size() + c.size(), 64u);
        req_.question = t.encode(
            "Question: Who first climbed Kilimanjaro?<|im_end|>\n<|im_start|>assistant\n", false, true);
    }
    void TearDown() override {
        session_.reset();
        store_.reset();
        if (!dir_.empty()) remove_tree(dir_);
    }

    std::vector<float> run(blend_mode mode, float ratio, blend_stats* st = nullptr,
                           const blend_request* req = nullptr, kv_format format = kv_format::f16) {
        blend_params p;
        p.mode = mode;
        p.ratio = ratio;
        p.format = format;
        p.write_back = false;
        blend_engine eng(*session_, store_, p);
        blend_stats local;
        return eng.prefill(req ? *req : req_, st ? st : &local);
    }
    void precompute_all(kv_format format = kv_format::f16) {
        blend_params p;
        p.format = format;
        blend_engine eng(*session_, store_, p);
        for (const auto& c : req_.chunks) eng.precompute_chunk(req_.preamble, c);
    }
    std::vector<token_id> greedy_after(const std::vector<float>& logits, int n) {
        generation_params gp;
        gp.max_tokens = n;
        return session_
            ->generate_after_prefill(logits, {}, gp, nullptr, std::chrono::steady_clock::now())
            .tokens;
    }
    static double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
        double d = 0;
        for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
        return d;
    }

    std::shared_ptr<const model> model_;
    std::unique_ptr<session> session_;
    std::shared_ptr<kv_store> store_;
    std::string dir_;
    blend_request req_;
};

}  // namespace

TEST_F(BlendTest, FullModeMatchesNormalPrefill) {
    std::vector<token_id> all(req_.preamble);
    for (const auto& c : req_.chunks) all.insert(all.end(), c.begin(), c.end());
    all.insert(all.end(), req_.question.begin(), req_.question.end());
    const std::vector<float> normal = session_->prefill(all);
    blend_stats st;
    const std::vector<float> full = run(blend_mode::full, 0.f, &st);
    EXPECT_EQ(st.tokens_total, static_cast<int64_t>(all.size()));
    EXPECT_EQ(st.tokens_reused, 0);
    EXPECT_LT(max_abs_diff(normal, full), 1e-2);
    EXPECT_EQ(argmax(normal.data(), (int32_t)normal.size()), argmax(full.data(), (int32_t)full.size()));
}

TEST_F(BlendTest, RatioOneReproducesFull) {
    precompute_all();
    const std::vector<float> full = run(blend_mode::full, 0.f);
    const auto full_tokens = greedy_after(full, 16);
    blend_stats st;
    const std::vector<float> b = run(blend_mode::blend, 1.0f, &st);
    EXPECT_EQ(st.chunks_hit, 3);
    EXPECT_EQ(st.tokens_recomputed, st.tokens_total);
    EXPECT_LT(max_abs_diff(full, b), 1e-4);
    EXPECT_EQ(greedy_after(b, 16), full_tokens);
}

// The time split (issue 15 item 2): full computes every row (all of compute is "dense", nothing
// relocated); reuse computes only the rows it does not reuse (nothing dense) and relocates the
// rest; blend at r = 0.15 runs the layers before its check layer on every row, so some of its
// compute is dense and some is recompute, and it relocates what it does not recompute.
TEST_F(BlendTest, StatsSplitComputeIntoDenseRecomputeAndRelocation) {
    precompute_all();
    blend_stats full, reuse, blend;
    run(blend_mode::full, 0.f, &full);
    run(blend_mode::reuse, 0.f, &reuse);
    run(blend_mode::blend, 0.15f, &blend);
    EXPECT_GT(full.dense_ms, 0);
    EXPECT_LE(full.dense_ms, full.compute_ms + 1e-6);
    EXPECT_EQ(full.relocate_ms, 0);
    EXPECT_EQ(reuse.dense_ms, 0);
    EXPECT_GT(reuse.relocate_ms, 0);
    EXPECT_GT(blend.dense_ms, 0);
    EXPECT_GT(blend.relocate_ms, 0);
    EXPECT_LT(blend.dense_ms + blend.relocate_ms, blend.compute_ms)
        << "blend also recomputes rows after its check layer";
}

TEST_F(BlendTest, ReuseOfChunkRightAfterPreambleReproducesFull) {
    precompute_all();
    blend_request one;
    one.preamble = req_.preamble;
    one.chunks = {req_.chunks[0]};
    one.question = req_.question;
    const model_hparams& hp = model_->hparams();
    const int64_t kd = hp.kv_dim();
    const int64_t start = static_cast<int64_t>(one.preamble.size());
    const int64_t n = static_cast<int64_t>(one.chunks[0].size());
    auto rows = [&](const uint16_t* base) {
        return std::vector<uint16_t>(base + start * kd, base + (start + n) * kd);
    };
    const std::vector<float> full = run(blend_mode::full, 0.f, nullptr, &one);
    std::vector<std::vector<uint16_t>> full_k, full_v;
    for (int l = 0; l < hp.n_layer; ++l) {
        full_k.push_back(rows(session_->cache().k(l)));
        full_v.push_back(rows(session_->cache().v(l)));
    }
    const auto full_tokens = greedy_after(full, 16);
    blend_stats st;
    const std::vector<float> r = run(blend_mode::reuse, 0.f, &st, &one);
    EXPECT_EQ(st.tokens_reused, n);
    EXPECT_EQ(st.tokens_recomputed, static_cast<int64_t>(one.preamble.size() + one.question.size()));
    // The stored KV is what full prefill computes there: V bit for bit at every layer; K up to
    // the f16 rounding of K before RoPE (the store keeps position-free keys).
    for (int l = 0; l < hp.n_layer; ++l) {
        EXPECT_EQ(rows(session_->cache().v(l)), full_v[static_cast<size_t>(l)]) << "layer " << l;
        const auto k = rows(session_->cache().k(l));
        const auto& fk = full_k[static_cast<size_t>(l)];
        double worst = 0;
        for (int64_t t = 0; t < n; ++t) {
            double row_max = 0, diff = 0;
            for (int64_t j = 0; j < kd; ++j) {
                const size_t i = static_cast<size_t>(t * kd + j);
                row_max = std::max(row_max, std::fabs(static_cast<double>(fp16_to_fp32(fk[i]))));
                diff = std::max(diff, std::fabs(static_cast<double>(fp16_to_fp32(k[i])) - fp16_to_fp32(fk[i])));
            }
            worst = std::max(worst, diff / std::max(row_max, 1e-6));
        }
        EXPECT_LE(worst, 2.0 / 1024) << "layer " << l;  // two f16 roundings of the row's scale
    }
    // That rounding, and P and Q running as a batch under 64 rows (the attention kernels switch
    // there, as llama.cpp's do), separate the logits by ~0.2-0.65 in this small model, so the
    // decision-level check is the greedy continuation. ExactFormatPrefixReproducesFullBitForBit
    // removes both and gets full's logits bit for bit.
    EXPECT_LT(max_abs_diff(full, r), 1.0);
    EXPECT_EQ(argmax(full.data(), (int32_t)full.size()), argmax(r.data(), (int32_t)r.size()));
    EXPECT_EQ(greedy_after(r, 16), full_tokens);
}

// With K stored in f32 (kv_format::exact) relocation does exactly what full prefill does (one
// rotation of the same f32 keys, one rounding to f16): prefix mode, which reuses the first chunk
// and computes the rest (over 64 rows, so every kernel takes full's large-batch path), gives
// full's cache and logits bit for bit.
TEST_F(BlendTest, ExactFormatPrefixReproducesFullBitForBit) {
    precompute_all(kv_format::exact);
    const model_hparams& hp = model_->hparams();
    const int64_t kd = hp.kv_dim();
    const int64_t N = static_cast<int64_t>(req_.preamble.size() + req_.chunks[0].size() +
                                           req_.chunks[1].size() + req_.chunks[2].size() +
                                           req_.question.size());
    ASSERT_GE(N - static_cast<int64_t>(req_.chunks[0].size()), 64);
    auto rows = [&](const uint16_t* base) { return std::vector<uint16_t>(base, base + N * kd); };
    const std::vector<float> full = run(blend_mode::full, 0.f);
    std::vector<std::vector<uint16_t>> full_k, full_v;
    for (int l = 0; l < hp.n_layer; ++l) {
        full_k.push_back(rows(session_->cache().k(l)));
        full_v.push_back(rows(session_->cache().v(l)));
    }
    blend_stats st;
    const std::vector<float> r = run(blend_mode::prefix, 0.f, &st, nullptr, kv_format::exact);
    ASSERT_EQ(st.chunks_hit, 1);
    ASSERT_EQ(st.tokens_reused, static_cast<int64_t>(req_.chunks[0].size()));
    for (int l = 0; l < hp.n_layer; ++l) {
        EXPECT_EQ(rows(session_->cache().k(l)), full_k[static_cast<size_t>(l)]) << "layer " << l;
        EXPECT_EQ(rows(session_->cache().v(l)), full_v[static_cast<size_t>(l)]) << "layer " << l;
    }
    EXPECT_EQ(max_abs_diff(full, r), 0.0);
    // The f16 format rounds K before RoPE as well: close, not equal (what exact removes).
    blend_stats st16;
    run(blend_mode::prefix, 0.f, &st16, nullptr, kv_format::f16);
    EXPECT_EQ(st16.chunks_hit, 0);  // the format is part of the key: f16 files are other files
    precompute_all(kv_format::f16);
    const std::vector<float> p16 = run(blend_mode::prefix, 0.f, &st16, nullptr, kv_format::f16);
    EXPECT_EQ(st16.chunks_hit, 1);
    std::printf("prefix logits vs full: max |diff| exact %g, f16 %g\n", max_abs_diff(full, r),
                max_abs_diff(full, p16));
}

TEST_F(BlendTest, RelocatedKeysMatchKeysComputedAtTheNewPosition) {
    precompute_all();
    // Layer-0 K depends only on the token, so relocated layer-0 keys must equal fresh ones at
    // the chunk's new position (here chunk 2 sits after chunks 0 and 1, far from where it was computed).
    run(blend_mode::full, 0.f);
    const model_hparams& hp = model_->hparams();
    const int64_t kd = hp.kv_dim();
    const int64_t start = static_cast<int64_t>(req_.preamble.size() + req_.chunks[0].size() + req_.chunks[1].size());
    const int64_t n = static_cast<int64_t>(req_.chunks[2].size());
    std::vector<float> fresh(static_cast<size_t>(n * kd)), moved(static_cast<size_t>(n * kd));
    fp16_to_fp32_row(session_->cache().k(0) + start * kd, fresh.data(), n * kd);
    blend_stats st;
    run(blend_mode::reuse, 0.f, &st);
    EXPECT_EQ(st.chunks_hit, 3);
    fp16_to_fp32_row(session_->cache().k(0) + start * kd, moved.data(), n * kd);
    double worst = 0;
    for (size_t i = 0; i < fresh.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(fresh[i]) - moved[i]) /
                                    std::max(1.0, std::fabs(static_cast<double>(fresh[i]))));
    }
    EXPECT_LT(worst, 4e-3);  // a few f16 ulps
}

TEST_F(BlendTest, SelectionEqualsBruteForceReference) {
    precompute_all();
    const float r = 0.15f;
    blend_stats st;
    run(blend_mode::blend, r, &st);
    // Brute force: full layers 0 and 1 for all rows, deviation of V at layer 1 in double.
    const model_hparams& hp = model_->hparams();
    const int64_t kd = hp.kv_dim();
    std::vector<token_id> all(req_.preamble);
    std::vector<int32_t> reused_rows;
    std::vector<std::pair<size_t, size_t>> chunk_span;
    for (const auto& c : req_.chunks) {
        for (size_t i = 0; i < c.size(); ++i) reused_rows.push_back(static_cast<int32_t>(all.size() + i));
        chunk_span.emplace_back(all.size(), c.size());
        all.insert(all.end(), c.begin(), c.end());
    }
    all.insert(all.end(), req_.question.begin(), req_.question.end());
    const int64_t N = static_cast<int64_t>(all.size());
    forward_engine fwd(*model_, session_->get_backend(), static_cast<int32_t>(N));
    kv_cache cache(session_->get_backend(), hp, 1024);
    std::vector<int32_t> pos(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    fwd.embed(all.data(), N);
    fwd.set_positions(pos.data(), N);
    fwd.project_qkv(0, N);
    fwd.rope_store_kv(0, cache, N);
    fwd.attend_and_mlp(0, cache, N, N);
    fwd.project_qkv(1, N);
    std::vector<double> dev;
    for (size_t c = 0; c < req_.chunks.size(); ++c) {
        chunk_kv_meta meta;
        meta.model_fingerprint = model_->fingerprint();
        meta.format = kv_format::f16;
        meta.n_layer = hp.n_layer;
        meta.n_kv_head = hp.n_head_kv;
        meta.head_dim = hp.head_dim;
        meta.n_tokens = static_cast<int32_t>(req_.chunks[c].size());
        blend_engine eng(*session_, store_, {});
        auto rd = store_->lookup(eng.key_of(req_.preamble, req_.chunks[c]), meta);
        ASSERT_TRUE(rd);
        const int64_t nt = meta.n_tokens;
        std::vector<float> k(static_cast<size_t>(nt * kd));
        std::vector<uint16_t> v(static_cast<size_t>(nt * kd));
        rd->read_layer(1, k.data(), v.data(), kd);
        for (int64_t i = 0; i < nt; ++i) {
            const float* f = fwd.v() + (static_cast<int64_t>(chunk_span[c].first) + i) * kd;
            double s = 0;
            for (int64_t j = 0; j < kd; ++j) {
                const double e = f[j] - fp16_to_fp32(v[static_cast<size_t>(i * kd + j)]);
                s += e * e;
            }
            dev.push_back(s);
        }
    }
    const size_t NR = reused_rows.size();
    const size_t k = static_cast<size_t>(std::ceil(r * NR - 1e-9));
    std::vector<size_t> order(NR);
    for (size_t i = 0; i < NR; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dev[a] > dev[b]; });
    std::set<int32_t> expect;
    for (int64_t i = 0; i < N; ++i) {
        if (std::find(reused_rows.begin(), reused_rows.end(), i) == reused_rows.end()) expect.insert(static_cast<int32_t>(i));
    }
    for (size_t i = 0; i < k; ++i) expect.insert(reused_rows[order[i]]);
    // Rows whose deviations are within float noise of the cut could swap; require near-equality.
    const std::set<int32_t> got(st.recomputed_rows.begin(), st.recomputed_rows.end());
    EXPECT_EQ(got.size(), expect.size());
    size_t same = 0;
    for (int32_t x : got) same += expect.count(x);
    EXPECT_GE(same + 1, expect.size()) << "selection differs beyond a boundary tie";
    EXPECT_EQ(st.tokens_recomputed, static_cast<int64_t>(N - NR + k));
}

// The check layer's compaction (forward_engine::compact_rows) against the whole batch: after a
// full prefill fills the cache, rerunning the layers from layer c on only some rows (their K/V
// recomputed, the others' from the cache) must give those rows what the full batch gave them,
// up to the kernels' batch-size numerics. A compaction that moved the wrong rows (or none)
// leaves the last row with another token's state: its logits differ wholesale.
TEST_F(BlendTest, CompactedRowsComputeWhatTheWholeBatchComputes) {
    const model_hparams& hp = model_->hparams();
    std::vector<token_id> toks = req_.preamble;
    toks.insert(toks.end(), req_.chunks[1].begin(), req_.chunks[1].end());
    toks.insert(toks.end(), req_.question.begin(), req_.question.end());
    const int64_t n = static_cast<int64_t>(toks.size());
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::unique_ptr<backend> be = create_cpu_backend(2);
    forward_engine fe(*model_, *be, static_cast<int32_t>(n));
    kv_cache cache(*be, hp, static_cast<int32_t>(n));
    std::vector<float> full(static_cast<size_t>(hp.n_vocab));
    fe.run(cache, toks.data(), pos.data(), n, n, full.data());

    // Every third row and the last few (the question's end), as a selection keeps them.
    std::vector<int32_t> keep;
    for (int32_t i = 1; i < n; i += 3) keep.push_back(i);
    for (int32_t i = static_cast<int32_t>(n) - 5; i < n; ++i) {
        if (keep.back() < i) keep.push_back(i);
    }
    const int64_t m = static_cast<int64_t>(keep.size());
    const int check = 1;
    fe.embed(toks.data(), n);
    fe.set_positions(pos.data(), n);
    for (int l = 0; l < hp.n_layer; ++l) {
        const int64_t rows = l <= check ? n : m;
        fe.project_qkv(l, rows);
        fe.rope_store_kv(l, cache, rows);
        if (l == check) fe.compact_rows(keep.data(), m);
        fe.attend_and_mlp(l, cache, l < check ? n : m, n);
    }
    std::vector<float> blended(full.size());
    fe.logits(m - 1, blended.data());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < full.size(); ++i) {
        num += (double(blended[i]) - full[i]) * (double(blended[i]) - full[i]);
        den += double(full[i]) * full[i];
    }
    // Measured: under 1e-4 with f32 attention (AVX2), 1.3e-4 where batches under 64 rows
    // accumulate attention in f16 (AVX-512, ggml's numerics); 0.2 when x is not compacted.
    EXPECT_LT(num / den, 2e-3) << "relative squared error of the last row's logits";
    EXPECT_EQ(std::max_element(blended.begin(), blended.end()) - blended.begin(),
              std::max_element(full.begin(), full.end()) - full.begin());
}

TEST_F(BlendTest, CorruptStoreFilesAreMissesAndTheAnswerStaysRight) {
    precompute_all();
    blend_request one;
    one.preamble = req_.preamble;
    one.chunks = {req_.chunks[0]};
    one.question = req_.question;
    const std::vector<float> full = run(blend_mode::full, 0.f, nullptr, &one);
    const auto files = kv_files(dir_ + "/kv");
    ASSERT_EQ(files.size(), 3u);
    for (const auto& f : files) flip_byte(f, 0.5);  // the middle of the payload of every file
    blend_stats st;
    const std::vector<float> r = run(blend_mode::reuse, 0.f, &st, &one);
    EXPECT_EQ(st.chunks_hit, 0);
    EXPECT_EQ(st.chunks_missed, 1);
    EXPECT_LT(max_abs_diff(full, r), 1e-4);  // a miss is computed in full
    blend_engine eng(*session_, store_, {});
    EXPECT_FALSE(store_->contains(eng.key_of(one.preamble, one.chunks[0])));
}

// Several threads reading a layer's chunks (what a GPU session does) fill the same rows as one:
// the logits are identical; and when two of the three files are damaged, each failure found
// mid-stream drops its chunk (recomputed) and the answer is that of a store without those files.
TEST_F(BlendTest, ParallelLoadingIsTheSameAndSurvivesDamagedFiles) {
    precompute_all();
    blend_params p;
    p.ratio = 0.15f;
    p.write_back = false;
    std::vector<float> one, three;
    for (int threads : {1, 3}) {
        p.load_threads = threads;
        blend_engine eng(*session_, store_, p);
        blend_stats st;
        (threads == 1 ? one : three) = eng.prefill(req_, &st);
        EXPECT_EQ(st.chunks_hit, 3);
    }
    EXPECT_EQ(one, three);

    auto files = kv_files(dir_ + "/kv");
    ASSERT_EQ(files.size(), 3u);
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i < 2; ++i) flip_byte(files[i], 0.75);  // a late layer
    p.mode = blend_mode::reuse;
    p.load_threads = 3;
    blend_engine eng(*session_, store_, p);
    blend_stats st;
    const std::vector<float> r = eng.prefill(req_, &st);
    EXPECT_EQ(st.chunks_hit, 1);
    EXPECT_EQ(st.chunks_missed, 2);
    EXPECT_EQ(kv_files(dir_ + "/kv").size(), 1u) << "damaged files are removed";
    p.load_threads = 1;
    blend_engine again(*session_, store_, p);
    EXPECT_EQ(again.prefill(req_, &st), r);
    EXPECT_EQ(st.chunks_missed, 2);
}

// A file whose header no longer reads (damage, or an older file version after an upgrade) is
// computed again by precompute: a present file is not enough to skip a chunk.
TEST_F(BlendTest, PrecomputeReplacesFilesItCannotUse) {
    precompute_all();
    const auto files = kv_files(dir_ + "/kv");
    ASSERT_EQ(files.size(), 3u);
    for (const auto& f : files) {
        std::fstream fs(f, std::ios::in | std::ios::out | std::ios::binary);
        const char zeros[16] = {};
        fs.write(zeros, sizeof(zeros));
    }
    blend_engine eng(*session_, store_, {});
    for (const auto& c : req_.chunks) EXPECT_TRUE(eng.precompute_chunk(req_.preamble, c));
    for (const auto& c : req_.chunks) EXPECT_FALSE(eng.precompute_chunk(req_.preamble, c));
    blend_stats st;
    run(blend_mode::reuse, 0.f, &st);
    EXPECT_EQ(st.chunks_hit, 3);
    EXPECT_EQ(st.chunks_missed, 0);
}

TEST_F(BlendTest, PromptLongerThanContextIsRefused) {
    blend_request big = req_;
    big.chunks.assign(40, req_.chunks[0]);
    try {
        run(blend_mode::full, 0.f, nullptr, &big);
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::range);
        EXPECT_NE(std::string(e.what()).find("exceeds the context"), std::string::npos);
    }
}
