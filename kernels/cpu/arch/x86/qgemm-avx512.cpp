// AVX-512 VNNI int8 GEMM for q4_1 x q8_1 and q8_0 x q8_0 whose every output has the bits of
// ggml's x86 vec_dot (ggml_vec_dot_q4_1_q8_1 / ggml_vec_dot_q8_0_q8_0, AVX2 branch, as the peer
// llama.cpp build runs them). Per output, ggml keeps 8 float lanes, lane j = the int sum of
// elements 4j..4j+3 of a block, updated block by block as acc = fma(dw * da, float(isum), acc);
// q4_1 adds summs = fma(m, s, summs) per block (GCC contracts ggml's `summs += m*s`) and returns
// hsum_float_8(acc) + summs. Integer sums are exact however they are computed, so this kernel
// is free to vectorise across outputs: a zmm holds the 8 lanes of two weight rows for one
// activation row. Every output runs the same float operations in the same order whatever the
// tile shape, row position or thread split (batch invariance), and m = 1 is the decode GEMV.

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "kernels/cpu/quants-impl.h"

namespace cacheblend {
namespace avx512 {
namespace {

using namespace qimpl;

// 64-byte aligned storage for std::vector (the packs hold zmm values).
template <typename T>
struct aligned_alloc64 {
    using value_type = T;
    aligned_alloc64() = default;
    template <typename U>
    aligned_alloc64(const aligned_alloc64<U>&) {}
    T* allocate(size_t n) {
        void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
        if (!p) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    template <typename U>
    bool operator==(const aligned_alloc64<U>&) const { return true; }
    template <typename U>
    bool operator!=(const aligned_alloc64<U>&) const { return false; }
};

inline uint32_t ld_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline uint16_t ld_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline float h2f_x(const uint8_t* p) { return _cvtsh_ss(ld_u16(p)); }

// ggml's hsum_float_8 on lanes v[0..8): (v4..7 + v0..3), then (r0 + r2) + (r1 + r3).
inline float hsum8(const float* v) {
    const float r0 = v[4] + v[0], r1 = v[5] + v[1], r2 = v[6] + v[2], r3 = v[7] + v[3];
    return (r0 + r2) + (r1 + r3);
}

// Lanes 0..7 = f[i0], lanes 8..15 = f[i1].
inline __m512 pair_bcast(__m512 f, int i0, int i1) {
    const __m512i idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(i0), _mm512_set1_epi32(i1));
    return _mm512_permutexvar_ps(idx, f);
}

// MR activation rows x NP pairs of weight rows (2*NP <= 8), all nb blocks.
// w[k]: the 2*NP weight rows (duplicates allowed); a[i]: the MR q8_1 rows.
template <int MR, int NP>
void tile_q4_1(const uint8_t* const* w, const uint8_t* const* a, int64_t nb, float* out,
               int64_t ldo) {
    constexpr int NW = 2 * NP;
    static_assert(NW <= 8, "d/m gather holds 8 rows");
    __m512 acc[MR][NP];
    __m512 summs[MR];  // lane 2k+1: summs of weight row k (even lanes are unused)
    for (int i = 0; i < MR; ++i) {
        summs[i] = _mm512_setzero_ps();
        for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
        const size_t wo = static_cast<size_t>(b) * sizeof(block_q4_1);
        const size_t ao = static_cast<size_t>(b) * sizeof(block_q8_1);
        // {d, m} of the weight rows as floats: lane 2k = d_k, 2k+1 = m_k.
        alignas(32) uint32_t dm32[8];
        for (int k = 0; k < 8; ++k) dm32[k] = ld_u32(w[k < NW ? k : 0] + wo);
        const __m512 dm = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dm32)));
        __m512i av[MR];
        __m512 da[MR];
        for (int i = 0; i < MR; ++i) {
            const uint8_t* ab = a[i] + ao;
            av[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + 4)));
            da[i] = _mm512_set1_ps(h2f_x(ab));
            summs[i] = _mm512_fmadd_ps(dm, _mm512_set1_ps(h2f_x(ab + 2)), summs[i]);
        }
        for (int p = 0; p < NP; ++p) {
            // bytes_from_nibbles_32 of both rows: [lo0 hi0 | lo1 hi1], element order.
            const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[2 * p] + wo + 4));
            const __m128i q1 =
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[2 * p + 1] + wo + 4));
            const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            const __m512i wz = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
            const __m512 dw = pair_bcast(dm, 4 * p, 4 * p + 2);
            for (int i = 0; i < MR; ++i) {
                const __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wz, av[i]);
                const __m512 sc = _mm512_mul_ps(dw, da[i]);
                acc[i][p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[i][p]);
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        alignas(64) float s[16];
        _mm512_store_ps(s, summs[i]);
        for (int p = 0; p < NP; ++p) {
            alignas(64) float v[16];
            _mm512_store_ps(v, acc[i][p]);
            out[i * ldo + 2 * p] = hsum8(v) + s[4 * p + 1];
            out[i * ldo + 2 * p + 1] = hsum8(v + 8) + s[4 * p + 3];
        }
    }
}

