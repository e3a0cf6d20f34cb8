// AVX2/FMA GEMM micro-kernel: a 6 x 16 register tile (12 ymm accumulators), A broadcast from
// row-major activations, B from a packed [k][16] panel.
#include <immintrin.h>

#include "kernels/cpu/arch/x86/simd-avx2.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

using avx2_simd::tail_mask;

constexpr int k_mr = 6;
constexpr int k_nr = 16;

// Accumulators are named variables, not an array: with an array GCC 12 keeps a stack copy of
// every accumulator and stores it on each k (16 ymm registers leave it no slack).
template <int MR>
void tile_mr(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
             int n_valid, const float* init, bool accumulate) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    {
        const __m256i m0 = tail_mask(n_valid), m1 = tail_mask(n_valid - 8);
        __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
        if (!accumulate && init) {
            v0 = _mm256_maskload_ps(init, m0);
            v1 = _mm256_maskload_ps(init + 8, m1);
        }
        auto ld0 = [&](int i) { return accumulate ? _mm256_maskload_ps(c + i * ldc, m0) : v0; };
        auto ld1 = [&](int i) { return accumulate ? _mm256_maskload_ps(c + i * ldc + 8, m1) : v1; };
        c00 = ld0(0); c01 = ld1(0);
        c10 = MR > 1 ? ld0(1) : v0; c11 = MR > 1 ? ld1(1) : v1;
        c20 = MR > 2 ? ld0(2) : v0; c21 = MR > 2 ? ld1(2) : v1;
        c30 = MR > 3 ? ld0(3) : v0; c31 = MR > 3 ? ld1(3) : v1;
        c40 = MR > 4 ? ld0(4) : v0; c41 = MR > 4 ? ld1(4) : v1;
        c50 = MR > 5 ? ld0(5) : v0; c51 = MR > 5 ? ld1(5) : v1;
    }
    const float* a0 = a;
    const float* a1 = a + lda;
    const float* a2 = a + 2 * lda;
    const float* a3 = a + 3 * lda;
    const float* a4 = a + 4 * lda;
    const float* a5 = a + 5 * lda;
    for (int64_t k = 0; k < kc; ++k) {
        const __m256 b0 = _mm256_load_ps(b + k * k_nr);
        const __m256 b1 = _mm256_load_ps(b + k * k_nr + 8);
        __m256 av = _mm256_broadcast_ss(a0 + k);
        c00 = _mm256_fmadd_ps(av, b0, c00);
        c01 = _mm256_fmadd_ps(av, b1, c01);
        if (MR > 1) {
            av = _mm256_broadcast_ss(a1 + k);
            c10 = _mm256_fmadd_ps(av, b0, c10);
            c11 = _mm256_fmadd_ps(av, b1, c11);
        }
        if (MR > 2) {
            av = _mm256_broadcast_ss(a2 + k);
            c20 = _mm256_fmadd_ps(av, b0, c20);
            c21 = _mm256_fmadd_ps(av, b1, c21);
        }
        if (MR > 3) {
            av = _mm256_broadcast_ss(a3 + k);
            c30 = _mm256_fmadd_ps(av, b0, c30);
            c31 = _mm256_fmadd_ps(av, b1, c31);
        }
        if (MR > 4) {
            av = _mm256_broadcast_ss(a4 + k);
            c40 = _mm256_fmadd_ps(av, b0, c40);
            c41 = _mm256_fmadd_ps(av, b1, c41);
        }
        if (MR > 5) {
            av = _mm256_broadcast_ss(a5 + k);
            c50 = _mm256_fmadd_ps(av, b0, c50);
            c51 = _mm256_fmadd_ps(av, b1, c51);
        }
    }
    const __m256i m0 = tail_mask(n_valid), m1 = tail_mask(n_valid - 8);
    const __m256 out[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
    for (int i = 0; i < MR; ++i) {
        _mm256_maskstore_ps(c + i * ldc, m0, out[i][0]);
        _mm256_maskstore_ps(c + i * ldc + 8, m1, out[i][1]);
    }
}

void tile(int mr, int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
          int n_valid, const float* init, bool accumulate) {
    switch (mr) {
        case 6: return tile_mr<6>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 5: return tile_mr<5>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 4: return tile_mr<4>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 3: return tile_mr<3>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 2: return tile_mr<2>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 1: return tile_mr<1>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        default: return;
    }
}

// dst[k][16] = src[r][k] through 8x8 register transposes.
void pack_b(const float* src, int64_t ld, int n_valid, int64_t kc, float* dst) {
    for (int r0 = 0; r0 < k_nr; r0 += 8) {
        const int rows = n_valid - r0 < 8 ? (n_valid - r0 > 0 ? n_valid - r0 : 0) : 8;
        for (int64_t k0 = 0; k0 < kc; k0 += 8) {
            const __m256i km = tail_mask(kc - k0);
            __m256 r[8];
            for (int i = 0; i < 8; ++i) {
                r[i] = i < rows ? _mm256_maskload_ps(src + (r0 + i) * ld + k0, km)
                                : _mm256_setzero_ps();
            }
            avx2_simd::transpose8(r);
            const int64_t nk = kc - k0 < 8 ? kc - k0 : 8;
            for (int64_t i = 0; i < nk; ++i) _mm256_store_ps(dst + (k0 + i) * k_nr + r0, r[i]);
        }
    }
}

const gemm_kernels k_table = {k_mr, k_nr, tile, pack_b};

}  // namespace

const gemm_kernels& gemm_avx2() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
