// The AMX-INT8 prefill kernel of the integer GEMM (kernels/cpu/arch/x86/igemm-amx-impl.h).
// The kernel is one template over its tile instructions: here it runs with a scalar emulator of
// their documented semantics on every AVX-512 machine and must give the bits of the scalar
// reference and of the VNNI kernels for every output, never doing what the hardware would fault
// on; on machines with AMX the hardware instantiation must give the same bits (skipped elsewhere,
// with the reason). matmul takes the tiles only where the active level is amx, and
// CBL_CPU_ISA=avx512 turns them off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/igemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants.h"
#include "kernels/fp16.h"

namespace cb = cacheblend;
using cb::dtype;

namespace {

const dtype k_types[] = {dtype::q4_0, dtype::q5_0, dtype::q4_k, dtype::q5_k, dtype::q6_k};

// Offsets of the f16 scales inside a block (d, and dmin where present).
std::vector<size_t> scale_offsets(dtype t) {
    switch (t) {
        case dtype::q4_0:
        case dtype::q5_0: return {0};
        case dtype::q4_k:
        case dtype::q5_k: return {0, 2};
        case dtype::q6_k: return {208};
        default: return {};
    }
}

// Random bytes (every bit pattern is a valid block) with finite f16 scales, as test_igemm.cpp.
std::vector<unsigned char> random_weights(dtype t, int64_t rows, int64_t cols, uint32_t seed) {
    std::vector<unsigned char> w(cb::dtype_row_bytes(t, cols) * rows);
    std::mt19937 rng(seed);
    for (auto& b : w) b = static_cast<unsigned char>(rng());
    const size_t blk = cb::dtype_info(t)->block_bytes;
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (size_t o = 0; o < w.size(); o += blk) {
        for (size_t s : scale_offsets(t)) {
            const uint16_t h = cb::fp32_to_fp16(scale(rng));
            std::memcpy(&w[o + s], &h, 2);
        }
    }
    return w;
}

std::vector<float> random_acts(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(rng);
    return v;
}

using gemm_fn = void (*)(dtype, int64_t, const void*, size_t, int64_t, const cb::igemm::acts&, int64_t, int64_t,
                         float*, int64_t);

// Runs `kernel` (and the VNNI gemm_rows where it can run) on every shape and compares each output
// with the scalar reference bit for bit. Activation rows start at an offset (i0 = 3) into a
// larger buffer, and the output has a row stride wider than nrows.
void check_against_reference(gemm_fn kernel, const char* name) {
    const bool vnni = cb::igemm::active(dtype::q4_k);
    for (dtype t : k_types) {
        SCOPED_TRACE(cb::dtype_name(t));
        const int64_t g = cb::igemm::info(t)->group;
        // k: one group, and several (an odd count for the 32-element types)
        for (int64_t k : {g, g == 32 ? int64_t(800) : int64_t(768)}) {
            const int64_t n_max = 70, m_max = 40, i0 = 3;
            const std::vector<unsigned char> w = random_weights(t, n_max, k, static_cast<uint32_t>(k) + 1);
            const size_t row_bytes = cb::dtype_row_bytes(t, k);
            const std::vector<float> x = random_acts((m_max + i0) * k, static_cast<uint32_t>(k) + 2);
            cb::igemm::act_buffer buf;
            buf.reserve(t, k, m_max + i0);
            buf.quantize_rows(x.data(), k, 0, m_max + i0);
            const cb::igemm::acts a = buf.view();
            std::vector<float> ref(static_cast<size_t>(m_max * n_max));
            for (int64_t i = 0; i < m_max; ++i) {
                for (int64_t r = 0; r < n_max; ++r) {
                    ref[i * n_max + r] = cb::igemm::reference_dot(t, k, w.data() + r * row_bytes, a, i0 + i);
                }
            }
            // m: 1..40 across the 16-row tiles and the 32-row block; nrows: panel multiples and not
            for (int64_t m : {1, 2, 7, 15, 16, 17, 31, 32, 33, 40}) {
                for (int64_t nrows : {5, 32, 64, 70}) {
                    const int64_t ldo = n_max + 3;
                    std::vector<float> got(static_cast<size_t>(m * ldo), -1.f);
                    kernel(t, k, w.data(), row_bytes, nrows, a, i0, m, got.data(), ldo);
                    std::vector<float> vg(got.size(), -1.f);
                    if (vnni) cb::igemm::gemm_rows(t, k, w.data(), row_bytes, nrows, a, i0, m, vg.data(), ldo);
                    for (int64_t i = 0; i < m; ++i) {
                        for (int64_t r = 0; r < ldo; ++r) {
                            const float o = got[i * ldo + r];
                            if (r >= nrows) {
                                ASSERT_EQ(o, -1.f) << name << " wrote past nrows: k=" << k << " m=" << m
                                                   << " nrows=" << nrows << " row " << i << " col " << r;
                                continue;
                            }
                            const float e = ref[i * n_max + r];
                            ASSERT_EQ(0, std::memcmp(&o, &e, 4))
                                << name << " vs reference: k=" << k << " m=" << m << " nrows=" << nrows << " row "
                                << i << " col " << r << ": " << o << " vs " << e;
                            if (vnni) {
                                ASSERT_EQ(0, std::memcmp(&o, &vg[i * ldo + r], 4))
                                    << name << " vs VNNI: k=" << k << " m=" << m << " nrows=" << nrows;
                            }
                        }
                    }
                }
            }
        }
    }
}

bool amx_present() { return cb::igemm::prefill_kernel_active() == cb::igemm::prefill_kernel::amx; }

struct isa_scope {
    cb::cpu_isa saved = cb::cpu_isa_active();
    ~isa_scope() { cb::cpu_isa_set_override(saved); }
};

}  // namespace

