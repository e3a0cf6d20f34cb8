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

// Row maxima first, then alpha = 2^(m_old - m_new) for 16 rows in one vector (a scalar exp2
// per row would cost as much as a tenth of the tile's GEMM work), then the weights.
void softmax(float* s, int64_t ld, int rows, const int* limit, float* m, float* l,
             float* alpha) {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const int nb = rows - r0 < 16 ? rows - r0 : 16;
        const __mmask16 bm = tail_mask(nb);
        alignas(64) float mx[16];
        for (int i = 0; i < nb; ++i) {
            const float* row = s + (r0 + i) * ld;
            const int lim = limit[r0 + i];
            __m512 v = _mm512_mask_loadu_ps(neg_inf, tail_mask(lim), row);
            for (int c = 1; c < 4; ++c) {
                v = _mm512_max_ps(v, _mm512_mask_loadu_ps(neg_inf, tail_mask(lim - 16 * c),
                                                          row + 16 * c));
            }
            mx[i] = _mm512_reduce_max_ps(v);
        }
        const __m512 m_old = _mm512_mask_loadu_ps(neg_inf, bm, m + r0);
        const __m512 m_new = _mm512_max_ps(m_old, _mm512_load_ps(mx));
        // Rows that have seen no key yet keep m = -inf and alpha = 1 (their output is still 0).
        const __mmask16 seen = _mm512_cmp_ps_mask(m_new, neg_inf, _CMP_NEQ_OQ);
        const __m512 a = _mm512_mask_blend_ps(
            seen, _mm512_set1_ps(1.f), avx512_simd::exp2_neg(_mm512_sub_ps(m_old, m_new)));
        _mm512_mask_storeu_ps(alpha + r0, bm, a);
        _mm512_mask_storeu_ps(m + r0, bm, m_new);
        alignas(64) float mn[16];
        _mm512_store_ps(mn, m_new);
        for (int i = 0; i < nb; ++i) {
            float* row = s + (r0 + i) * ld;
            const int lim = limit[r0 + i];
            if (!((seen >> i) & 1)) {
                for (int c = 0; c < 4; ++c) _mm512_storeu_ps(row + 16 * c, _mm512_setzero_ps());
                continue;
            }
            const __m512 mv = _mm512_set1_ps(mn[i]);
            __m512 sum = _mm512_setzero_ps();
            for (int c = 0; c < 4; ++c) {
                const __mmask16 km = tail_mask(lim - 16 * c);
                const __m512 x = _mm512_loadu_ps(row + 16 * c);
                const __m512 e = avx512_simd::exp2_neg(_mm512_sub_ps(x, mv));
                const __m512 p = _mm512_maskz_mov_ps(km, e);
                sum = _mm512_add_ps(sum, p);
                _mm512_storeu_ps(row + 16 * c, p);
            }
            l[r0 + i] = l[r0 + i] * alpha[r0 + i] + _mm512_reduce_add_ps(sum);
        }
    }
}

void scale_rows(float* o, int64_t ld, int rows, int n, const float* alpha) {
    for (int r = 0; r < rows; ++r) {
        if (alpha[r] == 1.f) continue;
        const __m512 a = _mm512_set1_ps(alpha[r]);
        float* row = o + r * ld;
        for (int c = 0; c < n; c += 16) {
            const __mmask16 km = tail_mask(n - c);
            const __m512 x = _mm512_maskz_loadu_ps(km, row + c);
            _mm512_mask_storeu_ps(row + c, km, _mm512_mul_ps(x, a));
        }
    }
}

