// The KV file format on its own: checksum, layout, encode/decode, and a reader that refuses every
// damaged, truncated, foreign or future file (handcrafted corruption).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/kvstore/kv-file.h"
#include "core/util/error.h"
#include "kernels/fp16.h"
#include "util/fifo-guard.h"
#include "util/test-util.h"

using namespace cacheblend;
namespace fs = std::filesystem;

namespace {

uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Deterministic KV value in [-scale, scale).
float value(uint64_t seed, int layer, int kv, int t, int d, float scale = 4.0f) {
    const uint64_t h = mix(seed ^ mix((uint64_t(layer) << 40) ^ (uint64_t(kv) << 32) ^
                                      (uint64_t(t) << 16) ^ uint64_t(d)));
    return (static_cast<float>(h >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f) * scale;
}

chunk_kv_meta small_meta(kv_format f = kv_format::f16) {
    chunk_kv_meta m;
    m.model_fingerprint = 0xabcdef0123456789ull;
    m.format = f;
    m.n_layer = 4;
    m.n_kv_head = 2;
    m.head_dim = 8;
    m.n_tokens = 16;
    return m;
}

std::vector<token_id> tokens_for(uint64_t seed, int n) {
    std::vector<token_id> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = static_cast<token_id>(mix(seed + i) % 49152);
    return t;
}

chunk_key key_for(const chunk_kv_meta& m, const std::vector<token_id>& toks) {
    return make_chunk_key(m.model_fingerprint, static_cast<uint32_t>(m.format), {}, toks);
}

// Layer rows with a stride wider than kv_dim, so ld is exercised.
struct layer_rows {
    std::vector<float> k, v;
    int64_t ld;
};
layer_rows make_rows(const chunk_kv_meta& m, uint64_t seed, int layer, float scale = 4.0f) {
    layer_rows r;
    r.ld = m.kv_dim() + 3;
    r.k.assign(static_cast<size_t>(m.n_tokens * r.ld), 1e30f);
    r.v.assign(r.k.size(), 1e30f);
    for (int t = 0; t < m.n_tokens; ++t)
        for (int d = 0; d < m.kv_dim(); ++d) {
            r.k[static_cast<size_t>(t * r.ld + d)] = value(seed, layer, 0, t, d, scale);
            r.v[static_cast<size_t>(t * r.ld + d)] = value(seed, layer, 1, t, d, scale);
        }
    return r;
}

class KvFile : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/cbl-kvfile-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { fs::remove_all(dir_); }

    // Writes a complete file; returns its path.
    std::string write_file(const chunk_kv_meta& m, uint64_t seed, const std::string& name = "a.kv",
                           float scale = 4.0f) {
        const auto toks = tokens_for(seed, m.n_tokens);
        kv_file::builder b(m, key_for(m, toks), toks);
        std::vector<int> order(static_cast<size_t>(m.n_layer));
        for (int i = 0; i < m.n_layer; ++i) order[static_cast<size_t>(i)] = m.n_layer - 1 - i;
        for (int l : order) {
            const layer_rows r = make_rows(m, seed, l, scale);
            b.put_layer(l, r.k.data(), r.v.data(), r.ld);
        }
        const std::string path = dir_ + "/" + name;
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        EXPECT_GE(fd, 0);
        b.write(*io_, fd, path);
        ::close(fd);
        return path;
    }

    kv_open_result open(const std::string& path, const chunk_kv_meta& m, uint64_t seed,
                        bool direct = false) {
        return open_kv_file(io_, path, key_for(m, tokens_for(seed, m.n_tokens)), m, direct);
    }

    std::string dir_;
    std::shared_ptr<file_io> io_ = posix_file_io();
};

// Re-encodes the header of a valid file after `edit`, with a correct checksum, so only the
// semantic checks can catch it.
void rewrite_header(const std::string& path, const std::function<void(kv_file::header&)>& edit) {
    std::vector<uint8_t> b = cbltest::read_bytes(path);
    kv_file::header h = kv_file::decode_header(b.data(), b.size(), b.size());
    edit(h);
    const std::vector<uint8_t> enc = kv_file::encode_header(h);
    std::copy(enc.begin(), enc.end(), b.begin());
    cbltest::write_bytes(path, b);
}

// Reads every layer; returns false if any read throws corrupt.
bool all_layers_ok(chunk_kv_reader& r) {
    const chunk_kv_meta& m = r.meta();
    std::vector<float> k(static_cast<size_t>(m.n_tokens * m.kv_dim()));
    std::vector<uint16_t> v(k.size());
    for (int l = 0; l < m.n_layer; ++l) {
        try {
            r.read_layer(l, k.data(), v.data(), m.kv_dim());
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::corrupt) << e.what();
            return false;
        }
    }
    return true;
}

}  // namespace