// Prepacked q4_1 weights for batches: per group of 8 rows and block, the unpacked nibbles of the
// 4 row pairs, their d pair vectors and the {d, m} vector, so the batch loop only loads them.
struct q41_pack {
    __m512i wz[4];
    __m512 dw[4];
    __m512 dm;
};

void pack_q4_1(const uint8_t* const* w, int64_t nb, q41_pack* pk) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
        const size_t wo = static_cast<size_t>(b) * sizeof(block_q4_1);
        alignas(32) uint32_t dm32[8];
        for (int k = 0; k < 8; ++k) dm32[k] = ld_u32(w[k] + wo);
        const __m512 dm = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dm32)));
        pk[b].dm = dm;
        for (int p = 0; p < 4; ++p) {
            const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[2 * p] + wo + 4));
            const __m128i q1 =
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[2 * p + 1] + wo + 4));
            const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            pk[b].wz[p] = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
            pk[b].dw[p] = pair_bcast(dm, 4 * p, 4 * p + 2);
        }
    }
}

// tile_q4_1 on prepacked weights (8 rows) and activation scales ds[i][b] = {d, s} as floats:
// the same float operations per output, so the same bits.
template <int MR>
void tile_q4_1_packed(const q41_pack* pk, const uint8_t* const* a, const float* const* ds,
                      int64_t nb, float* out, int64_t ldo) {
    __m512 acc[MR][4];
    __m512 summs[MR];
    for (int i = 0; i < MR; ++i) {
        summs[i] = _mm512_setzero_ps();
        for (int p = 0; p < 4; ++p) acc[i][p] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
        const size_t ao = static_cast<size_t>(b) * sizeof(block_q8_1);
        const q41_pack& w = pk[b];
        __m512i av[MR];
        for (int i = 0; i < MR; ++i) {
            av[i] = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i] + ao + 4)));
            summs[i] = _mm512_fmadd_ps(w.dm, _mm512_set1_ps(ds[i][2 * b + 1]), summs[i]);
        }
        for (int p = 0; p < 4; ++p) {
            for (int i = 0; i < MR; ++i) {
                const __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.wz[p], av[i]);
                const __m512 sc = _mm512_mul_ps(w.dw[p], _mm512_set1_ps(ds[i][2 * b]));
                acc[i][p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[i][p]);
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        alignas(64) float sv[16];
        _mm512_store_ps(sv, summs[i]);
        for (int p = 0; p < 4; ++p) {
            alignas(64) float v[16];
            _mm512_store_ps(v, acc[i][p]);
            out[i * ldo + 2 * p] = hsum8(v) + sv[4 * p + 1];
            out[i * ldo + 2 * p + 1] = hsum8(v + 8) + sv[4 * p + 3];
        }
    }
}

