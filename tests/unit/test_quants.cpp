// Block (de)quantization, fp16/bf16 conversions and quantized dot products on every ISA level.
// Expected values are computed here from the layout facts (reference/gguf-and-llama-facts.md §2)
// without calling the library, so a layout slip in the kernels cannot hide in the expectation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/quants.h"
#include "kernels/fp16.h"

using namespace cacheblend;

namespace {

// ---- helpers --------------------------------------------------------------------------------

struct type_info {
    dtype t;
    int64_t block;
    size_t bytes;
};

const std::vector<type_info>& weight_types() {
    static const std::vector<type_info> v = {
        {dtype::f32, 1, 4},      {dtype::f16, 1, 2},      {dtype::bf16, 1, 2},
        {dtype::q4_0, 32, 18},   {dtype::q4_1, 32, 20},   {dtype::q5_0, 32, 22},
        {dtype::q5_1, 32, 24},   {dtype::q8_0, 32, 34},   {dtype::q2_k, 256, 84},
        {dtype::q3_k, 256, 110}, {dtype::q4_k, 256, 144}, {dtype::q5_k, 256, 176},
        {dtype::q6_k, 256, 210},
    };
    return v;
}

type_info info_of(dtype t) {
    for (const type_info& ti : weight_types()) {
        if (ti.t == t) return ti;
    }
    if (t == dtype::q8_1) return {t, 32, 36};
    if (t == dtype::q8_k) return {t, 256, 292};
    return {t, 0, 0};
}

size_t row_bytes(dtype t, int64_t n) {
    const type_info ti = info_of(t);
    return static_cast<size_t>(n / ti.block) * ti.bytes;
}

std::vector<cpu_isa> isa_levels() {
    std::vector<cpu_isa> v;
    for (cpu_isa isa : {cpu_isa::generic, cpu_isa::avx2, cpu_isa::avx512}) {
        if (static_cast<int>(isa) <= static_cast<int>(cpu_isa_detected())) v.push_back(isa);
    }
    return v;
}

// Restores the level that was active when the scope began.
struct isa_scope {
    cpu_isa saved = cpu_isa_active();
    ~isa_scope() { cpu_isa_set_override(saved); }
};

uint16_t h(float f) { return fp32_to_fp16(f); }

float hf(uint16_t v) { return fp16_to_fp32(v); }

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
    b[off] = static_cast<uint8_t>(v & 0xff);
    b[off + 1] = static_cast<uint8_t>(v >> 8);
}

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

std::vector<float> dequant(dtype t, const void* p, int64_t n) {
    std::vector<float> y(n);
    dequantize_row(t, p, y.data(), n);
    return y;
}

// A byte buffer whose data() is `misalign` bytes past a 64-byte boundary.
struct odd_buffer {
    std::vector<uint8_t> raw;
    size_t off = 0;
    odd_buffer(size_t n, size_t misalign) : raw(n + 128) {
        const uintptr_t base = reinterpret_cast<uintptr_t>(raw.data());
        off = ((64 - base % 64) % 64) + misalign;
    }
    uint8_t* data() { return raw.data() + off; }
};

// ---- fp16 / bf16 --------------------------------------------------------------------------

TEST(Fp16, AllHalvesRoundTrip) {
    for (uint32_t v = 0; v < 65536; ++v) {
        const uint16_t hv = static_cast<uint16_t>(v);
        const float f = fp16_to_fp32(hv);
        const bool is_nan = (hv & 0x7c00) == 0x7c00 && (hv & 0x3ff);
        if (is_nan) {
            ASSERT_TRUE(std::isnan(f)) << v;
            ASSERT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
        } else {
            ASSERT_EQ(fp32_to_fp16(f), hv) << v;
        }
    }
}

TEST(Fp16, KnownValues) {
    EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
    EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
    EXPECT_EQ(fp32_to_fp16(65504.f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65520.f), 0x7c00);  // the tie rounds to even: overflow to inf
    EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
    EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -25)), 0x0000);  // tie to even: zero
    EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.f, -25), 1.f)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(3.f, -25)), 0x0002);  // 1.5 units: tie to even 2
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -14)), 0x0400);  // smallest normal
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.f, -24));
    EXPECT_EQ(fp16_to_fp32(0x7c00), INFINITY);
    const uint16_t qnan = fp32_to_fp16(NAN);
    EXPECT_EQ(qnan & 0x7e00, 0x7e00);
    // A signalling float NaN whose payload sits only in the low bits must stay a NaN.
    uint32_t snan_bits = 0x7f800001u;
    float snan;
    std::memcpy(&snan, &snan_bits, 4);
    EXPECT_EQ(fp32_to_fp16(snan), 0x7e00);
}

