// AVX-512 attention helpers: f16 K/V tiles to f32 GEMM panels (64 keys wide, the AVX-512 GEMM's
// nr) and the online-softmax update over a 64-key score tile.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/arch/x86/simd-avx512.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

using avx512_simd::tail_mask;

constexpr int k_nr = 64;
static_assert(k_key_tile == k_nr, "one K panel per key tile");

inline __m512 load_f16(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// kt[d][64]: 16 keys x 16 dims at a time, converted and transposed in registers.
void load_k(const uint16_t* k, int64_t ld, int n_valid, int head_dim, float* kt) {
    for (int j0 = 0; j0 < k_nr; j0 += 16) {
        const int keys = n_valid - j0 < 16 ? (n_valid - j0 > 0 ? n_valid - j0 : 0) : 16;
        for (int d0 = 0; d0 < head_dim; d0 += 16) {
            const __mmask16 dm = tail_mask(head_dim - d0);
            __m512 r[16];
            for (int i = 0; i < 16; ++i) {
                r[i] = i < keys ? load_f16(k + (j0 + i) * ld + d0, dm) : _mm512_setzero_ps();
            }
            avx512_simd::transpose16(r);
            const int nd = head_dim - d0 < 16 ? head_dim - d0 : 16;
            for (int i = 0; i < nd; ++i) _mm512_store_ps(kt + (d0 + i) * k_nr + j0, r[i]);
        }
    }
}

// vt[p][j][64]: rows of V converted in place, 64 dims per panel.
void load_v(const uint16_t* v, int64_t ld, int n_valid, int head_dim, float* vt) {
    const int n_panels = (head_dim + k_nr - 1) / k_nr;
    for (int p = 0; p < n_panels; ++p) {
        float* panel = vt + static_cast<int64_t>(p) * k_key_tile * k_nr;
        for (int j = 0; j < k_key_tile; ++j) {
            for (int c = 0; c < k_nr; c += 16) {
                const int d = p * k_nr + c;
                const __m512 x = j < n_valid ? load_f16(v + j * ld + d, tail_mask(head_dim - d))
                                             : _mm512_setzero_ps();
                _mm512_store_ps(panel + j * k_nr + c, x);
            }
        }
    }
}

void softmax(float* s, int64_t ld, int rows, const int* limit, float* m, float* l,
             float* alpha) {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < rows; ++r) {
        float* row = s + r * ld;
        __mmask16 vm[4];
        __m512 x[4];
        __m512 mx = neg_inf;
        for (int c = 0; c < 4; ++c) {
            vm[c] = tail_mask(limit[r] - 16 * c);
            x[c] = _mm512_mask_loadu_ps(neg_inf, vm[c], row + 16 * c);
            mx = _mm512_max_ps(mx, x[c]);
        }
        const float m_new = std::fmax(m[r], _mm512_reduce_max_ps(mx));
        if (m_new == -INFINITY) {
            alpha[r] = 1.f;
            for (int c = 0; c < 4; ++c) _mm512_storeu_ps(row + 16 * c, _mm512_setzero_ps());
            continue;
        }
        alpha[r] = std::exp2(m[r] - m_new);
        const __m512 mv = _mm512_set1_ps(m_new);
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < 4; ++c) {
            const __m512 p = _mm512_maskz_mov_ps(vm[c],
                                                 avx512_simd::exp2_neg(_mm512_sub_ps(x[c], mv)));
            sum = _mm512_add_ps(sum, p);
            _mm512_storeu_ps(row + 16 * c, p);
        }
        l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(sum);
        m[r] = m_new;
    }
}

void scale_rows(float* o, int64_t ld, int rows, int n, const float* alpha) {
    for (int r = 0; r < rows; ++r) {
        if (alpha[r] == 1.f) continue;
        const __m512 a = _mm512_set1_ps(alpha[r]);
        float* row = o + r * ld;
        for (int c = 0; c < n; c += 16) {
            const __mmask16 km = tail_mask(n - c);
            _mm512_mask_storeu_ps(row + c, km, _mm512_mul_ps(_mm512_maskz_loadu_ps(km, row + c), a));
        }
    }
}

const attn_kernels k_table = {load_k, load_v, softmax, scale_rows};

}  // namespace

const attn_kernels& attn_avx512() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