TEST(IgemmAmx, EmulatedTilesMatchReferenceAndVnniBitForBit) {
    if (cb::cpu_isa_detected() < cb::cpu_isa::avx512) {
        GTEST_SKIP() << "no AVX-512 on this CPU: the AMX kernel's scale fold and float steps are AVX-512 code";
    }
    cb::igemm::amx_emulator_faults(nullptr);
    check_against_reference(cb::igemm::gemm_rows_amx_emulated, "emulated AMX");
    const char* first = nullptr;
    const int64_t faults = cb::igemm::amx_emulator_faults(&first);
    EXPECT_EQ(faults, 0) << "the kernel ran tile instructions the hardware faults on; first: "
                         << (first ? first : "");
}

TEST(IgemmAmx, HardwareTilesMatchReferenceBitForBit) {
    if (!amx_present()) {
        GTEST_SKIP() << "no AMX on this CPU: active ISA " << cb::cpu_isa_name(cb::cpu_isa_active())
                     << ", detected " << cb::cpu_isa_name(cb::cpu_isa_detected())
                     << (cb::igemm::amx_built() ? "" : ", and this build has no AMX kernel")
                     << " (needs AMX-TILE + AMX-INT8, OS tile state and the arch_prctl grant)";
    }
    check_against_reference(cb::igemm::gemm_rows_amx, "hardware AMX");
}

TEST(IgemmAmx, UsedOnlyWhereDetectedAndForcedOffByAvx512) {
    isa_scope scope;
    const cb::cpu_isa hw = cb::cpu_isa_detected();
    cb::cpu_isa_set_override(cb::cpu_isa::avx512);
    EXPECT_EQ(cb::igemm::prefill_kernel_active(), cb::igemm::prefill_kernel::vnni);
    cb::cpu_isa_set_override(cb::cpu_isa::amx);
    EXPECT_EQ(cb::cpu_isa_active() == cb::cpu_isa::amx, hw == cb::cpu_isa::amx);
    EXPECT_EQ(amx_present(), hw == cb::cpu_isa::amx && cb::igemm::amx_built());
    if (hw != cb::cpu_isa::amx) {
        EXPECT_NE(cb::cpu_isa_active(), cb::cpu_isa::amx) << "a machine without AMX never reports it";
    }
    EXPECT_STREQ(cb::cpu_isa_name(cb::cpu_isa::amx), "amx");
}

// matmul's prefill (more than 8 activation rows) at the highest level this machine has: the
// tiles where AMX is present, otherwise VNNI; the reference's bits either way, at every thread
// count (each pool thread configures and releases its own tiles).
TEST(IgemmAmx, MatmulPrefillKeepsTheReferenceBits) {
    if (!cb::igemm::active(dtype::q4_k)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
    isa_scope scope;
    cb::cpu_isa_set_override(cb::cpu_isa_detected());
    for (dtype t : {dtype::q4_0, dtype::q6_k}) {
        SCOPED_TRACE(cb::dtype_name(t));
        const int64_t k = 512, n = 100, m = 40;
        const std::vector<unsigned char> w = random_weights(t, n, k, 31);
        const std::vector<float> x = random_acts(m * k, 32);
        cb::weight_view wv;
        wv.type = t;
        wv.data = w.data();
        wv.rows = n;
        wv.cols = k;
        wv.row_bytes = cb::dtype_row_bytes(t, k);
        cb::igemm::act_buffer buf;
        buf.reserve(t, k, m);
        buf.quantize_rows(x.data(), k, 0, m);
        for (int nth : {1, 3}) {
            cb::thread_pool pool(nth);
            std::vector<float> y(static_cast<size_t>(m * n));
            cb::matmul(pool, wv, x.data(), m, k, y.data(), n, nullptr);
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t r = 0; r < n; ++r) {
                    const float e = cb::igemm::reference_dot(t, k, w.data() + r * wv.row_bytes, buf.view(), i);
                    ASSERT_EQ(0, std::memcmp(&e, &y[i * n + r], 4)) << "threads " << nth << " row " << i << " col " << r;
                }
            }
        }
    }
}

// Runs in a child process started by EnvAvx512TurnsAmxOff (the environment is read once).
TEST(IgemmAmx, EnvProbe) {
    const char* want = std::getenv("CBL_TEST_EXPECT_PREFILL");
    if (!want) GTEST_SKIP() << "only run as a child of EnvAvx512TurnsAmxOff";
    EXPECT_EQ(std::string(want), amx_present() ? "amx" : "vnni") << "active " << cb::cpu_isa_name(cb::cpu_isa_active());
    EXPECT_NE(cb::cpu_isa_active(), cb::cpu_isa::amx);
}

TEST(IgemmAmx, EnvAvx512TurnsAmxOff) {
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ASSERT_GT(len, 0);
    exe[len] = 0;
    const std::string cmd = std::string("CBL_CPU_ISA=avx512 CBL_TEST_EXPECT_PREFILL=vnni '") + exe +
                            "' --gtest_filter=IgemmAmx.EnvProbe > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