TEST(Fp16, TiesRoundToEven) {
    // Every midpoint between adjacent finite halves, and its float neighbours.
    for (uint32_t v = 0; v < 0x7bff; ++v) {
        const float lo = fp16_to_fp32(static_cast<uint16_t>(v));
        const float hi = fp16_to_fp32(static_cast<uint16_t>(v + 1));
        const float mid = (lo + hi) * 0.5f;  // exact: halves have 11 significant bits
        const uint16_t even = (v & 1) ? static_cast<uint16_t>(v + 1) : static_cast<uint16_t>(v);
        ASSERT_EQ(fp32_to_fp16(mid), even) << v;
        ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e9f)), v + 1) << v;
        ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, -1e9f)), v) << v;
        ASSERT_EQ(fp32_to_fp16(-mid), even | 0x8000) << v;
    }
}

TEST(Bf16, Conversions) {
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
    auto from_bits = [](uint32_t u) {
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    };
    EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
    EXPECT_EQ(fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
    EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
    EXPECT_EQ(fp32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
    EXPECT_EQ(fp32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);  // NaN stays NaN, quiet
    EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
}

TEST(Fp16, RowConvertersMatchScalarOnEveryIsa) {
    isa_scope scope;
    std::mt19937 rng(7);
    std::vector<uint16_t> hsrc(1031);
    for (auto& v : hsrc) v = static_cast<uint16_t>(rng());
    hsrc[3] = 0x7c00;
    hsrc[4] = 0x0001;
    std::vector<float> fsrc = random_floats(1031, 8, 100.f);
    fsrc[5] = 65520.f;
    fsrc[6] = std::ldexp(1.f, -25);
    fsrc[7] = 1e-30f;
    for (cpu_isa isa : isa_levels()) {
        cpu_isa_set_override(isa);
        for (int64_t n : {0, 1, 7, 15, 16, 17, 33, 64, 1000}) {
            for (int64_t off : {0, 1, 3}) {
                std::vector<float> f(n + 1, -1.f);
                fp16_to_fp32_row(hsrc.data() + off, f.data(), n);
                for (int64_t i = 0; i < n; ++i) {
                    const float e = fp16_to_fp32(hsrc[off + i]);
                    if (std::isnan(e)) {
                        ASSERT_TRUE(std::isnan(f[i]));
                    } else {
                        ASSERT_EQ(f[i], e) << cpu_isa_name(isa) << " n=" << n << " i=" << i;
                    }
                }
                ASSERT_EQ(f[n], -1.f);  // nothing written past the end
                std::vector<uint16_t> o(n + 1, 0xabcd);
                fp32_to_fp16_row(fsrc.data() + off, o.data(), n);
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_EQ(o[i], fp32_to_fp16(fsrc[off + i]))
                        << cpu_isa_name(isa) << " n=" << n << " i=" << i;
                }
                ASSERT_EQ(o[n], 0xabcd);
            }
        }
    }
}

TEST(CpuFeatures, OverrideClampsToHardware) {
    isa_scope scope;
    const cpu_isa hw = cpu_isa_detected();
    EXPECT_EQ(cpu_isa_set_override(cpu_isa::generic), cpu_isa::generic);
    EXPECT_EQ(cpu_isa_active(), cpu_isa::generic);
    EXPECT_EQ(cpu_isa_set_override(cpu_isa::amx), hw);
    EXPECT_EQ(cpu_isa_active(), hw);
    const cpu_isa avx512 = hw < cpu_isa::avx512 ? hw : cpu_isa::avx512;
    EXPECT_EQ(cpu_isa_set_override(cpu_isa::avx512), avx512);
    EXPECT_EQ(cpu_isa_active(), avx512);
    EXPECT_STREQ(cpu_isa_name(cpu_isa::avx2), "avx2");
    EXPECT_STREQ(cpu_isa_name(cpu_isa::amx), "amx");
}

// Runs in a child process started by EnvVariableSelectsLevel (the env is read once).
TEST(CpuFeatures, EnvProbe) {
    const char* want = std::getenv("CBL_TEST_EXPECT_ISA");
    if (!want) GTEST_SKIP() << "only run as a child of EnvVariableSelectsLevel";
    EXPECT_STREQ(cpu_isa_name(cpu_isa_active()), want);
}

TEST(CpuFeatures, EnvVariableSelectsLevel) {
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ASSERT_GT(len, 0);
    exe[len] = 0;
    const cpu_isa hw = cpu_isa_detected();
    auto clamp = [&](cpu_isa isa) {
        return static_cast<int>(isa) < static_cast<int>(hw) ? isa : hw;
    };
    const std::pair<const char*, cpu_isa> cases[] = {{"generic", cpu_isa::generic},
                                                     {"avx2", clamp(cpu_isa::avx2)},
                                                     {"avx512", clamp(cpu_isa::avx512)},
                                                     {"amx", clamp(cpu_isa::amx)},
                                                     {"avx9000", hw},
                                                     {"", hw}};
    for (const auto& c : cases) {
        const std::string cmd = std::string("CBL_CPU_ISA='") + c.first +
                                "' CBL_TEST_EXPECT_ISA=" + cpu_isa_name(c.second) + " '" + exe +
                                "' --gtest_filter=CpuFeatures.EnvProbe > /dev/null 2>&1";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << "CBL_CPU_ISA=" << c.first;
    }
}

// ---- hand-built blocks ---------------------------------------------------------------------

void expect_dequant(dtype t, const std::vector<uint8_t>& bytes, const std::vector<float>& want) {
    isa_scope scope;
    for (cpu_isa isa : isa_levels()) {
        cpu_isa_set_override(isa);
        // Also from a 2-byte-aligned copy, as blocks sit inside GGUF tensors.
        odd_buffer buf(bytes.size(), 2);
        std::memcpy(buf.data(), bytes.data(), bytes.size());
        const std::vector<float> got = dequant(t, buf.data(), static_cast<int64_t>(want.size()));
        for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(got[i], want[i]) << cpu_isa_name(isa) << " element " << i;
        }
    }
}