TEST(Xxh64, MatchesReferenceLibrary) {
    // Values from the system's libxxhash 0.8.1 (XXH64), seed 0 and seed 0x9e3779b97f4a7c15.
    EXPECT_EQ(xxh64("", 0), 0xef46db3751d8e999ull);
    EXPECT_EQ(xxh64("a", 1), 0xd24ec4f1a98c6e5bull);
    EXPECT_EQ(xxh64("abc", 3), 0x44bc2cf5ad770999ull);
    EXPECT_EQ(xxh64("abc", 3, 1), 0xbea9ca8199328908ull);
    const char* fox = "The quick brown fox jumps over the lazy dog";
    EXPECT_EQ(xxh64(fox, std::strlen(fox)), 0x0b242d361fda71bcull);
    std::vector<uint8_t> b(1000);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>((i * 31 + 7) & 0xff);
    struct {
        size_t n;
        uint64_t s0, s1;
    } cases[] = {
        {0, 0xef46db3751d8e999ull, 0xc4349fc93c010000ull},
        {1, 0xa96c7f0ce858bbb7ull, 0x585882422a6165e7ull},
        {3, 0x56e6957632a487f9ull, 0x5acb303e78133c22ull},
        {4, 0xc60d15b1e3ff8f04ull, 0x7d51d5e2461732b3ull},
        {7, 0xafbefc3d6c6f9a8eull, 0x2ce9adec2b2c8104ull},
        {8, 0x3da5c7aa269683e0ull, 0x758848f033fa76a2ull},
        {31, 0x4a74f3a1a39ad4a1ull, 0x8137041f5af88413ull},
        {32, 0x8d57d6a4671cc43dull, 0x184ebcf3745cd46cull},
        {33, 0x62c9fd21ed857664ull, 0x52fac3c981f3cc2eull},
        {63, 0x5c320a0d2707057full, 0x64ef99a2e94cc7bdull},
        {64, 0x7bbabbc45729d17eull, 0xf7f22435fe1ab128ull},
        {100, 0xefa0ad2d3e70c151ull, 0xbc7ab33be7528c18ull},
        {1000, 0x99594f4828043d35ull, 0xda717f741f399f3full},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(xxh64(b.data(), c.n), c.s0) << c.n;
        EXPECT_EQ(xxh64(b.data(), c.n, 0x9e3779b97f4a7c15ull), c.s1) << c.n;
    }
}

TEST(KvFileLayout, SmolLM2Sizes) {
    chunk_kv_meta m;
    m.n_layer = 30;
    m.n_kv_head = 3;
    m.head_dim = 64;
    m.n_tokens = 512;
    const kv_file::layout f16 = kv_file::compute_layout(m);
    EXPECT_EQ(f16.layer_bytes, 512u * 192 * 2 * 2);           // 384 KiB: K and V
    EXPECT_EQ(f16.layer_bytes * 30, 11796480u);                 // 11.25 MiB of KV
    EXPECT_EQ(f16.data_offset, 4096u);                          // 512 tokens + table fit 4 KiB
    EXPECT_EQ(f16.file_size, 4096u + 30u * 393216u);
    m.format = kv_format::q8;
    const kv_file::layout q8 = kv_file::compute_layout(m);
    EXPECT_EQ(q8.layer_bytes, 2u * (512 * 192 + 512 * 3 * 2));
    EXPECT_EQ(q8.layer_stride % 4096, 0u);
    EXPECT_LT(q8.file_size, f16.file_size * 53 / 100);         // about half
}

TEST(KvFileLayout, RejectsBadShapes) {
    chunk_kv_meta m = small_meta();
    for (auto edit : std::vector<std::function<void(chunk_kv_meta&)>>{
             [](chunk_kv_meta& x) { x.n_layer = 0; },
             [](chunk_kv_meta& x) { x.n_tokens = 0; },
             [](chunk_kv_meta& x) { x.n_kv_head = -1; },
             [](chunk_kv_meta& x) { x.head_dim = 1 << 20; },
             [](chunk_kv_meta& x) { x.n_tokens = kv_file::max_tokens + 1; },
             [](chunk_kv_meta& x) { x.format = static_cast<kv_format>(9); },
             [](chunk_kv_meta& x) {  // each limit fine, the product too big
                 x.n_tokens = kv_file::max_tokens;
                 x.n_kv_head = 64;
                 x.head_dim = 128;
                 x.n_layer = 100;
             },
         }) {
        chunk_kv_meta x = m;
        edit(x);
        try {
            kv_file::compute_layout(x);
            ADD_FAILURE() << "accepted";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::invalid_arg);
        }
    }
}

