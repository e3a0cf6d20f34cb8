// SHA-256 (FIPS 180-4 vectors) and chunk keys.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/sha256.h"

using namespace cacheblend;

namespace {

std::string hex(const uint8_t* b, size_t n) {
    static const char d[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += d[b[i] >> 4];
        s += d[b[i] & 15];
    }
    return s;
}

std::string sha_hex(const std::string& m) {
    uint8_t out[32];
    sha256(m.data(), m.size(), out);
    return hex(out, 32);
}

}  // namespace

TEST(Sha256, FipsVectors) {
    EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                      "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    EXPECT_EQ(sha_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalMatchesOneShotAtEverySplit) {
    std::string m;
    for (int i = 0; i < 3; ++i)
        for (int b = 0; b < 64; ++b) m += static_cast<char>(b);
    const std::string want = "4bdaf0c2d351114b2ba055d7c3941383c20f5aa4c6b62fc47e0472d4c2f5eb0d";
    ASSERT_EQ(sha_hex(m), want);
    for (size_t split = 0; split <= m.size(); ++split) {
        sha256_ctx c;
        c.update(m.data(), split);
        c.update(m.data() + split, m.size() - split);
        uint8_t out[32];
        c.final(out);
        ASSERT_EQ(hex(out, 32), want) << "split " << split;
    }
    // Byte at a time across padding boundaries (55, 56, 63, 64 bytes).
    for (size_t n : {55u, 56u, 63u, 64u, 65u, 119u, 120u}) {
        sha256_ctx c;
        for (size_t i = 0; i < n; ++i) c.update(m.data() + i, 1);
        uint8_t a[32], b[32];
        c.final(a);
        sha256(m.data(), n, b);
        ASSERT_EQ(hex(a, 32), hex(b, 32)) << n;
    }
}

TEST(ChunkKey, DeterministicAndHex) {
    const std::vector<token_id> pre = {1, 2, 3}, chunk = {10, 20, 30, 40};
    const chunk_key a = make_chunk_key(0x1234, 1, pre, chunk);
    const chunk_key b = make_chunk_key(0x1234, 1, pre, chunk);
    EXPECT_EQ(a, b);
    const std::string h = a.hex();
    ASSERT_EQ(h.size(), 64u);
    for (char c : h) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << h;
    EXPECT_EQ(hex(a.bytes, 32), h);
    chunk_key zero;
    EXPECT_EQ(zero.hex(), std::string(64, '0'));
}

TEST(ChunkKey, EveryInputMatters) {
    const std::vector<token_id> pre = {1, 2, 3}, chunk = {10, 20, 30, 40};
    std::set<std::string> keys;
    keys.insert(make_chunk_key(7, 1, pre, chunk).hex());
    keys.insert(make_chunk_key(8, 1, pre, chunk).hex());                // fingerprint
    keys.insert(make_chunk_key(7, 2, pre, chunk).hex());                // format
    keys.insert(make_chunk_key(7, 1, {1, 2}, chunk).hex());             // preamble
    keys.insert(make_chunk_key(7, 1, pre, {10, 20, 30, 41}).hex());     // chunk token
    keys.insert(make_chunk_key(7, 1, pre, {10, 20, 30}).hex());         // chunk length
    keys.insert(make_chunk_key(7, 1, {1, 2, 3, 10}, {20, 30, 40}).hex());  // where P ends
    keys.insert(make_chunk_key(7, 1, {}, {1, 2, 3, 10, 20, 30, 40}).hex());
    keys.insert(make_chunk_key(7, 1, pre, {}).hex());
    keys.insert(make_chunk_key(7, 1, {}, {}).hex());
    keys.insert(make_chunk_key(uint64_t(7) << 32, 1, pre, chunk).hex());  // high bits used
    keys.insert(make_chunk_key(7, 1, pre, {10, 20, 30, -40}).hex());      // sign bits used
    EXPECT_EQ(keys.size(), 12u);
}

TEST(ChunkKey, EncodingIsPinned) {
    // The key names files on disk: a change here orphans every store, so it must be deliberate
    // (bump the domain tag). Value computed from the documented encoding:
    // SHA-256("cacheblend-chunk-v1\0" || u64le fp || u64le fmt || u64le |P| || P i32le ||
    //         u64le |C| || C i32le).
    std::string m("cacheblend-chunk-v1", 19);
    m += '\0';
    auto u64 = [&](uint64_t v) {
        for (int i = 0; i < 8; ++i) m += static_cast<char>(v >> (8 * i));
    };
    auto i32 = [&](int32_t v) {
        for (int i = 0; i < 4; ++i) m += static_cast<char>(static_cast<uint32_t>(v) >> (8 * i));
    };
    u64(0xfeedface12345678ull);
    u64(2);
    u64(2);
    i32(5);
    i32(-6);
    u64(3);
    i32(100);
    i32(200);
    i32(300);
    const std::string want = sha_hex(m);
    EXPECT_EQ(make_chunk_key(0xfeedface12345678ull, 2, {5, -6}, {100, 200, 300}).hex(), want);
    EXPECT_EQ(want, "86dc43de37df2850a0bcb470182afb57f476896b53589ff42404c5e139bdca41");
}
