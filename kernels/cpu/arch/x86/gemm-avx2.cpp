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

template <int MR>
void tile_mr(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
             int n_valid, const float* init, bool accumulate) {
    // 12 accumulators + 3 operands fill the 16 ymm registers: the column masks must not stay
    // live across the k loop (GCC would spill accumulators every iteration), so they are
    // rebuilt for the stores.
    __m256 acc[MR][2];
    if (accumulate) {
        const __m256i m0 = tail_mask(n_valid), m1 = tail_mask(n_valid - 8);
        for (int i = 0; i < MR; ++i) {
            acc[i][0] = _mm256_maskload_ps(c + i * ldc, m0);
            acc[i][1] = _mm256_maskload_ps(c + i * ldc + 8, m1);
        }
    } else {
        const __m256i m0 = tail_mask(n_valid), m1 = tail_mask(n_valid - 8);
        const __m256 v0 = init ? _mm256_maskload_ps(init, m0) : _mm256_setzero_ps();
        const __m256 v1 = init ? _mm256_maskload_ps(init + 8, m1) : _mm256_setzero_ps();
        for (int i = 0; i < MR; ++i) {
            acc[i][0] = v0;
            acc[i][1] = v1;
        }
    }
    const float* ar[MR];
    for (int i = 0; i < MR; ++i) ar[i] = a + i * lda;
    for (int64_t k = 0; k < kc; ++k) {
        const __m256 b0 = _mm256_load_ps(b + k * k_nr);
        const __m256 b1 = _mm256_load_ps(b + k * k_nr + 8);
        for (int i = 0; i < MR; ++i) {
            const __m256 av = _mm256_broadcast_ss(ar[i] + k);
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
    }
    const __m256i m0 = tail_mask(n_valid), m1 = tail_mask(n_valid - 8);
    for (int i = 0; i < MR; ++i) {
        _mm256_maskstore_ps(c + i * ldc, m0, acc[i][0]);
        _mm256_maskstore_ps(c + i * ldc + 8, m1, acc[i][1]);
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