TEST_F(KvFile, F16RoundTripAnyLayerOrderAnyStride) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 42);
    EXPECT_EQ(fs::file_size(path), kv_file::compute_layout(m).file_size);
    kv_open_result r = open(path, m, 42);
    ASSERT_EQ(r.status, kv_open_status::ok) << r.detail;
    EXPECT_EQ(r.reader->tokens(), tokens_for(42, m.n_tokens));
    const int64_t ld = m.kv_dim() + 5;
    std::vector<float> k(static_cast<size_t>(m.n_tokens * ld), -12345.f);
    std::vector<uint16_t> v(k.size(), 0xdead);
    for (int l : {2, 0, 3, 1, 2}) {
        r.reader->read_layer(l, k.data(), v.data(), ld);
        for (int t = 0; t < m.n_tokens; ++t) {
            for (int d = 0; d < m.kv_dim(); ++d) {
                ASSERT_EQ(k[static_cast<size_t>(t * ld + d)],
                          fp16_to_fp32(fp32_to_fp16(value(42, l, 0, t, d))));
                ASSERT_EQ(v[static_cast<size_t>(t * ld + d)], fp32_to_fp16(value(42, l, 1, t, d)));
            }
            for (int64_t d = m.kv_dim(); d < ld; ++d) {  // padding columns untouched
                ASSERT_EQ(k[static_cast<size_t>(t * ld + d)], -12345.f);
                ASSERT_EQ(v[static_cast<size_t>(t * ld + d)], 0xdead);
            }
        }
    }
    EXPECT_EQ(r.reader->bytes_read(), 5 * kv_file::compute_layout(m).layer_stride);
}

TEST_F(KvFile, ExactKeepsKeysInF32) {
    const chunk_kv_meta m = small_meta(kv_format::exact);
    const std::string path = write_file(m, 43, "x.kv", 300.0f);  // values past f16 precision
    kv_open_result r = open(path, m, 43);
    ASSERT_EQ(r.status, kv_open_status::ok) << r.detail;
    const int64_t ld = m.kv_dim() + 3;
    std::vector<float> k(static_cast<size_t>(m.n_tokens * ld), -12345.f);
    std::vector<uint16_t> v(k.size(), 0xdead);
    bool below_f16 = false;  // some key differs from its f16 rounding: K really is f32
    for (int l : {3, 0, 2, 1}) {
        r.reader->read_layer(l, k.data(), v.data(), ld);
        for (int t = 0; t < m.n_tokens; ++t) {
            for (int d = 0; d < m.kv_dim(); ++d) {
                const float x = value(43, l, 0, t, d, 300.0f);
                ASSERT_EQ(k[static_cast<size_t>(t * ld + d)], x);
                below_f16 |= fp16_to_fp32(fp32_to_fp16(x)) != x;
                ASSERT_EQ(v[static_cast<size_t>(t * ld + d)],
                          fp32_to_fp16(value(43, l, 1, t, d, 300.0f)));
            }
            for (int64_t d = m.kv_dim(); d < ld; ++d) ASSERT_EQ(k[static_cast<size_t>(t * ld + d)], -12345.f);
        }
    }
    EXPECT_TRUE(below_f16);
    EXPECT_EQ(kv_file::compute_layout(m).layer_bytes,
              static_cast<uint64_t>(m.n_tokens * m.kv_dim() * 6));
}

TEST_F(KvFile, DirectIoReads) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 7);
    kv_open_result r = open(path, m, 7, /*direct=*/true);
    ASSERT_EQ(r.status, kv_open_status::ok) << r.detail;
    EXPECT_TRUE(all_layers_ok(*r.reader));
}

