#include "kernels/cpu/cpu-features.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define CBL_X86 1
#else
#define CBL_X86 0
#endif

namespace cacheblend {
namespace {

#if CBL_X86
// XGETBV without -mxsave (the baseline TU is compiled for plain x86-64).
uint64_t xgetbv0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

// AMX tile data is off by default for Linux processes (its 8 KiB of state would grow every
// signal frame): the process asks once, and a kernel without AMX support (before 5.16) or a
// seccomp filter refuses. Other systems: not supported here.
bool amx_permitted() {
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long k_arch_req_xcomp_perm = 0x1023;
    constexpr long k_xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, k_arch_req_xcomp_perm, k_xfeature_xtiledata) == 0;
#else
    return false;
#endif
}

cpu_isa detect_hw(bool* bf16) {
    *bf16 = false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d) || a < 7) return cpu_isa::generic;
    const unsigned max_leaf = a;
    __get_cpuid(1, &a, &b, &c, &d);
    const bool fma = c & (1u << 12);
    const bool osxsave = c & (1u << 27);
    const bool avx = c & (1u << 28);
    const bool f16c = c & (1u << 29);
    if (!osxsave || !avx || max_leaf < 7) return cpu_isa::generic;
    // The OS must save XMM|YMM (bits 1,2) for AVX2, plus opmask|ZMM_Hi256|Hi16_ZMM (5,6,7).
    const uint64_t xcr0 = xgetbv0();
    const bool os_ymm = (xcr0 & 0x6) == 0x6;
    const bool os_zmm = (xcr0 & 0xe6) == 0xe6;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = b & (1u << 5);
    const bool bmi2 = b & (1u << 8);
    const bool avx512f = b & (1u << 16);
    const bool avx512dq = b & (1u << 17);
    const bool avx512bw = b & (1u << 30);
    const bool avx512vl = b & (1u << 31);
    const bool avx512vnni = c & (1u << 11);
    const bool amx_tile = d & (1u << 24);
    const bool amx_int8 = d & (1u << 25);
    // XTILECFG | XTILEDATA (bits 17, 18): the OS saves the tile state.
    const bool os_tiles = (xcr0 & 0x60000) == 0x60000;
    // BF16 is not part of the level (Cascade Lake / Ice Lake lack it): kernels that use it
    // check cpu_has_avx512bf16().
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    *bf16 = os_zmm && avx512f && (a1 & (1u << 5));

    if (!(os_ymm && avx2 && fma && f16c && bmi2)) return cpu_isa::generic;
    if (os_zmm && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni) {
        if (amx_tile && amx_int8 && os_tiles && amx_permitted()) return cpu_isa::amx;
        return cpu_isa::avx512;
    }
    return cpu_isa::avx2;
}
#else
cpu_isa detect_hw(bool* bf16) {
    *bf16 = false;
    return cpu_isa::generic;
}
#endif

cpu_isa min_isa(cpu_isa x, cpu_isa y) { return static_cast<int>(x) < static_cast<int>(y) ? x : y; }

// -1: not computed yet. Racing initialisers compute the same values, so relaxed stores are fine.
std::atomic<int> g_detected{-1};
std::atomic<int> g_bf16{-1};
std::atomic<int> g_env{-1};  // CBL_CPU_ISA, clamped to the hardware; -1 until read
std::atomic<int> g_active{-1};

cpu_isa env_or_detected(cpu_isa hw) {
    const char* s = std::getenv("CBL_CPU_ISA");
    if (!s) return hw;
    if (std::strcmp(s, "generic") == 0) return cpu_isa::generic;
    if (std::strcmp(s, "avx2") == 0) return min_isa(cpu_isa::avx2, hw);
    if (std::strcmp(s, "avx512") == 0) return min_isa(cpu_isa::avx512, hw);
    if (std::strcmp(s, "amx") == 0) return min_isa(cpu_isa::amx, hw);
    return hw;  // invalid values are ignored
}

}  // namespace

cpu_isa cpu_isa_detected() {
    int v = g_detected.load(std::memory_order_acquire);
    if (v < 0) {
        bool bf16 = false;
        v = static_cast<int>(detect_hw(&bf16));
        g_bf16.store(bf16 ? 1 : 0, std::memory_order_release);
        g_detected.store(v, std::memory_order_release);
    }
    return static_cast<cpu_isa>(v);
}

bool cpu_has_avx512bf16() {
    if (g_detected.load(std::memory_order_acquire) < 0) cpu_isa_detected();
    return g_bf16.load(std::memory_order_acquire) == 1;
}

cpu_isa cpu_isa_active() {
    int v = g_active.load(std::memory_order_acquire);
    if (v >= 0) return static_cast<cpu_isa>(v);
    int e = g_env.load(std::memory_order_acquire);
    if (e < 0) {
        e = static_cast<int>(env_or_detected(cpu_isa_detected()));
        g_env.store(e, std::memory_order_release);
    }
    // Only install the env level if no override raced in first.
    int expected = -1;
    g_active.compare_exchange_strong(expected, e, std::memory_order_acq_rel);
    return static_cast<cpu_isa>(g_active.load(std::memory_order_acquire));
}

cpu_isa cpu_isa_set_override(cpu_isa isa) {
    const cpu_isa v = min_isa(isa, cpu_isa_detected());
    g_active.store(static_cast<int>(v), std::memory_order_release);
    return v;
}

const char* cpu_isa_name(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::generic: return "generic";
        case cpu_isa::avx2: return "avx2";
        case cpu_isa::avx512: return "avx512";
        case cpu_isa::amx: return "amx";
    }
    return "unknown";
}

}  // namespace cacheblend
