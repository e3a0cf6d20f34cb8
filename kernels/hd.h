// CBL_HD marks code shared by the CPU and the CUDA backend (kernels/fp16.h) and the CUDA device
// math: `__host__ __device__` under nvcc, plain inline functions under a host compiler. This
// header and kernels/cuda/math/ include no CUDA header, so g++ compiles them into
// tests/backend/test_cuda_device_math.cpp and checks them against the CPU kernels on machines
// without a GPU.
//
// The wrappers below pin the rounding of each step. nvcc contracts a*b+c into an FMA by default;
// the CPU reference (C++17, -ffp-contract=off) does not, so code that must match the CPU bit for
// bit spells its multiplies and adds with mul_rn / add_rn, which nvcc never fuses.
//
// Free functions here and in kernels/fp16.h are `static inline`: the CPU's per-ISA translation
// units (compiled with -mavx2 / -mavx512f) include them, and an inline function with external
// linkage could have its AVX-512 copy picked by the linker for baseline code.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CBL_HD __host__ __device__
#else
#define CBL_HD
#endif

namespace cacheblend {
namespace hd {

CBL_HD static inline float bits_to_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

CBL_HD static inline uint32_t f32_to_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

CBL_HD static inline float neg_inf() { return bits_to_f32(0xff800000u); }

// Single IEEE operations, never fused with a neighbour.
CBL_HD static inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

CBL_HD static inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

CBL_HD static inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

// Transcendentals: the C library on the host, CUDA's accurate (non -use_fast_math) versions on the
// device, which are within 2 ulp of it. Tests that run on a GPU use a tolerance for these.
CBL_HD static inline float exp_f(float x) {
#if defined(__CUDA_ARCH__)
    return expf(x);
#else
    return std::exp(x);
#endif
}

CBL_HD static inline float exp2_f(float x) {
#if defined(__CUDA_ARCH__)
    return exp2f(x);
#else
    return std::exp2(x);
#endif
}

CBL_HD static inline float cos_f(float x) {
#if defined(__CUDA_ARCH__)
    return cosf(x);
#else
    return std::cos(x);
#endif
}

CBL_HD static inline float sin_f(float x) {
#if defined(__CUDA_ARCH__)
    return sinf(x);
#else
    return std::sin(x);
#endif
}

// IEEE square root (nvcc's default -prec-sqrt=true makes sqrtf correctly rounded).
CBL_HD static inline float sqrt_f(float x) {
#if defined(__CUDA_ARCH__)
    return sqrtf(x);
#else
    return std::sqrt(x);
#endif
}

CBL_HD static inline float max_f(float a, float b) { return a > b ? a : b; }

// Little-endian loads at any byte alignment: GGUF blocks are only 2-byte aligned.
CBL_HD static inline uint16_t load_u16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

CBL_HD static inline uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace hd
}  // namespace cacheblend