// Batches (m >= 4): weights packed once per group of 8 rows, activation scales converted once.
void run_q4_1_packed(int64_t n, const uint8_t* w, size_t w_stride, int64_t nrows, const uint8_t* a,
                     size_t a_stride, int64_t m, float* out, int64_t ldo) {
    const int64_t nb = n / qk;
    static thread_local std::vector<q41_pack, aligned_alloc64<q41_pack>> pk_buf;
    static thread_local std::vector<float> ds_buf;
    if (static_cast<int64_t>(pk_buf.size()) < nb) pk_buf.resize(static_cast<size_t>(nb));
    if (static_cast<int64_t>(ds_buf.size()) < 2 * nb * m) ds_buf.resize(static_cast<size_t>(2 * nb * m));
    q41_pack* pk = pk_buf.data();
    float* ds = ds_buf.data();
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* ab = a + i * a_stride + b * sizeof(block_q8_1);
            ds[(i * nb + b) * 2] = h2f_x(ab);
            ds[(i * nb + b) * 2 + 1] = h2f_x(ab + 2);
        }
    }
    for (int64_t r0 = 0; r0 < nrows; r0 += 8) {
        const int nw = static_cast<int>(nrows - r0 < 8 ? nrows - r0 : 8);
        const uint8_t* wr[8];
        for (int k = 0; k < 8; ++k) wr[k] = w + (r0 + (k < nw ? k : nw - 1)) * w_stride;
        pack_q4_1(wr, nb, pk);
        for (int64_t i0 = 0; i0 < m; i0 += 4) {
            const int mi = static_cast<int>(m - i0 < 4 ? m - i0 : 4);
            const uint8_t* ar[4];
            const float* dr[4];
            for (int i = 0; i < 4; ++i) {
                const int64_t ii = i0 + (i < mi ? i : mi - 1);
                ar[i] = a + ii * a_stride;
                dr[i] = ds + ii * nb * 2;
            }
            alignas(64) float tmp[4 * 8];
            float* dst = out + i0 * ldo + r0;
            const bool direct = nw == 8;
            float* o = direct ? dst : tmp;
            const int64_t ldt = direct ? ldo : 8;
            switch (mi) {
                case 4: tile_q4_1_packed<4>(pk, ar, dr, nb, o, ldt); break;
                case 3: tile_q4_1_packed<3>(pk, ar, dr, nb, o, ldt); break;
                case 2: tile_q4_1_packed<2>(pk, ar, dr, nb, o, ldt); break;
                default: tile_q4_1_packed<1>(pk, ar, dr, nb, o, ldt); break;
            }
            if (!direct) {
                for (int i = 0; i < mi; ++i) {
                    for (int k = 0; k < nw; ++k) dst[i * ldo + k] = tmp[i * 8 + k];
                }
            }
        }
    }
}