TEST_F(KvFile, Q8ErrorBound) {
    const chunk_kv_meta m = small_meta(kv_format::q8);
    for (float scale : {4.0f, 1e-3f, 300.0f}) {
        const std::string path = write_file(m, 9, "q.kv", scale);
        kv_open_result r = open(path, m, 9);
        ASSERT_EQ(r.status, kv_open_status::ok) << r.detail;
        std::vector<float> k(static_cast<size_t>(m.n_tokens * m.kv_dim()));
        std::vector<uint16_t> v(k.size());
        double worst = 0;
        for (int l = 0; l < m.n_layer; ++l) {
            r.reader->read_layer(l, k.data(), v.data(), m.kv_dim());
            for (int kv = 0; kv < 2; ++kv)
                for (int t = 0; t < m.n_tokens; ++t)
                    for (int h = 0; h < m.n_kv_head; ++h) {
                        float amax = 0;
                        for (int d = 0; d < m.head_dim; ++d)
                            amax = std::max(amax, std::fabs(value(9, l, kv, t, h * m.head_dim + d,
                                                                  scale)));
                        for (int d = 0; d < m.head_dim; ++d) {
                            const int c = h * m.head_dim + d;
                            const float x = value(9, l, kv, t, c, scale);
                            const size_t i = size_t(t * m.kv_dim() + c);
                            const float y = kv ? fp16_to_fp32(v[i]) : k[i];
                            // half a quantization step (scale = amax/127, itself f16-rounded),
                            // plus the f16 rounding of the output
                            // (subnormal scales round up by at most one 2^-24 step)
                            const float bound = amax / 254.0f * 1.002f + 3e-8f +
                                                std::fabs(x) / 1024.0f;
                            ASSERT_LE(std::fabs(x - y), bound)
                                << "l" << l << " t" << t << " c" << c;
                            worst = std::max(worst, double(std::fabs(x - y) / amax));
                        }
                    }
        }
        EXPECT_GT(worst, 0.0);  // it is lossy, and...
        EXPECT_LT(worst, 0.0045);  // ...within half a step of amax/127
    }
}

TEST(KvFileQ8, EdgeValues) {
    chunk_kv_meta m = small_meta(kv_format::q8);
    m.n_layer = 1;
    m.n_tokens = 1;
    m.n_kv_head = 2;
    m.head_dim = 4;
    const kv_file::layout lay = kv_file::compute_layout(m);
    std::vector<uint8_t> buf(lay.layer_bytes);
    std::vector<float> k(8);
    std::vector<uint16_t> v(8);
    // head 0 all zero, head 1 tiny (scale underflows f16), V: one big outlier per head
    const float kin[8] = {0, 0, -0.0f, 0, 1e-9f, -2e-9f, 0, 3e-9f};
    const float vin[8] = {1000, 1, -1, 0.5f, -60000, 7, 0, 1};
    kv_file::encode_layer(m, kin, vin, 8, buf.data());
    kv_file::decode_layer(m, buf.data(), k.data(), dtype::f32, v.data(), 8);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(k[size_t(i)], 0.0f);
    // scale underflows to the smallest f16 subnormal (2^-24): error within half of it
    for (int i = 4; i < 8; ++i) EXPECT_NEAR(k[size_t(i)], kin[i], 3e-8);
    EXPECT_NEAR(fp16_to_fp32(v[0]), 1000, 1);
    EXPECT_NEAR(fp16_to_fp32(v[4]), -60000, 60);
    for (int i = 0; i < 8; ++i)
        EXPECT_LE(std::fabs(fp16_to_fp32(v[size_t(i)]) - vin[i]),
                  (i < 4 ? 1000 : 60000) / 254.0f * 1.01f + std::fabs(vin[i]) / 1024);
    // non-finite and out-of-range inputs are refused, not stored as garbage
    for (float bad : {NAN, INFINITY, 1e12f}) {
        float vb[8] = {1, 1, 1, 1, 1, 1, 1, bad};
        try {
            kv_file::encode_layer(m, kin, vb, 8, buf.data());
            ADD_FAILURE() << bad;
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::invalid_arg);
        }
    }
}

TEST_F(KvFile, EveryFlippedByteIsCaught) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 5);
    const std::vector<uint8_t> good = cbltest::read_bytes(path);
    const kv_file::layout lay = kv_file::compute_layout(m);
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    int checked = 0;
    for (size_t off = 0; off < good.size(); ++off) {
        const bool padding = (off >= lay.header_size && off < lay.data_offset) ||
                             (off >= lay.data_offset &&
                              (off - lay.data_offset) % lay.layer_stride >= lay.layer_bytes);
        if (padding && off % 61 != 0) continue;  // padding is covered too; sample it
        uint8_t byte = static_cast<uint8_t>(good[off] ^ (1u << (off % 8)));
        ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(off)), 1);
        kv_open_result r = open(path, m, 5);
        if (r.status == kv_open_status::ok)
            ASSERT_FALSE(all_layers_ok(*r.reader)) << "flip at " << off << " went unnoticed";
        else
            ASSERT_NE(r.status, kv_open_status::missing);
        ASSERT_EQ(::pwrite(fd, &good[off], 1, static_cast<off_t>(off)), 1);
        ++checked;
    }
    ::close(fd);
    EXPECT_GT(checked, 2000);
    kv_open_result r = open(path, m, 5);
    ASSERT_EQ(r.status, kv_open_status::ok);
    EXPECT_TRUE(all_layers_ok(*r.reader));
}

