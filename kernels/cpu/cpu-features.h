// Run-time ISA selection. Each kernel has a generic path plus optional AVX2 and AVX-512 paths
// compiled in their own translation units (kernels/cpu/arch/x86/*-avx2.cpp, *-avx512.cpp).
// The environment variable CBL_CPU_ISA=generic|avx2|avx512|amx forces a lower level, so the test
// suite can run every path on one machine; it can never raise the level above the hardware's.
// Levels are ordered: a kernel written for level L runs at every level >= L (compare with >=).
#pragma once

namespace cacheblend {

enum class cpu_isa : int {
    generic = 0,
    avx2 = 1,    // AVX2 + FMA + F16C
    avx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present)
    // avx512 + AMX-TILE + AMX-INT8, tile state enabled by the OS (XCR0 bits 17, 18) and granted
    // to this process (Linux arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)). Only the
    // prefill integer GEMM uses the tiles (igemm.h); everything else runs its avx512 kernels.
    amx = 3,
};

cpu_isa cpu_isa_detected();  // what the hardware and OS support
cpu_isa cpu_isa_active();    // min(detected, CBL_CPU_ISA env); a test override replaces the env
// Sets the active level (clamped to the detected one); returns the level now active. For tests.
cpu_isa cpu_isa_set_override(cpu_isa isa);
const char* cpu_isa_name(cpu_isa isa);
// AVX-512 BF16 (vdpbf16ps, vcvtneps2bf16) in hardware and OS; not implied by cpu_isa::avx512.
// Independent of the active level: callers check both.
bool cpu_has_avx512bf16();

}  // namespace cacheblend