// q8_0 x q8_0. ggml computes lane sums as dpbusd(|w|, sign(a, w)); here (w + 128) * a - 128 * a:
// the same integers.
template <int MR, int NP>
void tile_q8_0(const uint8_t* const* w, const uint8_t* const* a, int64_t nb, float* out,
               int64_t ldo) {
    constexpr int NW = 2 * NP;
    static_assert(NW <= 16, "d gather holds 16 rows");
    __m512 acc[MR][NP];
    for (int i = 0; i < MR; ++i) {
        for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
    }
    const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t b = 0; b < nb; ++b) {
        const size_t o = static_cast<size_t>(b) * sizeof(block_q8_0);
        alignas(32) uint16_t d16[16] = {};
        for (int k = 0; k < NW; ++k) d16[k] = ld_u16(w[k] + o);
        const __m512 dwv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d16)));
        __m512i av[MR], corr[MR];
        __m512 da[MR];
        for (int i = 0; i < MR; ++i) {
            const uint8_t* ab = a[i] + o;
            av[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + 2)));
            corr[i] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_dpbusd_epi32(_mm512_setzero_si512(), x80, av[i]));
            da[i] = _mm512_set1_ps(h2f_x(ab));
        }
        for (int p = 0; p < NP; ++p) {
            const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[2 * p] + o + 2));
            const __m256i q1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[2 * p + 1] + o + 2));
            const __m512i wz =
                _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), x80);
            const __m512 dw = pair_bcast(dwv, 2 * p, 2 * p + 1);
            for (int i = 0; i < MR; ++i) {
                const __m512i is = _mm512_dpbusd_epi32(corr[i], wz, av[i]);
                const __m512 sc = _mm512_mul_ps(dw, da[i]);
                acc[i][p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[i][p]);
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        for (int p = 0; p < NP; ++p) {
            alignas(64) float v[16];
            _mm512_store_ps(v, acc[i][p]);
            out[i * ldo + 2 * p] = hsum8(v);
            out[i * ldo + 2 * p + 1] = hsum8(v + 8);
        }
    }
}

// Drives a tile kernel over nrows x m outputs: groups of 2*NP weight rows (outer, reused from L1
// by every activation tile), tiles of up to 4 activation rows (inner).
template <template <int, int> class K, int NP>
void run_tiles(int64_t n, const void* vw, size_t w_stride, int64_t nrows, const void* va,
               size_t a_stride, int64_t m, float* out, int64_t ldo) {
    constexpr int NW = 2 * NP;
    const int64_t nb = n / qk;
    const auto* w = static_cast<const uint8_t*>(vw);
    const auto* a = static_cast<const uint8_t*>(va);
    for (int64_t r0 = 0; r0 < nrows; r0 += NW) {
        const int nw = static_cast<int>(nrows - r0 < NW ? nrows - r0 : NW);
        const uint8_t* wr[NW];
        for (int k = 0; k < NW; ++k) wr[k] = w + (r0 + (k < nw ? k : nw - 1)) * w_stride;
        for (int64_t i0 = 0; i0 < m; i0 += 4) {
            const int mi = static_cast<int>(m - i0 < 4 ? m - i0 : 4);
            const uint8_t* ar[4];
            for (int i = 0; i < 4; ++i) ar[i] = a + (i0 + (i < mi ? i : mi - 1)) * a_stride;
            alignas(64) float tmp[4 * NW];
            float* dst = out + i0 * ldo + r0;
            const bool direct = nw == NW;
            float* o = direct ? dst : tmp;
            const int64_t ldt = direct ? ldo : NW;
            switch (mi) {
                case 4: K<4, NP>::run(wr, ar, nb, o, ldt); break;
                case 3: K<3, NP>::run(wr, ar, nb, o, ldt); break;
                case 2: K<2, NP>::run(wr, ar, nb, o, ldt); break;
                default: K<1, NP>::run(wr, ar, nb, o, ldt); break;
            }
            if (!direct) {
                for (int i = 0; i < mi; ++i) {
                    for (int k = 0; k < nw; ++k) dst[i * ldo + k] = tmp[i * NW + k];
                }
            }
        }
    }
}

template <int MR, int NP>
struct q4_1_k {
    static void run(const uint8_t* const* w, const uint8_t* const* a, int64_t nb, float* o,
                    int64_t ld) {
        tile_q4_1<MR, NP>(w, a, nb, o, ld);
    }
};
template <int MR, int NP>
struct q8_0_k {
    static void run(const uint8_t* const* w, const uint8_t* const* a, int64_t nb, float* o,
                    int64_t ld) {
        tile_q8_0<MR, NP>(w, a, nb, o, ld);
    }
};