TEST_F(KvFile, TruncatedOrExtendedFilesAreCorrupt) {
    const chunk_kv_meta m = small_meta(kv_format::q8);
    const std::string path = write_file(m, 6);
    const std::vector<uint8_t> good = cbltest::read_bytes(path);
    std::vector<size_t> cuts = {0, 1, 7, 8, 12, 16, 87, 88, 100, 4095, 4096, 4097};
    for (size_t c = 4096; c < good.size(); c += 1531) cuts.push_back(c);
    for (size_t l = 1; l <= 4; ++l) {
        const size_t edge = 4096 + l * kv_file::compute_layout(m).layer_stride;
        cuts.push_back(edge - 1);
        if (edge < good.size()) cuts.push_back(edge);
    }
    for (size_t c : cuts) {
        ASSERT_LT(c, good.size());
        cbltest::write_bytes(path, std::vector<uint8_t>(good.begin(), good.begin() + long(c)));
        EXPECT_EQ(open(path, m, 6).status, kv_open_status::corrupt) << "cut at " << c;
    }
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    cbltest::write_bytes(path, longer);
    EXPECT_EQ(open(path, m, 6).status, kv_open_status::corrupt);
}

TEST_F(KvFile, TruncatedAfterOpenIsCorruptAtRead) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 6);
    kv_open_result r = open(path, m, 6);
    ASSERT_EQ(r.status, kv_open_status::ok);
    bool called = false;
    r.reader->set_on_corrupt([&] { called = true; });
    ASSERT_EQ(::truncate(path.c_str(), 4096 + 100), 0);
    std::vector<float> k(size_t(m.n_tokens * m.kv_dim()));
    std::vector<uint16_t> v(k.size());
    try {
        r.reader->read_layer(1, k.data(), v.data(), m.kv_dim());
        ADD_FAILURE();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::corrupt);
    }
    EXPECT_TRUE(called);
}

TEST_F(KvFile, ForeignFutureAndMisplacedFiles) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 8);
    const std::vector<uint8_t> good = cbltest::read_bytes(path);
    EXPECT_EQ(open(path, m, 8).status, kv_open_status::ok);

    // expectation differs in any field -> foreign
    for (auto edit : std::vector<std::function<void(chunk_kv_meta&)>>{
             [](chunk_kv_meta& x) { x.model_fingerprint ^= 1; },
             [](chunk_kv_meta& x) { x.n_layer = 5; },
             [](chunk_kv_meta& x) { x.n_kv_head = 1; },
             [](chunk_kv_meta& x) { x.head_dim = 16; },
             [](chunk_kv_meta& x) { x.format = kv_format::q8; },
         }) {
        chunk_kv_meta x = m;
        edit(x);
        EXPECT_EQ(open_kv_file(io_, path, key_for(m, tokens_for(8, m.n_tokens)), x, false).status,
                  kv_open_status::foreign);
    }
    // The file itself says another model (valid checksum): foreign.
    rewrite_header(path, [](kv_file::header& h) { h.meta.model_fingerprint = 99; });
    EXPECT_EQ(open(path, m, 8).status, kv_open_status::foreign);
    cbltest::write_bytes(path, good);
    // Another key inside (a file swapped or copied under the wrong name): corrupt.
    rewrite_header(path, [](kv_file::header& h) { h.key.bytes[31] ^= 1; });
    EXPECT_EQ(open(path, m, 8).status, kv_open_status::corrupt);
    cbltest::write_bytes(path, good);
    // Version from the future: the reader cannot check anything else.
    {
        std::vector<uint8_t> b = good;
        b[8] = kv_file::version + 1;
        cbltest::write_bytes(path, b);
        EXPECT_EQ(open(path, m, 8).status, kv_open_status::future_version);
        try {
            kv_file::decode_header(b.data(), b.size(), b.size());
            ADD_FAILURE();
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::format);
        }
        b[8] = 0;
        cbltest::write_bytes(path, b);
        EXPECT_EQ(open(path, m, 8).status, kv_open_status::corrupt);
    }
    // Table entries that disagree with the shape (checksum valid) are refused.
    cbltest::write_bytes(path, good);
    rewrite_header(path, [](kv_file::header& h) { h.layers[2].offset += 4096; });
    EXPECT_EQ(open(path, m, 8).status, kv_open_status::corrupt);
    cbltest::write_bytes(path, good);
    rewrite_header(path, [](kv_file::header& h) { h.layers[0].size -= 2; });
    EXPECT_EQ(open(path, m, 8).status, kv_open_status::corrupt);
    // Missing file.
    EXPECT_EQ(open(dir_ + "/nope.kv", m, 8).status, kv_open_status::missing);
    // A directory where a file should be.
    fs::create_directory(dir_ + "/d.kv");
    EXPECT_EQ(open(dir_ + "/d.kv", m, 8).status, kv_open_status::corrupt);
}

