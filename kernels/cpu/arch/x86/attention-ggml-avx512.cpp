// Flash attention with ggml's CPU numerics, bit for bit (AVX-512 build of ggml-cpu/ops.cpp, what
// the peer llama.cpp runs), f16 K/V:
// - one_chunk: ggml_compute_forward_flash_attn_ext_f16_one_chunk (batches of < 64 query rows):
//   Q rounded to f16, scores by ggml_vec_dot_f16, online softmax with expf per key, the output
//   accumulated in f16 (ggml_vec_mad_f16 / ggml_vec_scale_f16), then * (1 / S).
// - tiled: ggml_compute_forward_flash_attn_ext_tiled (>= 64 rows): key tiles of 64 from key 0,
//   scores and P V as simd_gemm (one fma chain per output element), softmax per tile with
//   ggml_v_expf and a double sum of 16-lane reductions.
// A row's result depends only on its query, its key limit and the keys.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/arch/x86/simd-avx512.h"
#include "kernels/cpu/ukernels.h"

namespace cacheblend {
namespace ukr {
namespace {

constexpr int k_tile = 64;      // GGML_FA_TILE_KV
constexpr int k_max_rows = 64;  // rows per tiled() call (fa_exact_kernels::tiled)

// ggml_vec_dot_f16 with GGML_F16_STEP 64 / EPR 16: 4 fma chains, REDUCE tree, reduce_add_ps.
inline float dot_f16(const uint16_t* x, const uint16_t* y, int n) {
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64) {
        for (int j = 0; j < 4; ++j) {
            const __m512 ax = _mm512_cvtph_ps(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 16 * j)));
            const __m512 ay = _mm512_cvtph_ps(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i + 16 * j)));
            s[j] = _mm512_fmadd_ps(ax, ay, s[j]);
        }
    }
    s[0] = _mm512_add_ps(s[0], s[2]);
    s[1] = _mm512_add_ps(s[1], s[3]);
    s[0] = _mm512_add_ps(s[0], s[1]);
    double sum = static_cast<double>(_mm512_reduce_add_ps(s[0]));
    for (int i = np; i < n; ++i) {
        sum += static_cast<double>(_cvtsh_ss(x[i]) * _cvtsh_ss(y[i]));
    }
    return static_cast<float>(sum);
}

// ggml_vec_mad_f16: y = f16(y + x * v), fused (F32Cx16 FMA); scalar tail unfused.
inline void mad_f16(int n, uint16_t* y, const uint16_t* x, float v) {
    const int np = n & ~63;
    const __m512 vv = _mm512_set1_ps(v);
    for (int i = 0; i < np; i += 16) {
        const __m512 ax = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
        const __m512 ay = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                            _mm512_cvtps_ph(_mm512_fmadd_ps(ax, vv, ay), 0));
    }
    for (int i = np; i < n; ++i) {
        y[i] = _cvtss_sh(_cvtsh_ss(y[i]) + _cvtsh_ss(x[i]) * v, 0);
    }
}

// ggml_vec_scale_f16: y = f16(y * v).
inline void scale_f16(int n, uint16_t* y, float v) {
    const int np = n & ~63;
    const __m512 vv = _mm512_set1_ps(v);
    for (int i = 0; i < np; i += 16) {
        const __m512 ay = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                            _mm512_cvtps_ph(_mm512_mul_ps(ay, vv), 0));
    }
    for (int i = np; i < n; ++i) y[i] = _cvtss_sh(_cvtsh_ss(y[i]) * v, 0);
}

void one_chunk(const float* q, const uint16_t* k, const uint16_t* v, int64_t ld, int64_t n,
               int head_dim, float scale, float* out) {
    alignas(64) uint16_t qh[512];
    alignas(64) uint16_t acc[512];
    for (int d = 0; d < head_dim; ++d) qh[d] = _cvtss_sh(q[d], 0);
    std::memset(acc, 0, sizeof(uint16_t) * head_dim);
    float S = 0.f, M = -INFINITY;
    for (int64_t c = 0; c < n; ++c) {
        float s = dot_f16(k + c * ld, qh, head_dim);
        s = s * scale;
        float ms = 1.f, vs = 1.f;
        if (s > M) {
            const float m_old = M;
            M = s;
            ms = std::exp(m_old - M);
            scale_f16(head_dim, acc, ms);
        } else {
            vs = std::exp(s - M);
        }
        mad_f16(head_dim, acc, v + c * ld, vs);
        S = std::fma(S, ms, vs);  // GCC contracts ggml's `S = S*ms + vs`
    }
    const float s_inv = S == 0.f ? 0.f : 1.f / S;
    for (int d = 0; d < head_dim; ++d) out[d] = _cvtsh_ss(acc[d]) * s_inv;
}