TEST(HandBuilt, Q4_0) {
    std::vector<uint8_t> b(36);
    std::vector<float> want(64);
    const float d[2] = {0.5f, -0.25f};
    for (int blk = 0; blk < 2; ++blk) {
        const size_t o = 18 * blk;
        put16(b, o, h(d[blk]));
        for (int j = 0; j < 16; ++j) {
            const int lo = (j + blk) & 15, hi = (15 - j) & 15;
            b[o + 2 + j] = static_cast<uint8_t>(lo | (hi << 4));
            want[32 * blk + j] = (lo - 8) * d[blk];
            want[32 * blk + j + 16] = (hi - 8) * d[blk];
        }
    }
    expect_dequant(dtype::q4_0, b, want);
}

TEST(HandBuilt, Q4_1) {
    std::vector<uint8_t> b(40);
    std::vector<float> want(64);
    const float d[2] = {0.125f, 2.0f}, m[2] = {-1.0f, 0.5f};
    for (int blk = 0; blk < 2; ++blk) {
        const size_t o = 20 * blk;
        put16(b, o, h(d[blk]));
        put16(b, o + 2, h(m[blk]));
        for (int j = 0; j < 16; ++j) {
            const int lo = (3 * j + blk) & 15, hi = (j * 5 + 1) & 15;
            b[o + 4 + j] = static_cast<uint8_t>(lo | (hi << 4));
            want[32 * blk + j] = lo * d[blk] + m[blk];
            want[32 * blk + j + 16] = hi * d[blk] + m[blk];
        }
    }
    expect_dequant(dtype::q4_1, b, want);
}

TEST(HandBuilt, Q5_0) {
    std::vector<uint8_t> b(22);
    std::vector<float> want(32);
    put16(b, 0, h(0.5f));
    const uint32_t qh = 0xA5C3F00Fu;  // bits 0-3, 12-15, ... set: mixed high bits
    b[2] = qh & 0xff;
    b[3] = (qh >> 8) & 0xff;
    b[4] = (qh >> 16) & 0xff;
    b[5] = qh >> 24;
    for (int j = 0; j < 16; ++j) {
        const int lo = j, hi = 15 - j;
        b[6 + j] = static_cast<uint8_t>(lo | (hi << 4));
        const int h0 = static_cast<int>((qh >> j) & 1), h1 = static_cast<int>((qh >> (j + 16)) & 1);
        want[j] = ((lo | (h0 << 4)) - 16) * 0.5f;
        want[j + 16] = ((hi | (h1 << 4)) - 16) * 0.5f;
    }
    expect_dequant(dtype::q5_0, b, want);
}

TEST(HandBuilt, Q5_1) {
    std::vector<uint8_t> b(24);
    std::vector<float> want(32);
    put16(b, 0, h(0.25f));
    put16(b, 2, h(-3.0f));
    const uint32_t qh = 0x0F0F1234u;
    b[4] = qh & 0xff;
    b[5] = (qh >> 8) & 0xff;
    b[6] = (qh >> 16) & 0xff;
    b[7] = qh >> 24;
    for (int j = 0; j < 16; ++j) {
        const int lo = (j * 7) & 15, hi = (j * 3 + 2) & 15;
        b[8 + j] = static_cast<uint8_t>(lo | (hi << 4));
        want[j] = (lo | (((qh >> j) & 1) << 4)) * 0.25f - 3.0f;
        want[j + 16] = (hi | (((qh >> (j + 16)) & 1) << 4)) * 0.25f - 3.0f;
    }
    expect_dequant(dtype::q5_1, b, want);
}

TEST(HandBuilt, Q8_0) {
    std::vector<uint8_t> b(68);
    std::vector<float> want(64);
    const float d[2] = {0.0625f, -1.5f};
    for (int blk = 0; blk < 2; ++blk) {
        put16(b, 34 * blk, h(d[blk]));
        for (int j = 0; j < 32; ++j) {
            const int8_t q = static_cast<int8_t>(j * 9 - 128 + blk);
            b[34 * blk + 2 + j] = static_cast<uint8_t>(q);
            want[32 * blk + j] = q * d[blk];
        }
    }
    expect_dequant(dtype::q8_0, b, want);
}