TEST(KvFileHeader, HostileHeadersNeverCrash) {
    // Shapes at and past the limits with valid checksums, and random bytes after a valid magic.
    const chunk_kv_meta m = small_meta();
    kv_file::header h;
    h.meta = m;
    h.key = key_for(m, tokens_for(1, m.n_tokens));
    h.tokens = tokens_for(1, m.n_tokens);
    h.layers.resize(size_t(m.n_layer));
    std::vector<uint8_t> enc = kv_file::encode_header(h);
    // Claim 2^31-1 tokens, re-checksummed by hand.
    auto reseal = [](std::vector<uint8_t>& b) {
        const uint64_t s = xxh64(b.data(), b.size() - 8);
        for (int i = 0; i < 8; ++i) b[b.size() - 8 + size_t(i)] = uint8_t(s >> (8 * i));
    };
    for (uint32_t bad_tokens : {0x7fffffffu, 0x80000000u, 0u, uint32_t(kv_file::max_tokens + 1)}) {
        std::vector<uint8_t> b = enc;
        for (int i = 0; i < 4; ++i) b[40 + size_t(i)] = uint8_t(bad_tokens >> (8 * i));
        reseal(b);
        EXPECT_THROW(kv_file::decode_header(b.data(), b.size(), 1 << 20), error);
    }
    {
        std::vector<uint8_t> b = enc;  // header_size pointing past the buffer
        b[12] = 0xff;
        b[13] = 0xff;
        EXPECT_THROW(kv_file::decode_header(b.data(), b.size(), 1 << 20), error);
    }
    std::mt19937_64 rng(3);
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint8_t> b(size_t(rng() % 600));
        for (auto& x : b) x = uint8_t(rng());
        if (b.size() >= 16 && (i & 1)) {
            std::memcpy(b.data(), kv_file::magic, 8);
            b[8] = kv_file::version;
            b[9] = b[10] = b[11] = 0;
        }
        try {
            kv_file::decode_header(b.data(), b.size(), rng() % (1 << 22));
        } catch (const error& e) {
            EXPECT_TRUE(e.code() == status::corrupt || e.code() == status::format);
        }
    }
}

TEST_F(KvFile, ReadLayerArgumentChecks) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 4);
    kv_open_result r = open(path, m, 4);
    ASSERT_EQ(r.status, kv_open_status::ok);
    std::vector<float> k(size_t(m.n_tokens * m.kv_dim()));
    std::vector<uint16_t> v(k.size());
    for (int bad : {-1, 4, 1000}) {
        try {
            r.reader->read_layer(bad, k.data(), v.data(), m.kv_dim());
            ADD_FAILURE();
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::invalid_arg);
        }
    }
    EXPECT_THROW(r.reader->read_layer(0, k.data(), v.data(), m.kv_dim() - 1), error);
    EXPECT_THROW(r.reader->read_layer(0, nullptr, v.data(), m.kv_dim()), error);
}

