// Run-time ISA selection. Each kernel has a generic path plus optional AVX2 and AVX-512 paths
// compiled in their own translation units (kernels/cpu/arch/x86/*-avx2.cpp, *-avx512.cpp).
// The environment variable CBL_CPU_ISA=generic|avx2|avx512 forces a lower level, so the test
// suite can run every path on one machine; it can never raise the level above the hardware's.
#pragma once

namespace cacheblend {

enum class cpu_isa : int {
    generic = 0,
    avx2 = 1,    // AVX2 + FMA + F16C
    avx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present)
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