TEST(HandBuilt, Q2_K) {
    std::vector<uint8_t> b(84);
    std::vector<float> want(256);
    const float d = 0.5f, dmin = 0.25f;
    for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>(((j + 1) & 15) | ((15 - j) << 4));
    for (int j = 0; j < 64; ++j) b[16 + j] = static_cast<uint8_t>(j * 37 + 11);
    put16(b, 80, h(d));
    put16(b, 82, h(dmin));
    // Element 128h + 32j + 16k + l: bits 2j of qs[32h + 16k + l], scale byte 8h + 2j + k.
    for (int hh = 0; hh < 2; ++hh)
        for (int j = 0; j < 4; ++j)
            for (int k = 0; k < 2; ++k)
                for (int l = 0; l < 16; ++l) {
                    const int q = (b[16 + 32 * hh + 16 * k + l] >> (2 * j)) & 3;
                    const uint8_t sc = b[8 * hh + 2 * j + k];
                    want[128 * hh + 32 * j + 16 * k + l] = d * (sc & 15) * q - dmin * (sc >> 4);
                }
    expect_dequant(dtype::q2_k, b, want);
}

TEST(HandBuilt, Q3_K) {
    std::vector<uint8_t> b(110);
    std::vector<float> want(256);
    const float d = 0.125f;
    // Signed scales s_j = 6-bit field - 32; choose fields directly.
    const int field[16] = {0, 1, 31, 32, 33, 63, 40, 20, 5, 60, 45, 17, 32, 48, 2, 59};
    for (int j = 0; j < 32; ++j) b[j] = static_cast<uint8_t>(j * 53 + 7);       // hmask
    for (int j = 0; j < 64; ++j) b[32 + j] = static_cast<uint8_t>(j * 29 + 3);  // qs
    for (int j = 0; j < 16; ++j) {
        if (j < 8)
            b[96 + j] = static_cast<uint8_t>(field[j] & 15);
        else
            b[96 + j - 8] |= static_cast<uint8_t>((field[j] & 15) << 4);
        b[96 + 8 + j % 4] |= static_cast<uint8_t>((field[j] >> 4) << (2 * (j / 4)));
    }
    put16(b, 108, h(d));
    for (int hh = 0; hh < 2; ++hh)
        for (int j = 0; j < 4; ++j)
            for (int k = 0; k < 2; ++k)
                for (int l = 0; l < 16; ++l) {
                    const int q2 = (b[32 + 32 * hh + 16 * k + l] >> (2 * j)) & 3;
                    const int hb = (b[16 * k + l] >> (4 * hh + j)) & 1;
                    const int s = field[8 * hh + 2 * j + k] - 32;
                    want[128 * hh + 32 * j + 16 * k + l] = d * s * (q2 - (hb ? 0 : 4));
                }
    expect_dequant(dtype::q3_k, b, want);
}

// q4_K / q5_K scale bytes for sc = {1,2,3,4,33,34,35,63}, mn = {0,1,2,3,17,18,19,62}, packed
// by hand: bytes 0-3 sc[j] | (sc[j+4] >> 4) << 6, bytes 4-7 mn[j] | (mn[j+4] >> 4) << 6,
// bytes 8-11 (sc[j+4] & 15) | (mn[j+4] & 15) << 4.
const uint8_t k4_scales[12] = {0x81, 0x82, 0x83, 0xC4, 0x40, 0x41,
                               0x42, 0xC3, 0x11, 0x22, 0x33, 0xEF};
const int k4_sc[8] = {1, 2, 3, 4, 33, 34, 35, 63};
const int k4_mn[8] = {0, 1, 2, 3, 17, 18, 19, 62};

TEST(HandBuilt, Q4_K) {
    std::vector<uint8_t> b(144);
    std::vector<float> want(256);
    const float d = 0.0625f, dmin = 0.5f;
    put16(b, 0, h(d));
    put16(b, 2, h(dmin));
    std::memcpy(&b[4], k4_scales, 12);
    for (int j = 0; j < 128; ++j) b[16 + j] = static_cast<uint8_t>(j * 13 + 5);
    for (int e = 0; e < 256; ++e) {
        const int c = e / 64, w = e % 64, sub = e / 32;
        const uint8_t byte = b[16 + 32 * c + w % 32];
        const int q = w < 32 ? (byte & 15) : (byte >> 4);
        want[e] = d * k4_sc[sub] * q - dmin * k4_mn[sub];
    }
    expect_dequant(dtype::q4_k, b, want);
}