// The f16 format hands its keys over as stored (stored_k_type): the same values as the f32 read,
// not widened; formats whose keys are not f16 refuse an f16 read before reading anything.
TEST_F(KvFile, KeysReadAsStored) {
    for (const kv_format f : {kv_format::f16, kv_format::q8, kv_format::exact}) {
        SCOPED_TRACE(kv_format_name(f));
        chunk_kv_meta m = small_meta();
        m.format = f;
        const std::string path = write_file(m, 5, std::string("s-") + kv_format_name(f) + ".kv");
        kv_open_result r = open(path, m, 5);
        ASSERT_EQ(r.status, kv_open_status::ok);
        const int64_t ld = m.kv_dim() + 3;
        const size_t n = size_t(m.n_tokens * ld);
        std::vector<float> k32(n);
        std::vector<uint16_t> v32(n), k16(n, 0xdead), v16(n);
        EXPECT_EQ(stored_k_type(f), f == kv_format::f16 ? dtype::f16 : dtype::f32);
        for (int l = 0; l < m.n_layer; ++l) {
            r.reader->read_layer(l, k32.data(), v32.data(), ld);
            const uint64_t before = r.reader->bytes_read();
            if (f != kv_format::f16) {
                try {
                    r.reader->read_layer_as(l, k16.data(), dtype::f16, v16.data(), ld);
                    ADD_FAILURE() << "f16 keys from a format that does not store them";
                } catch (const error& e) {
                    EXPECT_EQ(e.code(), status::invalid_arg) << e.what();
                }
                EXPECT_EQ(r.reader->bytes_read(), before) << "refused before reading";
                continue;
            }
            r.reader->read_layer_as(l, k16.data(), dtype::f16, v16.data(), ld);
            for (int64_t t = 0; t < m.n_tokens; ++t) {
                for (int64_t j = 0; j < m.kv_dim(); ++j) {
                    const size_t i = size_t(t * ld + j);
                    ASSERT_EQ(fp16_to_fp32(k16[i]), k32[i]) << "layer " << l << " row " << t;
                    ASSERT_EQ(v16[i], v32[i]);
                }
            }
        }
        EXPECT_THROW(r.reader->read_layer_as(0, k16.data(), dtype::q4_0, v16.data(), ld), error);
    }
}

TEST(KvFileBuilder, MisuseIsReported) {
    const chunk_kv_meta m = small_meta();
    const auto toks = tokens_for(1, m.n_tokens);
    EXPECT_THROW(kv_file::builder(m, key_for(m, toks), tokens_for(1, 3)), error);
    kv_file::builder b(m, key_for(m, toks), toks);
    const layer_rows r = make_rows(m, 1, 0);
    EXPECT_THROW(b.put_layer(4, r.k.data(), r.v.data(), r.ld), error);
    EXPECT_THROW(b.put_layer(0, r.k.data(), r.v.data(), 3), error);
    b.put_layer(0, r.k.data(), r.v.data(), r.ld);
    EXPECT_FALSE(b.complete());
    try {
        b.write(*posix_file_io(), -1, "/nowhere");
        ADD_FAILURE();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::misuse);
    }
}

TEST_F(KvFile, HeaderLongerThanOneBlock) {
    chunk_kv_meta m = small_meta();
    m.n_layer = 2;
    m.n_tokens = 1500;  // 6 KB of token ids: the header spans two 4 KiB blocks
    const kv_file::layout lay = kv_file::compute_layout(m);
    ASSERT_EQ(lay.data_offset, 8192u);
    const std::string path = write_file(m, 12);
    for (bool direct : {false, true}) {
        kv_open_result r = open(path, m, 12, direct);
        ASSERT_EQ(r.status, kv_open_status::ok) << r.detail;
        EXPECT_EQ(r.reader->tokens(), tokens_for(12, m.n_tokens));
        EXPECT_TRUE(all_layers_ok(*r.reader));
    }
    std::vector<uint8_t> b = cbltest::read_bytes(path);
    b[6000] ^= 4;  // a token id in the second block
    cbltest::write_bytes(path, b);
    EXPECT_EQ(open(path, m, 12).status, kv_open_status::corrupt);
}

// Version 2 files are a promise: later libraries must read them. This pins every byte of one
// (xxh64 of the whole file), so an accidental change of the format fails here first. (Version 1,
// whose layer checksums did not depend on the chunk, is read as foreign: a miss, recomputed.)
TEST_F(KvFile, FormatVersion2IsPinned) {
    for (kv_format f : {kv_format::f16, kv_format::q8}) {
        const chunk_kv_meta m = small_meta(f);
        const std::vector<uint8_t> b = cbltest::read_bytes(write_file(m, 77));
        const uint64_t want = f == kv_format::f16 ? 0x39a349a4b36bc7b8ull : 0xf0e6b3db28c07912ull;
        EXPECT_EQ(xxh64(b.data(), b.size()), want) << kv_format_name(f) << std::hex << " 0x"
                                                   << xxh64(b.data(), b.size());
    }
}

