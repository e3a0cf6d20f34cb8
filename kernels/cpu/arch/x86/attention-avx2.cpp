// AVX2/F16C attention helpers: f16 K/V tiles to f32 GEMM panels (16 wide, the AVX2 GEMM's nr)
// and the online-softmax update over a 64-key score tile.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/arch/x86/simd-avx2.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

using avx2_simd::tail_mask;

constexpr int k_nr = 16;

// n (clamped to [0, 8]) halves from p as f32, zero beyond.
inline __m256 load8_f16(const uint16_t* p, int n) {
    if (n >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (n > 0) std::memcpy(tmp, p, sizeof(uint16_t) * n);
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp)));
}

// kt[p][d][16] for key panels p of 16 keys: 8 keys x 8 dims per register transpose.
void load_k(const uint16_t* k, int64_t ld, int n_valid, int head_dim, float* kt) {
    for (int j0 = 0; j0 < k_key_tile; j0 += 8) {
        const int keys = n_valid - j0 < 8 ? (n_valid - j0 > 0 ? n_valid - j0 : 0) : 8;
        float* panel = kt + static_cast<int64_t>(j0 / k_nr) * head_dim * k_nr + j0 % k_nr;
        for (int d0 = 0; d0 < head_dim; d0 += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i) {
                r[i] = i < keys ? load8_f16(k + (j0 + i) * ld + d0, head_dim - d0)
                                : _mm256_setzero_ps();
            }
            avx2_simd::transpose8(r);
            const int nd = head_dim - d0 < 8 ? head_dim - d0 : 8;
            for (int i = 0; i < nd; ++i) _mm256_store_ps(panel + (d0 + i) * k_nr, r[i]);
        }
    }
}

// vt[p][j][16] for dim panels p of 16 dims.
void load_v(const uint16_t* v, int64_t ld, int n_valid, int head_dim, float* vt) {
    const int n_panels = (head_dim + k_nr - 1) / k_nr;
    for (int p = 0; p < n_panels; ++p) {
        float* panel = vt + static_cast<int64_t>(p) * k_key_tile * k_nr;
        const int d = p * k_nr;
        for (int j = 0; j < k_key_tile; ++j) {
            __m256 x0 = _mm256_setzero_ps(), x1 = _mm256_setzero_ps();
            if (j < n_valid) {
                x0 = load8_f16(v + j * ld + d, head_dim - d);
                x1 = load8_f16(v + j * ld + d + 8, head_dim - d - 8);
            }
            _mm256_store_ps(panel + j * k_nr, x0);
            _mm256_store_ps(panel + j * k_nr + 8, x1);
        }
    }
}

// Row maxima first, then alpha for 8 rows in one vector, then the weights.
void softmax(float* s, int64_t ld, int rows, const int* limit, float* m, float* l,
             float* alpha) {
    const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int nb = rows - r0 < 8 ? rows - r0 : 8;
        alignas(32) float mx[8], mo[8], mn[8], al[8];
        for (int i = 0; i < 8; ++i) mx[i] = mo[i] = -INFINITY;
        for (int i = 0; i < nb; ++i) {
            const float* row = s + (r0 + i) * ld;
            __m256 v = neg_inf;
            for (int c = 0; c < 8; ++c) {
                const __m256 km = _mm256_castsi256_ps(tail_mask(limit[r0 + i] - 8 * c));
                v = _mm256_max_ps(v, _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(row + 8 * c), km));
            }
            mx[i] = avx2_simd::hmax(v);
            mo[i] = m[r0 + i];
        }
        const __m256 m_old = _mm256_load_ps(mo);
        const __m256 m_new = _mm256_max_ps(m_old, _mm256_load_ps(mx));
        const __m256 seen = _mm256_cmp_ps(m_new, neg_inf, _CMP_NEQ_OQ);
        const __m256 a = _mm256_blendv_ps(_mm256_set1_ps(1.f),
                                          avx2_simd::exp2_neg(_mm256_sub_ps(m_old, m_new)), seen);
        _mm256_store_ps(al, a);
        _mm256_store_ps(mn, m_new);
        for (int i = 0; i < nb; ++i) {
            float* row = s + (r0 + i) * ld;
            alpha[r0 + i] = al[i];
            m[r0 + i] = mn[i];
            if (mn[i] == -INFINITY) {
                for (int c = 0; c < 8; ++c) _mm256_storeu_ps(row + 8 * c, _mm256_setzero_ps());
                continue;
            }
            const __m256 mv = _mm256_set1_ps(mn[i]);
            __m256 sum = _mm256_setzero_ps();
            for (int c = 0; c < 8; ++c) {
                const __m256 km = _mm256_castsi256_ps(tail_mask(limit[r0 + i] - 8 * c));
                const __m256 x = _mm256_loadu_ps(row + 8 * c);
                const __m256 p = _mm256_and_ps(km, avx2_simd::exp2_neg(_mm256_sub_ps(x, mv)));
                sum = _mm256_add_ps(sum, p);
                _mm256_storeu_ps(row + 8 * c, p);
            }
            l[r0 + i] = l[r0 + i] * al[i] + avx2_simd::hsum(sum);
        }
    }
}

void scale_rows(float* o, int64_t ld, int rows, int n, const float* alpha) {
    for (int r = 0; r < rows; ++r) {
        if (alpha[r] == 1.f) continue;
        const __m256 a = _mm256_set1_ps(alpha[r]);
        float* row = o + r * ld;
        int c = 0;
        for (; c + 8 <= n; c += 8) {
            _mm256_storeu_ps(row + c, _mm256_mul_ps(_mm256_loadu_ps(row + c), a));
        }
        for (; c < n; ++c) row[c] *= alpha[r];
    }
}

const attn_kernels k_table = {load_k, load_v, softmax, scale_rows, nullptr};

}  // namespace

const attn_kernels& attn_avx2() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
