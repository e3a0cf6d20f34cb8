// The AMX prefill kernel (igemm-amx-impl.h) with its tile instructions run by a scalar emulator:
// how the kernel's logic is tested on machines without AMX (tests/unit/test_igemm_amx.cpp). The
// rest of the kernel (packing, the scale fold, the float steps) is the AVX-512 code the hardware
// path runs, compiled for AVX-512 here.
//
// The emulator follows the Intel SDM's description of palette 1 (8 tiles of at most 16 rows x 64
// bytes): LDTILECFG validates and installs a configuration and zeroes every tile; TILELOADD loads
// rows x colsb bytes at base + row * stride and zeroes the rest of the tile; TILESTORED stores
// rows x colsb bytes; TILEZERO zeroes; TDPB[SU][SU]D adds, for each C row m and dword column n,
// sum over k < colsb(A) / 4 of A[m][4k + i] * B[k][4n + i], i = 0..3, with each operand's bytes
// signed or unsigned as the instruction's letters say. What the hardware faults on (#UD / #GP:
// unconfigured tiles, shapes that do not chain, operands not distinct) is counted, not executed,
// so a test can demand the kernel never does it.

// GCC 12's AVX-512 headers trip these on their own undefined-value idiom (as in igemm-avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstring>

#include "kernels/cpu/arch/x86/igemm-amx-impl.h"

namespace cacheblend {
namespace igemm {
namespace {

struct emu_state {
    tile_config cfg;
    bool configured = false;
    alignas(64) uint8_t t[8][k_amx_rows][k_amx_colsb];
    int64_t faults = 0;
    const char* first = nullptr;
};

thread_local emu_state g_emu;

void fault(const char* what) {
    if (g_emu.faults++ == 0) g_emu.first = what;
}

bool tile_ok(int t, const char* what) {
    if (!g_emu.configured || g_emu.cfg.rows[t] == 0 || g_emu.cfg.colsb[t] == 0) {
        fault(what);
        return false;
    }
    return true;
}

template <bool ASigned, bool BSigned>
void dot(int c, int a, int b) {
    if (!tile_ok(c, "TDPB*D: C tile not configured") || !tile_ok(a, "TDPB*D: A tile not configured") ||
        !tile_ok(b, "TDPB*D: B tile not configured")) {
        return;
    }
    const tile_config& k = g_emu.cfg;
    if (c == a || c == b || a == b) return fault("TDPB*D: operands not distinct");
    if (k.colsb[c] % 4 != 0) return fault("TDPB*D: colsb(C) not a multiple of 4");
    if (k.rows[a] != k.rows[c]) return fault("TDPB*D: rows(A) != rows(C)");
    if (k.colsb[a] != 4 * k.rows[b]) return fault("TDPB*D: colsb(A) != 4 * rows(B)");
    if (k.colsb[b] != k.colsb[c]) return fault("TDPB*D: colsb(B) != colsb(C)");
    const int kd = k.colsb[a] / 4, nd = k.colsb[c] / 4;
    uint8_t(*C)[k_amx_colsb] = g_emu.t[c];
    for (int m = 0; m < k.rows[c]; ++m) {
        for (int n = 0; n < nd; ++n) {
            int32_t v;
            std::memcpy(&v, &C[m][4 * n], 4);
            int64_t s = v;
            for (int kk = 0; kk < kd; ++kk) {
                for (int i = 0; i < 4; ++i) {
                    const uint8_t x = g_emu.t[a][m][4 * kk + i], y = g_emu.t[b][kk][4 * n + i];
                    const int xv = ASigned ? static_cast<int8_t>(x) : x;
                    const int yv = BSigned ? static_cast<int8_t>(y) : y;
                    s += xv * yv;
                }
            }
            // dword arithmetic wraps (the kernel's sums never do)
            const uint32_t r = static_cast<uint32_t>(s);
            std::memcpy(&C[m][4 * n], &r, 4);
        }
        std::memset(&C[m][4 * nd], 0, k_amx_colsb - 4 * nd);
    }
    for (int m = k.rows[c]; m < k_amx_rows; ++m) std::memset(C[m], 0, k_amx_colsb);
}

struct emu_tile_ops {
    static void config(const tile_config& c) {
        std::memset(g_emu.t, 0, sizeof(g_emu.t));
        g_emu.configured = false;
        if (c.palette != 1) return fault("LDTILECFG: palette is not 1");
        if (c.start_row != 0) return fault("LDTILECFG: start_row is not 0");
        for (uint8_t r : c.reserved) {
            if (r != 0) return fault("LDTILECFG: reserved byte not 0");
        }
        for (int t = 0; t < 16; ++t) {
            const bool exists = t < 8;
            if (!exists && (c.rows[t] != 0 || c.colsb[t] != 0)) return fault("LDTILECFG: tile 8..15 configured");
            if (c.rows[t] > k_amx_rows || c.colsb[t] > k_amx_colsb) return fault("LDTILECFG: tile too large");
            if ((c.rows[t] == 0) != (c.colsb[t] == 0)) return fault("LDTILECFG: tile with rows xor colsb 0");
        }
        g_emu.cfg = c;
        g_emu.configured = true;
    }
    static void release() {
        g_emu.configured = false;
        std::memset(g_emu.t, 0, sizeof(g_emu.t));
    }
    static void fence() {}
    template <int t>
    static void load(const void* p, size_t stride) {
        if (!tile_ok(t, "TILELOADD: tile not configured")) return;
        const auto* src = static_cast<const uint8_t*>(p);
        const int rows = g_emu.cfg.rows[t], colsb = g_emu.cfg.colsb[t];
        std::memset(g_emu.t[t], 0, sizeof(g_emu.t[t]));
        for (int r = 0; r < rows; ++r) std::memcpy(g_emu.t[t][r], src + r * stride, static_cast<size_t>(colsb));
    }
    template <int t>
    static void store(void* p, size_t stride) {
        if (!tile_ok(t, "TILESTORED: tile not configured")) return;
        auto* dst = static_cast<uint8_t*>(p);
        const int rows = g_emu.cfg.rows[t], colsb = g_emu.cfg.colsb[t];
        for (int r = 0; r < rows; ++r) std::memcpy(dst + r * stride, g_emu.t[t][r], static_cast<size_t>(colsb));
    }
    template <int t>
    static void zero() {
        if (!tile_ok(t, "TILEZERO: tile not configured")) return;
        std::memset(g_emu.t[t], 0, sizeof(g_emu.t[t]));
    }
    template <int C, int A, int B>
    static void dpbsud() {
        dot<true, false>(C, A, B);
    }
    template <int C, int A, int B>
    static void dpbusd() {
        dot<false, true>(C, A, B);
    }
};

}  // namespace

void gemm_rows_amx_emulated(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
                            const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo) {
    amx_gemm_rows<emu_tile_ops>(w, k, wbase, w_stride, nrows, a, i0, m, out, ldo);
}

int64_t amx_emulator_faults(const char** first) {
    const int64_t n = g_emu.faults;
    if (first) *first = g_emu.first;
    g_emu.faults = 0;
    g_emu.first = nullptr;
    return n;
}

}  // namespace igemm
}  // namespace cacheblend