// Issue 17: a file with chunk A's valid header and chunk B's layers (layer table copied from B,
// header checksum redone) was served as A's KV. Layer checksums are seeded with the chunk key
// since version 2, so B's layers fail to verify under A's key.
TEST_F(KvFile, AnotherChunksLayersUnderAValidHeaderAreRefused) {
    const chunk_kv_meta m = small_meta();
    const std::string a = write_file(m, 30, "a.kv");
    const std::string b = write_file(m, 31, "b.kv");
    const std::vector<uint8_t> ba = cbltest::read_bytes(a), bb = cbltest::read_bytes(b);
    kv_file::header ha = kv_file::decode_header(ba.data(), ba.size(), ba.size());
    const kv_file::header hb = kv_file::decode_header(bb.data(), bb.size(), bb.size());
    ASSERT_NE(ha.key, hb.key);
    ha.layers = hb.layers;  // B's checksums, so the table agrees with B's payload
    std::vector<uint8_t> spliced = bb;  // B's layers...
    const std::vector<uint8_t> enc = kv_file::encode_header(ha);  // ...under A's header
    std::copy(enc.begin(), enc.end(), spliced.begin());
    cbltest::write_bytes(a, spliced);

    kv_open_result r = open(a, m, 30);
    ASSERT_EQ(r.status, kv_open_status::ok) << r.detail;  // the header alone is A's and valid
    EXPECT_FALSE(all_layers_ok(*r.reader));               // but no layer passes as A's
}

TEST_F(KvFile, LayerChecksumsDependOnTheChunkKey) {
    chunk_key k1, k2;
    k2.bytes[0] = 1;
    EXPECT_NE(kv_file::layer_seed(k1), kv_file::layer_seed(k2));
    const std::vector<uint8_t> zeros(4096, 0);
    EXPECT_NE(xxh64(zeros.data(), zeros.size(), kv_file::layer_seed(k1)),
              xxh64(zeros.data(), zeros.size(), kv_file::layer_seed(k2)));
}

// A version 1 file (layer checksums with seed 0) is a miss: foreign, so the store removes it
// and the chunk is recomputed in version 2.
TEST_F(KvFile, Version1FilesAreForeign) {
    const chunk_kv_meta m = small_meta();
    const std::string path = write_file(m, 9);
    rewrite_header(path, [](kv_file::header& h) { h.version = 1; });
    const std::vector<uint8_t> b = cbltest::read_bytes(path);
    try {
        kv_file::decode_header(b.data(), b.size(), b.size());
        ADD_FAILURE() << "a version 1 header was accepted";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::unsupported) << e.what();
    }
    EXPECT_EQ(open(path, m, 9).status, kv_open_status::foreign);
}

// Issue 17: the reader never follows a symlink (a link planted in the store could make it read
// any file), never blocks on a FIFO, and refuses a file others could have written.
TEST_F(KvFile, SymlinksFifosAndFilesOthersCanWriteAreRefused) {
    const chunk_kv_meta m = small_meta();
    const std::string good = write_file(m, 12, "outside.kv");
    const std::string link = dir_ + "/link.kv";
    ASSERT_EQ(::symlink(good.c_str(), link.c_str()), 0);
    kv_open_result r = open(link, m, 12);
    EXPECT_EQ(r.status, kv_open_status::corrupt);
    EXPECT_NE(r.detail.find("symbolic link"), std::string::npos) << r.detail;
    EXPECT_TRUE(r.have_st);
    EXPECT_TRUE(r.st.is_link);  // the link's identity, so only the link is removed

    const std::string fifo = dir_ + "/fifo.kv";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_TRUE(cbltest::returns_soon(fifo, [&] {
        EXPECT_EQ(open(fifo, m, 12).status, kv_open_status::corrupt);
    }));

    ASSERT_EQ(open(good, m, 12).status, kv_open_status::ok);
    ASSERT_EQ(::chmod(good.c_str(), 0620), 0);
    r = open(good, m, 12);
    EXPECT_EQ(r.status, kv_open_status::corrupt);
    EXPECT_NE(r.detail.find("writable by other users"), std::string::npos) << r.detail;
    ASSERT_EQ(::chmod(good.c_str(), 0600), 0);
    if (::geteuid() == 0) {  // only root can give a file away
        ASSERT_EQ(::chown(good.c_str(), 65534, 65534), 0);
        r = open(good, m, 12);
        EXPECT_EQ(r.status, kv_open_status::corrupt);
        EXPECT_NE(r.detail.find("owned by uid 65534"), std::string::npos) << r.detail;
    }
}