// Decode tiles (m = 1..3 activation rows; m >= 4 takes the packed path): NW consecutive weight
// rows per pass (q4_1: 8, q8_0: 16). Per block, the rows' f16 scales come from 4-byte scalar loads
// merged by unpacks (a vpgatherdd or store + reload cost more), q4_1 nibbles of a row pair are
// unpacked by two broadcast loads + one variable shift + one and, the d_w * d_a products of all
// rows come from one multiply (then permuted per pair: the same products as tile_*'s
// permute-then-multiply), activation {d, s} are converted once per call, and the weight stream
// is prefetched pf_dec bytes ahead (the NW rows are contiguous: 8 * 20 or 16 * 34 bytes per
// block). Per output: the same float operations in the same order as tile_q4_1 / tile_q8_0, so
// the same bits (Ops.MatmulBatchInvariant, the llama.cpp parity test).
constexpr size_t pf_dec = 8192;

inline void prefetch_span(const uint8_t* p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

inline __m128i ld32x(const uint8_t* p) { return _mm_cvtsi32_si128(static_cast<int>(ld_u32(p))); }

// ds[i][2b], ds[i][2b + 1]: activation row i's {d, s} of block b as floats.
template <int MR>
void dec_q4_1(const uint8_t* w0, size_t ws, const uint8_t* const* a, const float* const* ds,
              int64_t nb, float* out, int64_t ldo) {
    const __m512i shv = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                          0x0004000400040004LL, 0x0004000400040004LL);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i pidx[4];
    for (int p = 0; p < 4; ++p) {
        pidx[p] = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(4 * p), _mm512_set1_epi32(4 * p + 2));
    }
    __m512 acc[MR][4];
    __m512 summs[MR];
    for (int i = 0; i < MR; ++i) {
        summs[i] = _mm512_setzero_ps();
        for (int p = 0; p < 4; ++p) acc[i][p] = _mm512_setzero_ps();
    }
    const uint8_t* pf = w0 + pf_dec;
    for (int64_t b = 0; b < nb; ++b) {
        const size_t wo = static_cast<size_t>(b) * sizeof(block_q4_1);
        const size_t ao = static_cast<size_t>(b) * sizeof(block_q8_1);
        prefetch_span(pf + 8 * wo, 8 * sizeof(block_q4_1));
        const uint8_t* wb = w0 + wo;
        // {d, m} of the 8 rows (f16 pairs) -> lanes 2k, 2k + 1.
        const __m128i x01 = _mm_unpacklo_epi32(ld32x(wb), ld32x(wb + ws));
        const __m128i x23 = _mm_unpacklo_epi32(ld32x(wb + 2 * ws), ld32x(wb + 3 * ws));
        const __m128i x45 = _mm_unpacklo_epi32(ld32x(wb + 4 * ws), ld32x(wb + 5 * ws));
        const __m128i x67 = _mm_unpacklo_epi32(ld32x(wb + 6 * ws), ld32x(wb + 7 * ws));
        const __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(x01, x23)),
                                                  _mm_unpacklo_epi64(x45, x67), 1);
        const __m512 dm = _mm512_cvtph_ps(x);
        __m512i av[MR];
        __m512 dmda[MR];
        for (int i = 0; i < MR; ++i) {
            const uint8_t* ab = a[i] + ao;
            av[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + 4)));
            dmda[i] = _mm512_mul_ps(dm, _mm512_set1_ps(ds[i][2 * b]));
            summs[i] = _mm512_fmadd_ps(dm, _mm512_set1_ps(ds[i][2 * b + 1]), summs[i]);
        }
        for (int p = 0; p < 4; ++p) {
            // [qA qA qB qB] by two broadcast loads.
            const __m512i z = _mm512_mask_broadcast_i32x4(
                _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 2 * p * ws + 4))),
                0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + (2 * p + 1) * ws + 4)));
            const __m512i wz = _mm512_and_si512(_mm512_srlv_epi16(z, shv), m4);
            for (int i = 0; i < MR; ++i) {
                const __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wz, av[i]);
                const __m512 sc = _mm512_permutexvar_ps(pidx[p], dmda[i]);
                acc[i][p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[i][p]);
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        alignas(64) float sv[16];
        _mm512_store_ps(sv, summs[i]);
        for (int p = 0; p < 4; ++p) {
            alignas(64) float v[16];
            _mm512_store_ps(v, acc[i][p]);
            out[i * ldo + 2 * p] = hsum8(v) + sv[4 * p + 1];
            out[i * ldo + 2 * p + 1] = hsum8(v + 8) + sv[4 * p + 3];
        }
    }
}

