// Internal to the CPU ops: the per-ISA inner kernels behind matmul and attention. Drivers
// (matmul.cpp, attention.cpp, ops.cpp) are compiled for the portable baseline and call these
// through function tables, one table per ISA translation unit (kernels/cpu/arch/x86/*.cpp).
// Every table entry is safe to call only when cpu_isa_active() is at least its level.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu-features.h"

namespace cacheblend {
namespace ukr {

// Register-blocked f32 GEMM: C[mr x nr] = A[mr x kc] * B[kc x nr], mr <= gemm_kernels::mr.
struct gemm_kernels {
    int mr;  // rows of the register tile
    int nr;  // columns of the register tile = width of a packed B panel
    // a: row-major, lda floats; b: packed panel [kc][nr], 64-byte aligned; c: ldc floats.
    // accumulate: C += A*B; otherwise C = init + A*B, init is a row of nr (a bias) or nullptr.
    // Only columns < n_valid of C are read or written.
    void (*tile)(int mr, int64_t kc, const float* a, int64_t lda, const float* b, float* c,
                 int64_t ldc, int n_valid, const float* init, bool accumulate);
    // Packs n_valid (<= nr) rows of kc floats (row stride ld) into dst[kc][nr] (transposed),
    // zero-filling rows n_valid..nr-1.
    void (*pack_b)(const float* src, int64_t ld, int n_valid, int64_t kc, float* dst);
};

// Attention helpers around the GEMM tiles. Keys go in tiles of k_key_tile; a tile of K is stored
// as k_key_tile / nr panels kt[p][d][nr] (the B operand of the score GEMM), a tile of V as
// ceil(head_dim / nr) panels vt[p][j][nr] (the B operand of the output GEMM).
constexpr int k_key_tile = 64;

struct attn_kernels {
    // K panels from f16 rows k[j][d] (row stride ld elements) for j < n_valid; zero elsewhere.
    void (*load_k)(const uint16_t* k, int64_t ld, int n_valid, int head_dim, float* kt);
    // V panels from f16 rows v[j][d] for j < n_valid; zero for other keys and dims >= head_dim.
    void (*load_v)(const uint16_t* v, int64_t ld, int n_valid, int head_dim, float* vt);
    // Online softmax over a score tile s[rows][k_key_tile] (row stride ld), scores in log2 units.
    // Row r sees keys c < limit[r] (the others become 0). Updates the running max m[r] and sum
    // l[r] and writes alpha[r] = 2^(m_old - m_new), the factor the row's output must be scaled by.
    void (*softmax)(float* s, int64_t ld, int rows, const int* limit, float* m, float* l,
                    float* alpha);
    // o[r][0..n) *= alpha[r]
    void (*scale_rows)(float* o, int64_t ld, int rows, int n, const float* alpha);
    // Optional (nullptr: the driver composes the pieces above). One row tile (rows <= the GEMM's
    // mr) against one key tile, fused: S = Q K^T (q pre-scaled, row stride ldq), the online
    // softmax update of m, l, then O = alpha * O + P V (o: head_dim floats per row, stride ldo).
    // p is scratch for rows x k_key_tile floats.
    void (*row_tile)(int rows, int head_dim, const float* q, int64_t ldq, const float* kt,
                     const float* vt, int n_valid, const int* limit, float* m, float* l,
                     float* o, int64_t ldo, float* p);
};

// Flash attention with ggml's CPU numerics, bit for bit (AVX-512 only; attention-ggml-avx512.cpp).
// q rows are f32, k/v rows f16 with row stride ld elements, one head each.
struct fa_exact_kernels {
    // ggml's flash_attn_ext_f16_one_chunk (batches of < 64 query rows): one row, keys [0, n).
    void (*one_chunk)(const float* q, const uint16_t* k, const uint16_t* v, int64_t ld, int64_t n,
                      int head_dim, float scale, float* out);
    // ggml's flash_attn_ext_tiled (batches of >= 64 rows): row r (stride ldq / ldo) sees keys
    // [0, limit[r]); rows <= 64, head_dim a multiple of 16, <= 256; scratch: 192 * head_dim
    // floats, 64-byte aligned.
    void (*tiled)(int rows, const float* q, int64_t ldq, const uint16_t* k, const uint16_t* v,
                  int64_t ld, const int64_t* limit, int head_dim, float scale, float* out,
                  int64_t ldo, float* scratch);
};
#if defined(__x86_64__)
const fa_exact_kernels& fa_exact_avx512();
#endif

// Elementwise helpers for ops.cpp.
struct elem_kernels {
    // sum of x[i]*x[i]: products in float, accumulated in double (as ggml's rms_norm)
    double (*sum_sq)(const float* x, int64_t n);
    // y = (x * s) * g, in float; y may alias x
    void (*scale_mul)(const float* x, float s, const float* g, float* y, int64_t n);
    // out = silu(gate) * up with silu(x) = x / (1 + e^-x); out may alias gate
    void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
    // y += x
    void (*add)(float* y, const float* x, int64_t n);
};

const gemm_kernels& gemm_generic();
const attn_kernels& attn_generic();
const elem_kernels& elem_generic();
#if defined(__x86_64__)
const gemm_kernels& gemm_avx2();
const gemm_kernels& gemm_avx512();
const attn_kernels& attn_avx2();
const attn_kernels& attn_avx512();
const elem_kernels& elem_avx2();
const elem_kernels& elem_avx512();
#endif

inline const gemm_kernels& gemm_for(cpu_isa isa) {
#if defined(__x86_64__)
    if (isa >= cpu_isa::avx512) return gemm_avx512();
    if (isa == cpu_isa::avx2) return gemm_avx2();
#endif
    (void)isa;
    return gemm_generic();
}

inline const attn_kernels& attn_for(cpu_isa isa) {
#if defined(__x86_64__)
    if (isa >= cpu_isa::avx512) return attn_avx512();
    if (isa == cpu_isa::avx2) return attn_avx2();
#endif
    (void)isa;
    return attn_generic();
}

inline const elem_kernels& elem_for(cpu_isa isa) {
#if defined(__x86_64__)
    if (isa >= cpu_isa::avx512) return elem_avx512();
    if (isa == cpu_isa::avx2) return elem_avx2();
#endif
    (void)isa;
    return elem_generic();
}

}  // namespace ukr
}  // namespace cacheblend
