// Integer GEMM for the block-quantized weight types real GGUF files are made of (q4_0, q5_0,
// q4_K, q5_K, q6_K): int8 activations, exact int32 sums per weight group, one fixed sequence of
// float operations per output. Internal to the CPU ops.
//
// The canonical result of one output (weight row w, activation row a), whatever kernel computes
// it (the prefill GEMM on packed panels, the decode GEMV on raw blocks, the scalar reference):
//   for each group g of G elements (G = 32 for q4_0/q5_0, 256 for the K-quants), in order:
//     isum = sum_j sc_j * sum_{k in sub-block j} wq_k * aq_k      (exact, int32)
//     msum = sum_j mn_j * asum_j                                  (q4_K/q5_K only; exact, int32)
//     acc  = fma(d_w * d_a, float(isum), acc)
//     acc  = fma(-(dmin_w * d_a), float(msum), acc)               (q4_K/q5_K only)
// where wq are the weight's integer values with its zero point removed (q4_0: q - 8, q5_0: q - 16,
// q6_K: q - 32; q4_K/q5_K keep q unsigned and subtract dmin * mn instead), sc/mn the sub-block
// scales and mins (1 and none for q4_0/q5_0), aq the activation's int8 values with one scale d_a
// per group (ggml's q8_0 for the 32-element types, q8_K for the K-quants: the same integers as
// llama.cpp's activations) and asum their sums per 32. Integer sums are exact however a kernel
// splits them, so every kernel that keeps this float sequence gives the same bits: outputs do not
// depend on the batch size, the row's position or the thread split (blending relies on it: a token
// recomputed alone has the bits it has in a full prefill).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/memory.h"

namespace cacheblend {
namespace igemm {

struct type_info {
    int group;        // elements per scale group (32 or 256)
    int sub;          // elements per sub-block scale (group for q4_0/q5_0)
    bool mins;        // q4_K / q5_K: per-sub-block mins (activation sums needed)
    bool act_signed;  // activations stored as s8 (weights unsigned), else as u8 = s8 + 128
};

// The types this scheme covers, and their parameters (nullptr for other types).
const type_info* info(dtype w);

// Whether matmul should use it for w on this machine now (AVX-512 VNNI active).
bool active(dtype w);

// Quantized activation rows for one weight type. Row i: q + i * ldq (k bytes, natural element
// order), d + i * ng (one scale per group), asum + i * (k / 32) (sums of the signed values per 32
// elements; filled for mins types only).
struct acts {
    int64_t k = 0, m = 0, ng = 0, ldq = 0;
    const uint8_t* q = nullptr;
    const float* d = nullptr;
    const int16_t* asum = nullptr;
};

// Owns the storage of quantized activations.
class act_buffer {
public:
    // Quantizes rows [i0, i1) of x (row stride ldx) for weight type w into a buffer sized for m
    // rows by reserve(); threads may fill disjoint row ranges concurrently.
    void reserve(dtype w, int64_t k, int64_t m);
    void quantize_rows(const float* x, int64_t ldx, int64_t i0, int64_t i1);
    acts view() const;

private:
    dtype w_ = dtype::f32;
    acts a_;
    aligned_array<uint8_t> q_;
    aligned_array<float> d_;
    aligned_array<int16_t> asum_;
};

// The canonical output of weight row `wrow` (raw GGUF blocks of type w, k elements) with
// activation row i: a plain scalar evaluation of the definition above (tests, other ISAs).
float reference_dot(dtype w, int64_t k, const void* wrow, const acts& a, int64_t i);

// out[i * ldo + r] for r < nrows, i < m (rows i of a): weight rows w + r * w_stride.
// The AVX-512 VNNI kernels; only call when active(w).
void gemm_rows(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
               const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo);
// The same outputs for few activation rows, reading the raw blocks (no packing).
void gemv_rows(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
               const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo);

// Columns per packed panel of gemm_rows (callers split work in multiples of it).
constexpr int64_t panel_cols = 32;

// The prefill GEMM on AMX-INT8 tiles (igemm-amx-impl.h): the same panels, integer sub-block sums
// by tile dot products (exact int32), the scales and float steps as gemm_rows runs them, so the
// same bits as gemm_rows for every output. Only call when prefill_kernel_active() is amx.
void gemm_rows_amx(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
                   const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo);
// Whether this build has the AMX kernel (the compiler accepted -mamx-tile -mamx-int8).
bool amx_built();

enum class prefill_kernel { vnni, amx };
// Which kernel matmul runs for many activation rows now: amx when the active level is
// cpu_isa::amx (hardware, OS and process grant; CBL_CPU_ISA=avx512 turns it off) and amx_built().
prefill_kernel prefill_kernel_active();

// For tests on machines without AMX: the same kernel with its tile instructions run by a scalar
// emulator of their documented semantics (Intel SDM: LDTILECFG palette 1, TILELOADD, TILESTORED,
// TILEZERO, TDPBSUD/TDPBUSD). Needs AVX-512 (cpu_isa_detected() >= avx512) for the rest.
void gemm_rows_amx_emulated(dtype w, int64_t k, const void* wbase, size_t w_stride, int64_t nrows,
                            const acts& a, int64_t i0, int64_t m, float* out, int64_t ldo);
// Instructions the emulator found invalid on this thread (what the hardware would fault on:
// unconfigured tiles, shapes that do not fit) since the last call, and the first one's
// description (nullptr when none); resets the count.
int64_t amx_emulator_faults(const char** first);

}  // namespace igemm
}  // namespace cacheblend