// q8_0, 16 consecutive weight rows per pass (m = 1..3).
template <int MR>
void dec_q8_0(const uint8_t* w0, size_t ws, const uint8_t* const* a, const float* const* ds,
              int64_t nb, float* out, int64_t ldo) {
    const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i pidx[8];
    for (int p = 0; p < 8; ++p) {
        pidx[p] = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * p), _mm512_set1_epi32(2 * p + 1));
    }
    __m512 acc[MR][8];
    for (int i = 0; i < MR; ++i) {
        for (int p = 0; p < 8; ++p) acc[i][p] = _mm512_setzero_ps();
    }
    const uint8_t* pf = w0 + pf_dec;
    for (int64_t b = 0; b < nb; ++b) {
        const size_t o = static_cast<size_t>(b) * sizeof(block_q8_0);
        prefetch_span(pf + 16 * o, 16 * sizeof(block_q8_0));
        const uint8_t* wb = w0 + o;
        // d of the 16 rows: 4-byte loads (d + 2 bytes of qs), truncated to 16 bits below.
        __m128i x2[8];
        for (int k = 0; k < 8; ++k) x2[k] = _mm_unpacklo_epi32(ld32x(wb + 2 * k * ws), ld32x(wb + (2 * k + 1) * ws));
        const __m256i g0 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(x2[0], x2[1])),
                                                   _mm_unpacklo_epi64(x2[2], x2[3]), 1);
        const __m256i g1 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(x2[4], x2[5])),
                                                   _mm_unpacklo_epi64(x2[6], x2[7]), 1);
        const __m512i g = _mm512_inserti64x4(_mm512_castsi256_si512(g0), g1, 1);
        const __m512 dwv = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        __m512i av[MR], corr[MR];
        __m512 dd[MR];
        for (int i = 0; i < MR; ++i) {
            const uint8_t* ab = a[i] + o;
            av[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + 2)));
            corr[i] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_dpbusd_epi32(_mm512_setzero_si512(), x80, av[i]));
            dd[i] = _mm512_mul_ps(dwv, _mm512_set1_ps(ds[i][2 * b]));
        }
        for (int p = 0; p < 8; ++p) {
            const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 2 * p * ws + 2));
            const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + (2 * p + 1) * ws + 2));
            const __m512i wz = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), x80);
            for (int i = 0; i < MR; ++i) {
                const __m512i is = _mm512_dpbusd_epi32(corr[i], wz, av[i]);
                const __m512 sc = _mm512_permutexvar_ps(pidx[p], dd[i]);
                acc[i][p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[i][p]);
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        for (int p = 0; p < 8; ++p) {
            alignas(64) float v[16];
            _mm512_store_ps(v, acc[i][p]);
            out[i * ldo + 2 * p] = hsum8(v);
            out[i * ldo + 2 * p + 1] = hsum8(v + 8);
        }
    }
}