// The fused row tile: scores stay in registers through the softmax, the alpha rescale of O rides
// on the PV tile's load of O, and no score tile round-trips through memory.
template <int MR>
void row_tile_mr(int head_dim, const float* q, int64_t ldq, const float* kt, const float* vt,
                 int n_valid, const int* limit, float* m, float* l, float* o, int64_t ldo,
                 float* p) {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    __m512 acc[MR][4];
    for (int i = 0; i < MR; ++i) {
        for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
    }
    for (int d = 0; d < head_dim; ++d) {
        const float* b = kt + d * k_nr;
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        const __m512 b2 = _mm512_load_ps(b + 32), b3 = _mm512_load_ps(b + 48);
        for (int i = 0; i < MR; ++i) {
            const __m512 a = _mm512_set1_ps(q[i * ldq + d]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm512_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm512_fmadd_ps(a, b3, acc[i][3]);
        }
    }

    // Masked row maxima, then the new running max and alpha for all rows in one vector.
    alignas(64) float rmax[16], mn[16], al[16];
    for (int i = 0; i < MR; ++i) {
        __m512 v = neg_inf;
        for (int c = 0; c < 4; ++c) {
            acc[i][c] = _mm512_mask_mov_ps(neg_inf, tail_mask(limit[i] - 16 * c), acc[i][c]);
            v = _mm512_max_ps(v, acc[i][c]);
        }
        rmax[i] = _mm512_reduce_max_ps(v);
    }
    const __mmask16 rm = tail_mask(MR);
    const __m512 m_old = _mm512_mask_loadu_ps(neg_inf, rm, m);
    const __m512 m_new = _mm512_max_ps(m_old, _mm512_maskz_load_ps(rm, rmax));
    const __mmask16 seen = _mm512_cmp_ps_mask(m_new, neg_inf, _CMP_NEQ_OQ);
    _mm512_store_ps(al, _mm512_mask_blend_ps(seen, _mm512_set1_ps(1.f),
                                             avx512_simd::exp2_neg(_mm512_sub_ps(m_old, m_new))));
    _mm512_store_ps(mn, m_new);
    _mm512_mask_storeu_ps(m, rm, m_new);
    for (int i = 0; i < MR; ++i) {
        float* pr = p + i * k_nr;
        if (!((seen >> i) & 1)) {
            for (int c = 0; c < 4; ++c) _mm512_store_ps(pr + 16 * c, _mm512_setzero_ps());
            continue;
        }
        const __m512 mv = _mm512_set1_ps(mn[i]);
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < 4; ++c) {
            // exp2(-inf) would be 2^-126, not 0: masked lanes are cleared explicitly.
            const __m512 x = avx512_simd::exp2_neg(_mm512_sub_ps(acc[i][c], mv));
            const __m512 e = _mm512_maskz_mov_ps(tail_mask(limit[i] - 16 * c), x);
            sum = _mm512_add_ps(sum, e);
            _mm512_store_ps(pr + 16 * c, e);
        }
        l[i] = l[i] * al[i] + _mm512_reduce_add_ps(sum);
    }

    // O = alpha * O + P V, one 64-wide panel of head dims at a time.
    for (int d0 = 0; d0 < head_dim; d0 += k_nr) {
        const float* vp = vt + static_cast<int64_t>(d0 / k_nr) * k_key_tile * k_nr;
        __mmask16 dm[4];
        for (int c = 0; c < 4; ++c) dm[c] = tail_mask(head_dim - d0 - 16 * c);
        for (int i = 0; i < MR; ++i) {
            const __m512 a = _mm512_set1_ps(al[i]);
            for (int c = 0; c < 4; ++c) {
                const __m512 x = _mm512_maskz_loadu_ps(dm[c], o + i * ldo + d0 + 16 * c);
                acc[i][c] = _mm512_mul_ps(a, x);
            }
        }
        for (int j = 0; j < n_valid; ++j) {
            const float* b = vp + j * k_nr;
            const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
            const __m512 b2 = _mm512_load_ps(b + 32), b3 = _mm512_load_ps(b + 48);
            for (int i = 0; i < MR; ++i) {
                const __m512 a = _mm512_set1_ps(p[i * k_nr + j]);
                acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
                acc[i][2] = _mm512_fmadd_ps(a, b2, acc[i][2]);
                acc[i][3] = _mm512_fmadd_ps(a, b3, acc[i][3]);
            }
        }
        for (int i = 0; i < MR; ++i) {
            for (int c = 0; c < 4; ++c) {
                _mm512_mask_storeu_ps(o + i * ldo + d0 + 16 * c, dm[c], acc[i][c]);
            }
        }
    }
}

void row_tile(int rows, int head_dim, const float* q, int64_t ldq, const float* kt,
              const float* vt, int n_valid, const int* limit, float* m, float* l, float* o,
              int64_t ldo, float* p) {
    switch (rows) {
        case 6: return row_tile_mr<6>(head_dim, q, ldq, kt, vt, n_valid, limit, m, l, o, ldo, p);
        case 5: return row_tile_mr<5>(head_dim, q, ldq, kt, vt, n_valid, limit, m, l, o, ldo, p);
        case 4: return row_tile_mr<4>(head_dim, q, ldq, kt, vt, n_valid, limit, m, l, o, ldo, p);
        case 3: return row_tile_mr<3>(head_dim, q, ldq, kt, vt, n_valid, limit, m, l, o, ldo, p);
        case 2: return row_tile_mr<2>(head_dim, q, ldq, kt, vt, n_valid, limit, m, l, o, ldo, p);
        case 1: return row_tile_mr<1>(head_dim, q, ldq, kt, vt, n_valid, limit, m, l, o, ldo, p);
        default: return;
    }
}

const attn_kernels k_table = {load_k, load_v, softmax, scale_rows, row_tile};

}  // namespace

const attn_kernels& attn_avx512() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
