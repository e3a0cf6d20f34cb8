// The AMX-INT8 prefill kernel of the integer GEMM on the hardware: igemm-amx-impl.h with the
// tile intrinsics. Compiled with -mamx-tile -mamx-int8 (CMakeLists.txt; never guarded by the
// compilers' __AMX_*__ macros, whose spelling differs between GCC and clang) and called only when
// cpu_isa_active() is amx (CPUID, XCR0 and the process's arch_prctl grant).
//
// Two GCC 12 traps, handled here rather than trusted to the headers:
// - its _tile_loadconfig passes the config as an 8-byte memory operand, so the compiler may drop
//   the stores that fill the other 56 bytes; config() hands LDTILECFG the whole 64-byte object.
// - its _tile_loadd has no memory operand at all, so stores to the buffers a tile load reads could
//   be moved past it; fence() is a compiler barrier the kernel calls before its tile loads.

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "kernels/cpu/arch/x86/igemm-amx-impl.h"

namespace cacheblend {
namespace igemm {
namespace {

// Tile numbers must be literals in the intrinsics (GCC pastes them into the instruction text):
// one branch per tile the kernel uses.
#define CBL_AMX_EACH_TILE(op, ...)            \
    if constexpr (t == 0) op(0, __VA_ARGS__); \
    if constexpr (t == 1) op(1, __VA_ARGS__); \
    if constexpr (t == 2) op(2, __VA_ARGS__); \
    if constexpr (t == 3) op(3, __VA_ARGS__); \
    if constexpr (t == 4) op(4, __VA_ARGS__); \
    if constexpr (t == 5) op(5, __VA_ARGS__); \
    if constexpr (t == 6) op(6, __VA_ARGS__); \
    if constexpr (t == 7) op(7, __VA_ARGS__)

// C += A x B for C in 0..3, A in 4, 5 and B in 6, 7 (the kernels' assignment), expanded to the
// one literal triple this instantiation names.
#define CBL_AMX_DOT_B(op, c, a)              \
    if constexpr (B == 6) op(c, a, 6);       \
    if constexpr (B == 7) op(c, a, 7)
#define CBL_AMX_DOT_A(op, c)                 \
    if constexpr (A == 4) { CBL_AMX_DOT_B(op, c, 4); } \
    if constexpr (A == 5) { CBL_AMX_DOT_B(op, c, 5); }
#define CBL_AMX_EACH_DOT(op)                                                                      \
    static_assert(C >= 0 && C <= 3 && (A == 4 || A == 5) && (B == 6 || B == 7) && C != A,         \
                  "tile triple outside the kernels' assignment");                                 \
    if constexpr (C == 0) { CBL_AMX_DOT_A(op, 0) }                                                \
    if constexpr (C == 1) { CBL_AMX_DOT_A(op, 1) }                                                \
    if constexpr (C == 2) { CBL_AMX_DOT_A(op, 2) }                                                \
    if constexpr (C == 3) { CBL_AMX_DOT_A(op, 3) }

#define CBL_TILE_ZERO(t, unused) _tile_zero(t)

struct hw_tile_ops {
    static void config(const tile_config& c) {
        // The operand is the whole 64-byte struct: every byte of it is live here.
        __asm__ volatile("ldtilecfg %0" : : "m"(c));
    }
    static void release() { _tile_release(); }
    static void fence() { __asm__ volatile("" : : : "memory"); }
    template <int t>
    static void load(const void* p, size_t stride) {
        CBL_AMX_EACH_TILE(_tile_loadd, p, static_cast<long>(stride));
    }
    template <int t>
    static void store(void* p, size_t stride) {
        CBL_AMX_EACH_TILE(_tile_stored, p, static_cast<long>(stride));
    }
    template <int t>
    static void zero() {
        CBL_AMX_EACH_TILE(CBL_TILE_ZERO, 0);
    }
    template <int C, int A, int B>
    static void dpbsud() {
        CBL_AMX_EACH_DOT(_tile_dpbsud);
    }
    template <int C, int A, int B>
    static void dpbusd() {
        CBL_AMX_EACH_DOT(_tile_dpbusd);
    }
};

}  // namespace

bool amx_built() { return true; }

void gemm_rows_amx(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows, const acts& a,
                   int64_t i0, int64_t m, float* out, int64_t ldo) {
    amx_gemm_rows<hw_tile_ops>(w, k, wbase, w_stride, nrows, a, i0, m, out, ldo);
}

}  // namespace igemm
}  // namespace cacheblend