// m = 1..3: full groups of NW consecutive rows through the decode tile, the rest through run_tiles.
template <int NW, template <int> class D, template <int, int> class K, int NP>
void run_dec(int64_t n, const void* vw, size_t w_stride, int64_t nrows, const void* va,
             size_t a_stride, int64_t m, float* out, int64_t ldo) {
    const int64_t nb = n / qk;
    const auto* w = static_cast<const uint8_t*>(vw);
    const auto* a = static_cast<const uint8_t*>(va);
    const uint8_t* ar[3];
    const float* dr[3];
    static thread_local std::vector<float> ds_buf;
    if (static_cast<int64_t>(ds_buf.size()) < 2 * nb * m) ds_buf.resize(static_cast<size_t>(2 * nb * m));
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* ab = a + i * a_stride + b * D<1>::ablk;
            ds_buf[(i * nb + b) * 2] = h2f_x(ab);
            ds_buf[(i * nb + b) * 2 + 1] = D<1>::ablk == sizeof(block_q8_1) ? h2f_x(ab + 2) : 0.f;
        }
    }
    for (int i = 0; i < 3; ++i) {
        ar[i] = a + (i < m ? i : m - 1) * a_stride;
        dr[i] = ds_buf.data() + (i < m ? i : m - 1) * nb * 2;
    }
    const int64_t nfull = nrows / NW * NW;
    for (int64_t r0 = 0; r0 < nfull; r0 += NW) {
        const uint8_t* w0 = w + r0 * w_stride;
        switch (m) {
            case 3: D<3>::run(w0, w_stride, ar, dr, nb, out + r0, ldo); break;
            case 2: D<2>::run(w0, w_stride, ar, dr, nb, out + r0, ldo); break;
            default: D<1>::run(w0, w_stride, ar, dr, nb, out + r0, ldo); break;
        }
    }
    if (nfull < nrows) {
        run_tiles<K, NP>(n, w + nfull * w_stride, w_stride, nrows - nfull, va, a_stride, m,
                         out + nfull, ldo);
    }
}
template <int MR>
struct dec_q4_1_k {
    static constexpr size_t ablk = sizeof(block_q8_1);
    static void run(const uint8_t* w0, size_t ws, const uint8_t* const* a, const float* const* ds,
                    int64_t nb, float* o, int64_t ld) {
        dec_q4_1<MR>(w0, ws, a, ds, nb, o, ld);
    }
};
template <int MR>
struct dec_q8_0_k {
    static constexpr size_t ablk = sizeof(block_q8_0);
    static void run(const uint8_t* w0, size_t ws, const uint8_t* const* a, const float* const* ds,
                    int64_t nb, float* o, int64_t ld) {
        dec_q8_0<MR>(w0, ws, a, ds, nb, o, ld);
    }
};

void tile_rows_q4_1(int64_t n, const void* w, size_t w_stride, int64_t nrows, const void* a,
                    size_t a_stride, int64_t m, float* out, int64_t ldo) {
    if (m >= 4) {
        return run_q4_1_packed(n, static_cast<const uint8_t*>(w), w_stride, nrows,
                               static_cast<const uint8_t*>(a), a_stride, m, out, ldo);
    }
    run_dec<8, dec_q4_1_k, q4_1_k, 4>(n, w, w_stride, nrows, a, a_stride, m, out, ldo);
}
void tile_rows_q8_0(int64_t n, const void* w, size_t w_stride, int64_t nrows, const void* a,
                    size_t a_stride, int64_t m, float* out, int64_t ldo) {
    // Decode (the output head): 16 weight rows per pass amortise the activation's per-block
    // work; the per-output arithmetic is the same either way.
    if (m <= 3) {
        return run_dec<16, dec_q8_0_k, q8_0_k, 8>(n, w, w_stride, nrows, a, a_stride, m, out, ldo);
    }
    run_tiles<q8_0_k, 4>(n, w, w_stride, nrows, a, a_stride, m, out, ldo);
}

}  // namespace

qimpl::vec_dot_tile_fn find_vec_dot_tile(dtype t) {
    switch (t) {
        case dtype::q4_1: return tile_rows_q4_1;
        case dtype::q8_0: return tile_rows_q8_0;
        default: return nullptr;
    }
}

}  // namespace avx512
}  // namespace cacheblend