TEST(HandBuilt, Q5_K) {
    std::vector<uint8_t> b(176);
    std::vector<float> want(256);
    const float d = 0.25f, dmin = 0.125f;
    put16(b, 0, h(d));
    put16(b, 2, h(dmin));
    std::memcpy(&b[4], k4_scales, 12);
    for (int j = 0; j < 32; ++j) b[16 + j] = static_cast<uint8_t>(j * 71 + 1);  // qh
    for (int j = 0; j < 128; ++j) b[48 + j] = static_cast<uint8_t>(j * 13 + 5);
    for (int e = 0; e < 256; ++e) {
        const int c = e / 64, w = e % 64, sub = e / 32, l = w % 32;
        const uint8_t byte = b[48 + 32 * c + l];
        int q = w < 32 ? (byte & 15) : (byte >> 4);
        if (b[16 + l] & (1 << sub)) q += 16;  // bit 2c for the low half, 2c+1 for the high
        want[e] = d * k4_sc[sub] * q - dmin * k4_mn[sub];
    }
    expect_dequant(dtype::q5_k, b, want);
}

TEST(HandBuilt, Q6_K) {
    std::vector<uint8_t> b(210);
    std::vector<float> want(256);
    const float d = 0.03125f;
    for (int j = 0; j < 128; ++j) b[j] = static_cast<uint8_t>(j * 19 + 2);       // ql
    for (int j = 0; j < 64; ++j) b[128 + j] = static_cast<uint8_t>(j * 43 + 9);  // qh
    const int8_t sc[16] = {1, -1, 127, -128, 5, 17, -33, 64, 2, 3, -4, 100, -100, 9, 0, 77};
    for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(sc[j]);
    put16(b, 208, h(d));
    for (int hh = 0; hh < 2; ++hh) {
        const uint8_t* ql = &b[64 * hh];
        const uint8_t* qh = &b[128 + 32 * hh];
        const int8_t* s = sc + 8 * hh;
        float* y = want.data() + 128 * hh;
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            y[l] = d * s[is + 0] * (((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
            y[l + 32] = d * s[is + 2] * (((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            y[l + 64] = d * s[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            y[l + 96] = d * s[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
    expect_dequant(dtype::q6_k, b, want);
}

TEST(HandBuilt, Fp16Bf16F32Rows) {
    std::vector<uint8_t> b(8);
    put16(b, 0, 0x3c00);
    put16(b, 2, 0xc000);
    put16(b, 4, 0x0001);
    put16(b, 6, 0x7bff);
    expect_dequant(dtype::f16, b, {1.f, -2.f, std::ldexp(1.f, -24), 65504.f});
    put16(b, 0, 0x3f80);
    put16(b, 2, 0xc040);
    put16(b, 4, 0x3e00);
    put16(b, 6, 0x0000);
    expect_dequant(dtype::bf16, b, {1.f, -3.f, 0.125f, 0.f});
}

// ---- activation quantizers (ggml's x86 AVX math) ---------------------------------------------

TEST(ActivationQuant, Q8_0AndQ8_1ByHand) {
    isa_scope scope;
    std::vector<float> x(32);
    // amax = 127 -> d = 1 and id = 127 / amax = 1 exactly, so x.5 values are exact ties. Like
    // ggml's AVX quantize_row_q8_0/q8_1 (what llama.cpp runs on x86, unlike its _ref code) we round
    // them to even.
    for (int j = 0; j < 32; ++j) x[j] = (j - 16) * 1.5f;
    x[0] = -127.f;
    for (cpu_isa isa : isa_levels()) {
        cpu_isa_set_override(isa);
        std::vector<uint8_t> b(36);
        quantize_row(dtype::q8_0, x.data(), b.data(), 32);
        const float d = 1.f;
        EXPECT_EQ(get16(b.data()), h(d)) << cpu_isa_name(isa);
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            const int want = static_cast<int>(std::nearbyint(x[j] * (127.f / 127.f)));
            EXPECT_EQ(static_cast<int8_t>(b[2 + j]), want) << cpu_isa_name(isa) << " j=" << j;
            sum += want;
        }
        EXPECT_EQ(static_cast<int8_t>(b[2]), -127);
        EXPECT_EQ(static_cast<int8_t>(b[2 + 19]), 4);   // 4.5 -> 4 (to even)
        EXPECT_EQ(static_cast<int8_t>(b[2 + 13]), -4);  // -4.5 -> -4
        EXPECT_EQ(static_cast<int8_t>(b[2 + 17]), 2);   // 1.5 -> 2
        quantize_row(dtype::q8_1, x.data(), b.data(), 32);
        EXPECT_EQ(get16(b.data()), h(d));
        EXPECT_EQ(get16(b.data() + 2), h(sum * d));
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(static_cast<int8_t>(b[4 + j]), static_cast<int>(std::nearbyint(x[j])));
        }
        // All-zero block: d = 0, q = 0.
        std::vector<float> z(32, 0.f);
        quantize_row(dtype::q8_0, z.data(), b.data(), 32);
        for (int j = 0; j < 34; ++j) EXPECT_EQ(b[j], 0);
    }
}

TEST(ActivationQuant, Q8_KByHand) {
    isa_scope scope;
    std::vector<float> x(256);
    for (int j = 0; j < 256; ++j) x[j] = std::sin(j * 0.37f);
    x[100] = 2.0f;  // the max-magnitude element is positive -> d is negative
    for (cpu_isa isa : isa_levels()) {
        cpu_isa_set_override(isa);
        std::vector<uint8_t> b(292);
        quantize_row(dtype::q8_k, x.data(), b.data(), 256);
        float d;
        std::memcpy(&d, b.data(), 4);
        const float iscale = -127.f / 2.0f;
        EXPECT_EQ(d, 1 / iscale);
        EXPECT_EQ(static_cast<int8_t>(b[4 + 100]), -127);
        for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) {
                const int8_t q = static_cast<int8_t>(b[4 + 16 * g + l]);
                EXPECT_EQ(q,
                          std::min(127, static_cast<int>(std::nearbyint(iscale * x[16 * g + l]))));
                sum += q;
            }
            int16_t bs;
            std::memcpy(&bs, b.data() + 260 + 2 * g, 2);
            EXPECT_EQ(bs, sum);
        }
    }
}

TEST(ActivationQuant, SameBytesOnEveryIsa) {
    isa_scope scope;
    const int64_t n = 256 * 7;
    std::vector<float> x = random_floats(n, 11, 3.f);
    for (int j = 0; j < 32; ++j) x[64 + j] = 0.f;  // a zero block
    for (dtype t : {dtype::q8_0, dtype::q8_1, dtype::q8_k, dtype::f16, dtype::bf16}) {
        cpu_isa_set_override(cpu_isa::generic);
        std::vector<uint8_t> ref(row_bytes(t, n));
        quantize_row(t, x.data(), ref.data(), n);
        for (cpu_isa isa : isa_levels()) {
            cpu_isa_set_override(isa);
            odd_buffer got(ref.size(), 2);
            quantize_row(t, x.data(), got.data(), n);
            ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size()), 0)
                << dtype_name(t) << " " << cpu_isa_name(isa);
        }
    }
}

// ---- quantize -> dequantize round trips ----------------------------------------------------

TEST(RoundTrip, ErrorBounds) {
    isa_scope scope;
    struct bound {
        dtype t;
        double max_rel_rmse;  // rmse(err) / rms(x) on N(0,1) data
    };
    const bound bounds[] = {
        {dtype::f32, 0.0},    {dtype::f16, 0.0006}, {dtype::bf16, 0.004}, {dtype::q8_0, 0.012},
        {dtype::q8_1, 0.012}, {dtype::q8_k, 0.012}, {dtype::q4_0, 0.13},  {dtype::q4_1, 0.11},
        {dtype::q5_0, 0.065}, {dtype::q5_1, 0.055}, {dtype::q2_k, 0.45},  {dtype::q3_k, 0.25},
        {dtype::q4_k, 0.11},  {dtype::q5_k, 0.055}, {dtype::q6_k, 0.03},
    };
    const int64_t n = 256 * 16;
    const std::vector<float> x = random_floats(n, 3);
    double rms = 0;
    for (float v : x) rms += v * v;
    rms = std::sqrt(rms / n);
    for (const bound& bd : bounds) {
        for (cpu_isa isa : isa_levels()) {
            cpu_isa_set_override(isa);
            std::vector<uint8_t> q(row_bytes(bd.t, n));
            quantize_row(bd.t, x.data(), q.data(), n);
            const std::vector<float> y = dequant(bd.t, q.data(), n);
            double se = 0;
            for (int64_t i = 0; i < n; ++i) se += (y[i] - x[i]) * (y[i] - x[i]);
            const double rel = std::sqrt(se / n) / rms;
            EXPECT_LE(rel, bd.max_rel_rmse) << dtype_name(bd.t) << " " << cpu_isa_name(isa);
        }
    }
    // Per-element bound for q8_0: |err| <= d/2 plus the f16 rounding of d.
    std::vector<uint8_t> q(row_bytes(dtype::q8_0, n));
    quantize_row(dtype::q8_0, x.data(), q.data(), n);
    const std::vector<float> y = dequant(dtype::q8_0, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
        for (int j = 0; j < 32; ++j) {
            ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), 0.51f * amax / 127 + amax * 1e-3f);
        }
    }
}

// ---- dot products --------------------------------------------------------------------------

// Float reference: sum of dequant(w) * dequant(a) in double. For q8_1 activations ggml's
// formula uses the stored f16 s = d*sum(q) for the min term, so the reference does too.
double ref_dot(dtype t, int64_t n, const uint8_t* w, const uint8_t* a, double* abs_sum) {
    const dtype at = vec_dot_type(t);
    isa_scope scope;
    cpu_isa_set_override(cpu_isa::generic);
    const std::vector<float> wf = dequant(t, w, n);
    const std::vector<float> af = dequant(at, a, n);
    double s = 0, as = 0;
    for (int64_t i = 0; i < n; ++i) {
        s += static_cast<double>(wf[i]) * af[i];
        as += std::fabs(static_cast<double>(wf[i]) * af[i]);
    }
    if (at == dtype::q8_1) {
        const size_t wb = info_of(t).bytes;
        for (int64_t b = 0; b < n / 32; ++b) {
            const uint8_t* ab = a + 36 * b;
            const double m = hf(get16(w + wb * b + 2));
            double qsum = 0;
            for (int j = 0; j < 32; ++j) qsum += static_cast<int8_t>(ab[4 + j]);
            s += m * (hf(get16(ab + 2)) - hf(get16(ab)) * qsum);
            as += std::fabs(m * hf(get16(ab + 2)));
        }
    }
    *abs_sum = as;
    return s;
}

struct dot_case {
    std::vector<uint8_t> w;  // nrows rows at stride `stride`, starting `misalign` bytes in
    std::vector<uint8_t> a;
    size_t stride = 0;
};

TEST(VecDot, MatchesFloatReferenceAndGenericOnEveryIsa) {
    isa_scope scope;
    for (const type_info& ti : weight_types()) {
        const dtype t = ti.t;
        const dtype at = vec_dot_type(t);
        // 150 blocks of 32 cross the kernels' 4096-element activation chunks.
        for (int64_t nblocks : {1, 2, 3, 6, 18, 150}) {
            const int64_t n = ti.block == 1 ? nblocks * 32 + (nblocks % 3) : nblocks * ti.block;
            for (int64_t nrows : {1, 2, 3, 4, 5, 7, 8, 9, 13, 17}) {
                if (nblocks == 150 && nrows > 5 && ti.block != 32) continue;  // keep it quick
                const size_t rb = row_bytes(t, n);
                const size_t stride = rb + (nrows % 2 ? 0 : 8);  // f32 rows stay 4-byte aligned
                const size_t misalign = t == dtype::f32 ? 4 : 2;
                const uint32_t seed = static_cast<uint32_t>(n * 131 + nrows);
                // Weights: quantized with a per-row scale so rows differ in magnitude.
                odd_buffer wbuf(stride * nrows, misalign);
                for (int64_t r = 0; r < nrows; ++r) {
                    const std::vector<float> wf = random_floats(n, seed + r, 0.5f + r * 0.1f);
                    quantize_row(t, wf.data(), wbuf.data() + r * stride, n);
                }
                const std::vector<float> xf = random_floats(n, seed ^ 0x5555u, 2.f);
                odd_buffer abuf(row_bytes(at, n), misalign);
                quantize_row(at, xf.data(), abuf.data(), n);

                std::vector<float> generic(nrows);
                cpu_isa_set_override(cpu_isa::generic);
                vec_dot_rows(t, n, wbuf.data(), stride, nrows, abuf.data(), generic.data());
                for (int64_t r = 0; r < nrows; ++r) {
                    double abs_sum = 0;
                    const double ref =
                        ref_dot(t, n, wbuf.data() + r * stride, abuf.data(), &abs_sum);
                    ASSERT_NEAR(generic[r], ref, 2e-6 * abs_sum + 1e-30)
                        << dtype_name(t) << " generic n=" << n << " row " << r;
                }
                for (cpu_isa isa : isa_levels()) {
                    cpu_isa_set_override(isa);
                    std::vector<float> out(nrows + 1, 12345.f);
                    vec_dot_rows(t, n, wbuf.data(), stride, nrows, abuf.data(), out.data());
                    ASSERT_EQ(out[nrows], 12345.f) << "wrote past out[nrows]";
                    for (int64_t r = 0; r < nrows; ++r) {
                        double abs_sum = 0;
                        const double ref =
                            ref_dot(t, n, wbuf.data() + r * stride, abuf.data(), &abs_sum);
                        ASSERT_NEAR(out[r], ref, 2e-6 * abs_sum + 1e-30)
                            << dtype_name(t) << " " << cpu_isa_name(isa) << " n=" << n
                            << " nrows=" << nrows << " row " << r;
                        ASSERT_NEAR(out[r], generic[r], 1e-6 * abs_sum + 1e-30)
                            << dtype_name(t) << " " << cpu_isa_name(isa) << " vs generic";
                        // One row at a time gives the same bits as the multi-row kernel.
                        const float one = vec_dot(t, n, wbuf.data() + r * stride, abuf.data());
                        ASSERT_EQ(one, out[r]) << dtype_name(t) << " " << cpu_isa_name(isa)
                                               << " n=" << n << " nrows=" << nrows << " r=" << r;
                    }
                }
            }
        }
    }
}

TEST(VecDot, ExtremeQuantsAreExact) {
    // Worst-case integer magnitudes: all-max weights and activations must not saturate
    // (maddubs pairs, int16 sums) and must match the float reference.
    isa_scope scope;
    for (const type_info& ti : weight_types()) {
        if (ti.block == 1) continue;
        const dtype t = ti.t;
        const dtype at = vec_dot_type(t);
        const int64_t n = 512;
        for (int pattern = 0; pattern < 4; ++pattern) {
            std::vector<float> wf(n), xf(n);
            for (int64_t i = 0; i < n; ++i) {
                wf[i] = (pattern & 1) ? ((i % 2) ? 1.f : -1.f) : (i % 32 == 0 ? -1.f : 1.f);
                xf[i] = (pattern & 2) ? -1.f : ((i % 3) ? 1.f : -1.f);
            }
            std::vector<uint8_t> w(row_bytes(t, n)), a(row_bytes(at, n));
            cpu_isa_set_override(cpu_isa::generic);
            quantize_row(t, wf.data(), w.data(), n);
            quantize_row(at, xf.data(), a.data(), n);
            double abs_sum = 0;
            const double ref = ref_dot(t, n, w.data(), a.data(), &abs_sum);
            for (cpu_isa isa : isa_levels()) {
                cpu_isa_set_override(isa);
                const float got = vec_dot(t, n, w.data(), a.data());
                ASSERT_NEAR(got, ref, 2e-6 * abs_sum + 1e-30)
                    << dtype_name(t) << " " << cpu_isa_name(isa) << " pattern " << pattern;
            }
        }
    }
}

TEST(VecDot, Q8_0WithMinus128Weights) {
    // GGUF q8_0 weights may hold -128 (our quantizer never writes it, others may).
    isa_scope scope;
    const int64_t n = 128;
    std::vector<uint8_t> w(row_bytes(dtype::q8_0, n));
    for (int64_t b = 0; b < n / 32; ++b) {
        put16(w, 34 * b, h(0.5f));
        for (int j = 0; j < 32; ++j) w[34 * b + 2 + j] = static_cast<uint8_t>(j % 2 ? 0x80 : 0x7f);
    }
    std::vector<float> xf = random_floats(n, 99, 1.f);
    std::vector<uint8_t> a(row_bytes(dtype::q8_0, n));
    quantize_row(dtype::q8_0, xf.data(), a.data(), n);
    double abs_sum = 0;
    const double ref = ref_dot(dtype::q8_0, n, w.data(), a.data(), &abs_sum);
    for (cpu_isa isa : isa_levels()) {
        cpu_isa_set_override(isa);
        EXPECT_NEAR(vec_dot(dtype::q8_0, n, w.data(), a.data()), ref, 2e-6 * abs_sum)
            << cpu_isa_name(isa);
    }
}

TEST(Dequantize, SimdMatchesGenericBitForBit) {
    isa_scope scope;
    for (const type_info& ti : weight_types()) {
        for (int64_t nblocks : {1, 2, 3, 5, 8, 33}) {
            const int64_t n = ti.block == 1 ? nblocks * 8 + 3 : nblocks * ti.block;
            const std::vector<float> x = random_floats(n, static_cast<uint32_t>(n), 1.5f);
            odd_buffer q(row_bytes(ti.t, n), ti.t == dtype::f32 ? 4 : 2);
            cpu_isa_set_override(cpu_isa::generic);
            quantize_row(ti.t, x.data(), q.data(), n);
            const std::vector<float> ref = dequant(ti.t, q.data(), n);
            for (cpu_isa isa : isa_levels()) {
                cpu_isa_set_override(isa);
                std::vector<float> got(n + 1, 777.f);
                dequantize_row(ti.t, q.data(), got.data(), n);
                ASSERT_EQ(got[n], 777.f);
                ASSERT_EQ(std::memcmp(got.data(), ref.data(), n * sizeof(float)), 0)
                    << dtype_name(ti.t) << " " << cpu_isa_name(isa) << " n=" << n;
            }
        }
    }
}

TEST(VecDot, VecDotTypes) {
    EXPECT_EQ(vec_dot_type(dtype::q4_0), dtype::q8_0);
    EXPECT_EQ(vec_dot_type(dtype::q5_0), dtype::q8_0);
    EXPECT_EQ(vec_dot_type(dtype::q8_0), dtype::q8_0);
    EXPECT_EQ(vec_dot_type(dtype::q4_1), dtype::q8_1);
    EXPECT_EQ(vec_dot_type(dtype::q5_1), dtype::q8_1);
    for (dtype t : {dtype::q2_k, dtype::q3_k, dtype::q4_k, dtype::q5_k, dtype::q6_k}) {
        EXPECT_EQ(vec_dot_type(t), dtype::q8_k);
    }
    EXPECT_EQ(vec_dot_type(dtype::f16), dtype::f16);
    EXPECT_EQ(vec_dot_type(dtype::bf16), dtype::bf16);
    EXPECT_EQ(vec_dot_type(dtype::f32), dtype::f32);
}

}  // namespace