// Rows r0..r0+R of a tile (R <= 4) against one key tile [t0, t0 + kv): kt = K^T [d][64] and
// vt = V [64][head_dim] in f32. The rows' state (o, S, M) lives in memory between key tiles.
template <int R, int NV>
void tile_step(const float* q, int64_t ldq, const int64_t* limit, float scale, int64_t t0, int kv,
               const float* kt, const float* vt, float* o, float* S, float* M) {
    constexpr int nv = NV;
    constexpr int head_dim = 16 * NV;
    alignas(64) float p[R][k_tile];
    bool active[R];
    for (int r = 0; r < R; ++r) {
        active[r] = limit[r] > t0;
        if (!active[r]) continue;
        // simd_gemm: s[c] = fma chain over d, from 0.
        __m512 s4[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                        _mm512_setzero_ps()};
        const float* qr = q + r * ldq;
        for (int d = 0; d < head_dim; ++d) {
            const __m512 qd = _mm512_set1_ps(qr[d]);
            for (int b = 0; b < 4; ++b) {
                s4[b] = _mm512_fmadd_ps(_mm512_load_ps(kt + d * k_tile + 16 * b), qd, s4[b]);
            }
        }
        // Scale, then -inf for keys the row cannot see (ggml adds the -inf mask).
        const int64_t nvis = limit[r] - t0;
        const __m512 sc = _mm512_set1_ps(scale);
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int b = 0; b < 4; ++b) {
            const __mmask16 m = avx512_simd::tail_mask(nvis - 16 * b);
            s4[b] = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), m, s4[b], sc);
            mx = _mm512_max_ps(mx, s4[b]);
        }
        const float tile_max = _mm512_reduce_max_ps(mx);
        const float m_new = std::fmax(M[r], tile_max);
        if (m_new > M[r]) {
            const float ms = std::exp(M[r] - m_new);
            const __m512 msv = _mm512_set1_ps(ms);
            float* orow = o + r * head_dim;
            for (int j = 0; j < nv; ++j) {
                _mm512_store_ps(orow + 16 * j, _mm512_mul_ps(_mm512_load_ps(orow + 16 * j), msv));
            }
            S[r] *= ms;
        }
        M[r] = m_new;
        // ggml_vec_soft_max_f32: ggml_v_expf per 16 lanes, double sum of lane reductions;
        // `S += sum` is evaluated in double.
        double sum = 0.0;
        const __m512 mv = _mm512_set1_ps(m_new);
        for (int b = 0; b < 4; ++b) {
            const __m512 e = avx512_simd::ggml_expf(_mm512_sub_ps(s4[b], mv));
            _mm512_store_ps(p[r] + 16 * b, e);
            sum += static_cast<double>(_mm512_reduce_add_ps(e));
        }
        S[r] = static_cast<float>(static_cast<double>(S[r]) + sum);
    }
    // simd_gemm: o[j] = fma chain over the tile's keys. Keys a row cannot see have p = 0 and
    // fma(0, v, o) = o in ggml, so they are skipped (their V may be anything here).
    __m512 acc[R][NV];
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j < nv; ++j) acc[r][j] = _mm512_load_ps(o + r * head_dim + 16 * j);
    }
    for (int c = 0; c < kv; ++c) {
        const float* vr = vt + c * head_dim;
        for (int r = 0; r < R; ++r) {
            if (!active[r] || t0 + c >= limit[r]) continue;
            const __m512 pc = _mm512_set1_ps(p[r][c]);
            for (int j = 0; j < nv; ++j) {
                acc[r][j] = _mm512_fmadd_ps(_mm512_load_ps(vr + 16 * j), pc, acc[r][j]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j < nv; ++j) _mm512_store_ps(o + r * head_dim + 16 * j, acc[r][j]);
    }
}

template <int NV>
void tiled_nv(int rows, const float* q, int64_t ldq, const uint16_t* k, const uint16_t* v,
              int64_t ld, const int64_t* limit, float scale, float* out, int64_t ldo,
              float* scratch) {
    constexpr int head_dim = 16 * NV;
    float* kt = scratch;
    float* vt = kt + k_tile * head_dim;
    float* o = vt + k_tile * head_dim;
    float S[k_max_rows], M[k_max_rows];
    int64_t lim_max = 0;
    for (int r = 0; r < rows; ++r) {
        S[r] = 0.f;
        M[r] = -INFINITY;
        if (limit[r] > lim_max) lim_max = limit[r];
    }
    std::memset(o, 0, sizeof(float) * rows * head_dim);
    for (int64_t t0 = 0; t0 < lim_max; t0 += k_tile) {
        const int kv = static_cast<int>(lim_max - t0 < k_tile ? lim_max - t0 : k_tile);
        // K^T in f32, 16 x 16 blocks (keys past kv read as zero), and V in f32.
        for (int c0 = 0; c0 < k_tile; c0 += 16) {
            for (int d0 = 0; d0 < head_dim; d0 += 16) {
                __m512 blk[16];
                for (int c = 0; c < 16; ++c) {
                    blk[c] = c0 + c < kv ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                               reinterpret_cast<const __m256i*>(
                                                   k + (t0 + c0 + c) * ld + d0)))
                                         : _mm512_setzero_ps();
                }
                avx512_simd::transpose16(blk);
                for (int d = 0; d < 16; ++d) _mm512_store_ps(kt + (d0 + d) * k_tile + c0, blk[d]);
            }
        }
        for (int c = 0; c < kv; ++c) {
            const uint16_t* vr = v + (t0 + c) * ld;
            for (int j = 0; j < head_dim; j += 16) {
                _mm512_store_ps(vt + c * head_dim + j,
                                _mm512_cvtph_ps(_mm256_loadu_si256(
                                    reinterpret_cast<const __m256i*>(vr + j))));
            }
        }
        int r = 0;
        for (; r + 4 <= rows; r += 4) {
            if (limit[r + 3] <= t0 && limit[r] <= t0 && limit[r + 1] <= t0 && limit[r + 2] <= t0) {
                continue;
            }
            tile_step<4, NV>(q + r * ldq, ldq, limit + r, scale, t0, kv, kt, vt, o + r * head_dim,
                             S + r, M + r);
        }
        for (; r < rows; ++r) {
            if (limit[r] <= t0) continue;
            tile_step<1, NV>(q + r * ldq, ldq, limit + r, scale, t0, kv, kt, vt, o + r * head_dim,
                             S + r, M + r);
        }
    }
    for (int r = 0; r < rows; ++r) {
        const float s_inv = S[r] == 0.f ? 0.f : 1.f / S[r];
        const __m512 si = _mm512_set1_ps(s_inv);
        for (int j = 0; j < head_dim; j += 16) {
            _mm512_storeu_ps(out + r * ldo + j,
                             _mm512_mul_ps(_mm512_load_ps(o + r * head_dim + j), si));
        }
    }
}

// Up to k_max_rows rows; scratch: (2 * 64 + k_max_rows) * head_dim floats, 64-byte aligned.
void tiled(int rows, const float* q, int64_t ldq, const uint16_t* k, const uint16_t* v,
           int64_t ld, const int64_t* limit, int head_dim, float scale, float* out, int64_t ldo,
           float* scratch) {
    switch (head_dim / 16) {
#define CASE(NV) \
    case NV: return tiled_nv<NV>(rows, q, ldq, k, v, ld, limit, scale, out, ldo, scratch);
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
        CASE(9) CASE(10) CASE(11) CASE(12) CASE(13) CASE(14) CASE(15) CASE(16)
#undef CASE
        default: return;
    }
}

const fa_exact_kernels k_table = {one_chunk, tiled};

}  // namespace

const fa_exact_kernels& fa_exact_avx512() { return k_table; }

}  // namespace ukr
}  // namespace cacheblend
