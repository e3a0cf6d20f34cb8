// AVX-512 (F/BW/VL/DQ + VNNI) quantization kernels; called only when cpu_isa_active() == avx512.
//
// Decode GEMV layout: several weight rows per call share one prepared copy of the activation.
// 32-element types are processed in groups of 4 blocks: one permute gathers the 4 blocks' 16
// nibble bytes into the 4 128-bit lanes of a zmm (lane k = block k), another gathers their f16
// scales, so integer sums stay per lane/block (vpdpbusd) and are scaled by a per-lane float
// vector: one FMA per group, no horizontal sums until the row ends. Signed weights become
// unsigned by an offset (w + 128, q - 8, q - 16) whose correction, -offset * sum(a), depends on
// the activation only and seeds the vpdpbusd accumulator.

// GCC 12 warns about the deliberately undefined upper lanes of _mm512_cast* intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/quants-impl.h"

namespace cacheblend {
namespace avx512 {
namespace {

using namespace qimpl;

constexpr int kc_blocks = 128;  // activation chunk: 128 blocks of 32 (4096 elements)
constexpr int kc_groups = kc_blocks / 4;
// Prefetch distance for weight rows: far enough ahead to cover DRAM latency at ~25 GB/s.
constexpr size_t pf_min = 8192;

inline float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// ---------------------------------------------------------------------------------------------
// Activation preparation (one chunk of up to kc_blocks blocks)

// For 4/5-bit weights: nibble layout. Group g, lane k holds block 4g+k: lo = qs[0..15] (pairs
// with low nibbles), hi = qs[16..31]. ds = {d, s} per block for q8_1, d per block for q8_0.
struct act_nib {
    alignas(64) int8_t lo[kc_blocks * 16];
    alignas(64) int8_t hi[kc_blocks * 16];
    alignas(64) float ds[kc_blocks * 2];
    alignas(64) int32_t corr[kc_groups * 16];  // -offset * (4-byte sums of lo + hi), per lane
};

void prep_nib(const uint8_t* a, size_t ablk, bool q8_1, int nb, int offset, act_nib* p) {
    const int ng = (nb + 3) / 4;
    const size_t qoff = q8_1 ? 4 : 2;
    for (int b = 0; b < ng * 4; ++b) {
        const int g = b >> 2, k = b & 3;
        __m256i q = _mm256_setzero_si256();
        float d = 0.f, s = 0.f;
        if (b < nb) {
            const uint8_t* blk = a + b * ablk;
            q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + qoff));
            d = half(blk);
            if (q8_1) s = half(blk + 2);
        }
        _mm_store_si128(reinterpret_cast<__m128i*>(p->lo + 64 * g + 16 * k),
                        _mm256_castsi256_si128(q));
        _mm_store_si128(reinterpret_cast<__m128i*>(p->hi + 64 * g + 16 * k),
                        _mm256_extracti128_si256(q, 1));
        if (q8_1) {
            p->ds[2 * b] = d;
            p->ds[2 * b + 1] = s;
        } else {
            p->ds[b] = d;
        }
    }
    if (offset) {
        const __m512i off = _mm512_set1_epi8(static_cast<char>(offset));
        for (int g = 0; g < ng; ++g) {
            const __m512i lo = _mm512_load_si512(p->lo + 64 * g);
            const __m512i hi = _mm512_load_si512(p->hi + 64 * g);
            __m512i c = _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, lo);
            c = _mm512_dpbusd_epi32(c, off, hi);
            _mm512_store_si512(p->corr + 16 * g, _mm512_sub_epi32(_mm512_setzero_si512(), c));
        }
    }
}

// Loads of a weight group. In the tail group (valid < group bytes) only the bytes below
// `valid` are read (masked loads never fault); the rest read as zero. With the full group size
// as a constant the masks fold away.
inline __mmask64 byte_mask(int off, int width, int valid) {
    const int k = valid - off;
    if (k >= width) return width == 64 ? ~0ull : ((1ull << width) - 1);
    return k <= 0 ? 0 : ((1ull << k) - 1);
}
inline __m512i ld512(const uint8_t* p, int off, int valid) {
    if (valid >= off + 64) return _mm512_loadu_si512(p + off);
    return _mm512_maskz_loadu_epi8(byte_mask(off, 64, valid), p + off);
}
inline __m512i ld256(const uint8_t* p, int off, int valid) {
    if (valid >= off + 32) {
        return _mm512_castsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + off)));
    }
    return _mm512_zextsi256_si512(
        _mm256_maskz_loadu_epi8(static_cast<__mmask32>(byte_mask(off, 32, valid)), p + off));
}
inline __m512i ld128(const uint8_t* p, int off, int valid) {
    if (valid >= off + 16) {
        return _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + off)));
    }
    return _mm512_zextsi128_si512(
        _mm_maskz_loadu_epi8(static_cast<__mmask16>(byte_mask(off, 16, valid)), p + off));
}

// ---------------------------------------------------------------------------------------------
// Per-type group steps. Each reads one group of 4 weight blocks at wb and updates one row's
// accumulators. The tail group (fewer than 4 blocks) runs the same code on zero-filled loads:
// zero weights, zero activation and zero scales add exactly nothing.

struct k_q4_1 {
    static constexpr int group_bytes = 80;
    using act = act_nib;
    struct acc {
        __m512 f;
        __m256 m;
    };
    static void zero(acc& a) {
        a.f = _mm512_setzero_ps();
        a.m = _mm256_setzero_ps();
    }
    static float finish(const acc& a) {
        // Odd lanes of m hold the min terms m*s; fold them into one reduction.
        const __m512 m = _mm512_zextps256_ps512(a.m);
        return _mm512_reduce_add_ps(_mm512_mask_add_ps(a.f, 0xAA, a.f, m));
    }
    struct shared {
        __m512i lo, hi;
        __m256 ds;
    };
    static shared load_act(const act& p, int g) {
        return {_mm512_load_si512(p.lo + 64 * g), _mm512_load_si512(p.hi + 64 * g),
                _mm256_load_ps(p.ds + 8 * g)};
    }
    static void step(const uint8_t* wb, int valid, const shared& s, acc& a) {
        // Block k = dwords 5k (d, m) and 5k+1..5k+4 (qs).
        const __m512i idx_q =
            _mm512_setr_epi32(1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19);
        const __m512i idx_dm = _mm512_setr_epi32(0, 5, 10, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i z0 = ld512(wb, 0, valid);
        const __m512i z1 = ld128(wb, 64, valid);
        const __m512i q = _mm512_permutex2var_epi32(z0, idx_q, z1);
        const __m128i dm = _mm512_castsi512_si128(_mm512_permutexvar_epi32(idx_dm, z0));
        const __m512i lo = _mm512_and_si512(q, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, s.lo);
        isum = _mm512_dpbusd_epi32(isum, hi, s.hi);
        const __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(dm), s.ds);  // d*da, m*s per block
        a.m = _mm256_add_ps(a.m, f);
        const __m512 sc = _mm512_permutexvar_ps(idx_sc, _mm512_castps256_ps512(f));
        a.f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sc, a.f);
    }
};

struct k_q4_0 {
    static constexpr int group_bytes = 72;
    using act = act_nib;
    struct acc {
        __m512 f;
    };
    static void zero(acc& a) { a.f = _mm512_setzero_ps(); }
    static float finish(const acc& a) { return _mm512_reduce_add_ps(a.f); }
    struct shared {
        __m512i lo, hi, corr;
        __m128 d;
    };
    static shared load_act(const act& p, int g) {
        return {_mm512_load_si512(p.lo + 64 * g), _mm512_load_si512(p.hi + 64 * g),
                _mm512_load_si512(p.corr + 16 * g), _mm_load_ps(p.ds + 4 * g)};
    }
    static void step(const uint8_t* wb, int valid, const shared& s, acc& a) {
        // Block k = words 9k (d) and 9k+1..9k+8 (qs); z1 holds words 28..35.
        const __m512i idx_q = _mm512_set_epi16(
            32 + 35 - 28, 32 + 34 - 28, 32 + 33 - 28, 32 + 32 - 28, 31, 30, 29, 28,  //
            26, 25, 24, 23, 22, 21, 20, 19, 17, 16, 15, 14, 13, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2, 1);
        const __m512i idx_d = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                               0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27, 18, 9, 0);
        const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i z0 = ld512(wb, 0, valid);
        const __m512i z1 = ld128(wb, 56, valid);
        const __m512i q = _mm512_permutex2var_epi16(z0, idx_q, z1);
        const __m128i dh = _mm512_castsi512_si128(_mm512_permutexvar_epi16(idx_d, z0));
        const __m512i lo = _mm512_and_si512(q, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        __m512i isum = _mm512_dpbusd_epi32(s.corr, lo, s.lo);
        isum = _mm512_dpbusd_epi32(isum, hi, s.hi);
        const __m128 f = _mm_mul_ps(_mm_cvtph_ps(dh), s.d);
        const __m512 sc = _mm512_permutexvar_ps(idx_sc, _mm512_castps128_ps512(f));
        a.f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sc, a.f);
    }
};

// Sets bit 4 of lo/hi bytes from the 32 qh bits of each lane's block. aux lane k holds qh_k in
// bytes qb..qb+3.
template <int qb>
inline void add_qh(__m512i aux, __m512i& lo, __m512i& hi) {
    const __m512i ctrl_lo =
        _mm512_broadcast_i32x4(_mm_setr_epi8(qb, qb, qb, qb, qb, qb, qb, qb, qb + 1, qb + 1, qb + 1,
                                             qb + 1, qb + 1, qb + 1, qb + 1, qb + 1));
    const __m512i ctrl_hi = _mm512_broadcast_i32x4(
        _mm_setr_epi8(qb + 2, qb + 2, qb + 2, qb + 2, qb + 2, qb + 2, qb + 2, qb + 2, qb + 3,
                      qb + 3, qb + 3, qb + 3, qb + 3, qb + 3, qb + 3, qb + 3));
    const __m512i bits = _mm512_set1_epi64(0x8040201008040201ll);
    const __m512i c16 = _mm512_set1_epi8(16);
    const __mmask64 mlo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(aux, ctrl_lo), bits);
    const __mmask64 mhi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(aux, ctrl_hi), bits);
    lo = _mm512_mask_add_epi8(lo, mlo, lo, c16);
    hi = _mm512_mask_add_epi8(hi, mhi, hi, c16);
}

struct k_q5_0 {
    static constexpr int group_bytes = 88;
    using act = act_nib;
    using acc = k_q4_0::acc;
    using shared = k_q4_0::shared;
    static void zero(acc& a) { a.f = _mm512_setzero_ps(); }
    static float finish(const acc& a) { return _mm512_reduce_add_ps(a.f); }
    static shared load_act(const act& p, int g) { return k_q4_0::load_act(p, g); }
    static void step(const uint8_t* wb, int valid, const shared& s, acc& a) {
        // Block k = words 11k (d), 11k+1..11k+2 (qh), 11k+3..11k+10 (qs); z1 holds words 28..43.
        // idx values >= 32 select z1 word (value - 32) = word (value - 32 + 28).
#define W(w) ((w) < 32 ? (w) : (w)-28 + 32)
        const __m512i idx_q = _mm512_set_epi16(
            W(43), W(42), W(41), W(40), W(39), W(38), W(37), W(36), W(32), W(31), W(30), W(29),
            W(28), W(27), W(26), W(25), W(21), W(20), W(19), W(18), W(17), W(16), W(15), W(14),
            W(10), W(9), W(8), W(7), W(6), W(5), W(4), W(3));
        // aux lane 0 words 0..3 = d0..d3; lane k words 4,5 = qh_k.
        const __m512i idx_aux =
            _mm512_set_epi16(0, 0, W(35), W(34), 0, 0, 0, 0, 0, 0, W(24), W(23), 0, 0, 0, 0, 0, 0,
                             W(13), W(12), 0, 0, 0, 0, 0, 0, W(2), W(1), W(33), W(22), W(11), W(0));
#undef W
        const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i z0 = ld512(wb, 0, valid);
        const __m512i z1 = ld256(wb, 56, valid);
        const __m512i q = _mm512_permutex2var_epi16(z0, idx_q, z1);
        const __m512i aux = _mm512_permutex2var_epi16(z0, idx_aux, z1);
        __m512i lo = _mm512_and_si512(q, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        add_qh<8>(aux, lo, hi);
        __m512i isum = _mm512_dpbusd_epi32(s.corr, lo, s.lo);
        isum = _mm512_dpbusd_epi32(isum, hi, s.hi);
        const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(aux)), s.d);
        const __m512 sc = _mm512_permutexvar_ps(idx_sc, _mm512_castps128_ps512(f));
        a.f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sc, a.f);
    }
};

struct k_q5_1 {
    static constexpr int group_bytes = 96;
    using act = act_nib;
    using acc = k_q4_1::acc;
    using shared = k_q4_1::shared;
    static void zero(acc& a) { k_q4_1::zero(a); }
    static float finish(const acc& a) { return k_q4_1::finish(a); }
    static shared load_act(const act& p, int g) { return k_q4_1::load_act(p, g); }
    static void step(const uint8_t* wb, int valid, const shared& s, acc& a) {
        // Block k = dwords 6k (d, m), 6k+1 (qh), 6k+2..6k+5 (qs); z1 holds dwords 16..23.
        const __m512i idx_q =
            _mm512_setr_epi32(2, 3, 4, 5, 8, 9, 10, 11, 14, 15, 16, 17, 20, 21, 22, 23);
        const __m512i idx_dm = _mm512_setr_epi32(0, 6, 12, 18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i idx_qh = _mm512_setr_epi32(1, 0, 0, 0, 7, 0, 0, 0, 13, 0, 0, 0, 19, 0, 0, 0);
        const __m512i idx_sc = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i z0 = ld512(wb, 0, valid);
        const __m512i z1 = ld256(wb, 64, valid);
        const __m512i q = _mm512_permutex2var_epi32(z0, idx_q, z1);
        const __m128i dm = _mm512_castsi512_si128(_mm512_permutex2var_epi32(z0, idx_dm, z1));
        const __m512i qh = _mm512_permutex2var_epi32(z0, idx_qh, z1);
        __m512i lo = _mm512_and_si512(q, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        add_qh<0>(qh, lo, hi);
        __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, s.lo);
        isum = _mm512_dpbusd_epi32(isum, hi, s.hi);
        const __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(dm), s.ds);
        a.m = _mm256_add_ps(a.m, f);
        const __m512 sc = _mm512_permutexvar_ps(idx_sc, _mm512_castps256_ps512(f));
        a.f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sc, a.f);
    }
};

inline size_t pf_distance(int r, size_t stride) {
    const size_t d = static_cast<size_t>(r) * stride;
    return d < pf_min ? pf_min : d;
}

// R rows of one activation chunk (nb blocks). first: out = result, else out += result.
template <typename K, int R>
void rows_chunk(const uint8_t* w, size_t stride, const typename K::act& p, int nb, float* out,
                bool first, const uint8_t* pf_end) {
    typename K::acc acc[R];
    for (int r = 0; r < R; ++r) K::zero(acc[r]);
    const int nfull = nb / 4, rem = nb % 4;
    // Software prefetch of the rows that follow (hardware prefetchers alone leave DRAM
    // bandwidth unused with several interleaved row streams).
    const size_t pf = pf_distance(R, stride);
    for (int g = 0; g < nfull; ++g) {
        const typename K::shared s = K::load_act(p, g);
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * stride + g * K::group_bytes;
            if (wb + pf < pf_end) {  // only this call's rows: the next ones may be another thread's
                for (int o = 0; o < K::group_bytes; o += 64) {
                    _mm_prefetch(reinterpret_cast<const char*>(wb + pf + o), _MM_HINT_T0);
                }
            }
            K::step(wb, K::group_bytes, s, acc[r]);
        }
    }
    if (rem) {
        const typename K::shared s = K::load_act(p, nfull);
        const int valid = rem * (K::group_bytes / 4);
        for (int r = 0; r < R; ++r) {
            K::step(w + r * stride + nfull * K::group_bytes, valid, s, acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        const float v = K::finish(acc[r]);
        out[r] = first ? v : out[r] + v;
    }
}

template <typename K>
void run_rows(const uint8_t* w, size_t stride, int64_t nrows, const typename K::act& p, int nb,
              float* out, bool first) {
    const uint8_t* end = w + nrows * stride;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        rows_chunk<K, 4>(w + r * stride, stride, p, nb, out + r, first, end);
    }
    switch (nrows - r) {
        case 3: rows_chunk<K, 3>(w + r * stride, stride, p, nb, out + r, first, end); break;
        case 2: rows_chunk<K, 2>(w + r * stride, stride, p, nb, out + r, first, end); break;
        case 1: rows_chunk<K, 1>(w + r * stride, stride, p, nb, out + r, first, end); break;
        default: break;
    }
}

// q4_0/q4_1/q5_0/q5_1 share the nibble activation layout.
template <typename K, bool q8_1, int offset, int wblock>
void vec_dot_rows_nib(int64_t n, const void* vw, size_t stride, int64_t nrows, const void* va,
                      float* out) {
    const uint8_t* w = static_cast<const uint8_t*>(vw);
    const uint8_t* a = static_cast<const uint8_t*>(va);
    const size_t ablk = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const int64_t nb = n / qk;
    act_nib p;
    for (int64_t b0 = 0; b0 < nb; b0 += kc_blocks) {
        const int cnb = static_cast<int>(nb - b0 < kc_blocks ? nb - b0 : kc_blocks);
        prep_nib(a + b0 * ablk, ablk, q8_1, cnb, offset, &p);
        run_rows<K>(w + b0 * wblock, stride, nrows, p, cnb, out, b0 == 0);
    }
}

// ---------------------------------------------------------------------------------------------
// k-quants x q8_K (activation read in place, no preparation)

// sc[0..7] = scales, sc[8..15] = mins of a q4_K/q5_K block (ggml's kmask unpacking).
inline __m128i unpack_k4_scales(const uint8_t* s12) {
    uint32_t u[4];
    std::memcpy(u, s12, 12);
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = u[1] & kmask1;
    u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
    u[2] = uaux;
    u[0] &= kmask1;
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
}

// Activation of one super-block, rearranged to pair with q4_K/q5_K nibble vectors:
// lo(qs[0..63]) = [sub 0 | sub 2], hi = [sub 1 | sub 3], and the same for qs[64..127].
struct k4_shared {
    __m512i a[4];  // [a0-31|a64-95], [a32-63|a96-127], [a128-159|a192-223], [a160-191|a224-255]
    __m256i bs2;   // bsums[2j] + bsums[2j+1], 8 int32
    float d;
};

inline k4_shared load_k4_shared(const block_q8_k* y) {
    k4_shared s;
    const __m512i idx_lo = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
    const __m512i idx_hi = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
    for (int h = 0; h < 2; ++h) {
        const __m512i x0 = _mm512_loadu_si512(y->qs + 128 * h);
        const __m512i x1 = _mm512_loadu_si512(y->qs + 128 * h + 64);
        s.a[2 * h] = _mm512_permutex2var_epi64(x0, idx_lo, x1);
        s.a[2 * h + 1] = _mm512_permutex2var_epi64(x0, idx_hi, x1);
    }
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y->bsums));
    s.bs2 = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
    s.d = q8k_d(y);
    return s;
}

// One q4_K/q5_K super-block: integer dot per lane times sub-block scales; mins through bsums.
template <bool five>
inline void k4_step(const uint8_t* xb, const k4_shared& s, __m512& acc, __m256& macc) {
    const block_q4_k* x4 = reinterpret_cast<const block_q4_k*>(xb);
    const block_q5_k* x5 = reinterpret_cast<const block_q5_k*>(xb);
    const uint8_t* qs = five ? x5->qs : x4->qs;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i sm = _mm512_cvtepu8_epi32(unpack_k4_scales(five ? x5->scales : x4->scales));
    const __m512i q0 = _mm512_loadu_si512(qs);
    const __m512i q1 = _mm512_loadu_si512(qs + 64);
    __m512i v[4] = {_mm512_and_si512(q0, m4), _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4),
                    _mm512_and_si512(q1, m4), _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4)};
    if (five) {
        // v[i] halves are sub-blocks (2i', ...): sub j takes qh bit j into bit 4 of each byte.
        const __m512i qh =
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x5->qh)));
        const __m512i c10 = _mm512_set1_epi8(0x10);
        // Subs of v: [0|2], [1|3], [4|6], [5|7]; rotate bit j of each byte to bit 4.
        const __m512i rot[4] = {_mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2),
                                _mm512_setr_epi64(3, 3, 3, 3, 1, 1, 1, 1),
                                _mm512_setr_epi64(0, 0, 0, 0, 62, 62, 62, 62),
                                _mm512_setr_epi64(63, 63, 63, 63, 61, 61, 61, 61)};
        for (int i = 0; i < 4; ++i) {
            v[i] = _mm512_ternarylogic_epi32(v[i], _mm512_rolv_epi64(qh, rot[i]), c10, 0xF8);
        }
    }
    const __m512i idx[4] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                            _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3),
                            _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6),
                            _mm512_setr_epi32(5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7)};
    __m512i isum = _mm512_setzero_si512();
    for (int i = 0; i < 4; ++i) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[i], s.a[i]);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, _mm512_permutexvar_epi32(idx[i], sm)));
    }
    const float d = s.d * half(xb), dmin = s.d * half(xb + 2);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
    const __m256i mins = _mm512_extracti64x4_epi64(sm, 1);
    macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mins, s.bs2)),
                           _mm256_set1_ps(dmin), macc);
}

struct q6k_shared {
    __m512i a[4];
    __m256i bsums;
    float d;
};

inline void q6k_step(const block_q6_k* x, const q6k_shared& s, __m512& acc) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i sc =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)));
    // Bits (0,1),(2,3) of qh -> bits 4,5 for elements 0..63 of a half; (4,5),(6,7) for 64..127.
    const __m512i rot_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
    const __m512i rot_hi = _mm512_setr_epi64(0, 0, 0, 0, 62, 62, 62, 62);
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * h)));
        const __m512i vlo = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4),
                                                      _mm512_rolv_epi64(qh, rot_lo), m30, 0xF8);
        const __m512i vhi =
            _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                      _mm512_rolv_epi64(qh, rot_hi), m30, 0xF8);
        const __m512i plo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), vlo, s.a[2 * h]);
        const __m512i phi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), vhi, s.a[2 * h + 1]);
        // Lanes of plo: 4 sub-blocks of 16 (8h .. 8h+3); phi: 8h+4 .. 8h+7.
        const __m512i base = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        const __m512i slo =
            _mm512_permutexvar_epi32(_mm512_add_epi32(base, _mm512_set1_epi32(8 * h)), sc);
        const __m512i shi =
            _mm512_permutexvar_epi32(_mm512_add_epi32(base, _mm512_set1_epi32(8 * h + 4)), sc);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(plo, slo));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(phi, shi));
    }
    // The stored 6-bit values are q + 32: subtract 32 * sum_j sc_j * bsums_j.
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)));
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, s.bsums), 5);
    isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(corr));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                          _mm512_set1_ps(s.d * half(reinterpret_cast<const uint8_t*>(&x->d))), acc);
}

struct kq_q4_k {
    static constexpr size_t bytes = sizeof(block_q4_k);
    using shared = k4_shared;
    struct acc {
        __m512 f;
        __m256 m;
    };
    static shared load(const block_q8_k* y) { return load_k4_shared(y); }
    static void zero(acc& a) {
        a.f = _mm512_setzero_ps();
        a.m = _mm256_setzero_ps();
    }
    static void step(const uint8_t* xb, const shared& s, acc& a) {
        k4_step<false>(xb, s, a.f, a.m);
    }
    static float finish(const acc& a) {
        alignas(32) float t[8];
        _mm256_store_ps(t, a.m);
        const float mins = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
        return _mm512_reduce_add_ps(a.f) - mins;
    }
};

struct kq_q5_k : kq_q4_k {
    static constexpr size_t bytes = sizeof(block_q5_k);
    static void step(const uint8_t* xb, const shared& s, acc& a) { k4_step<true>(xb, s, a.f, a.m); }
};

struct kq_q6_k {
    static constexpr size_t bytes = sizeof(block_q6_k);
    using shared = q6k_shared;
    struct acc {
        __m512 f;
    };
    static shared load(const block_q8_k* y) {
        q6k_shared s;
        for (int i = 0; i < 4; ++i) s.a[i] = _mm512_loadu_si512(y->qs + 64 * i);
        s.bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y->bsums));
        s.d = q8k_d(y);
        return s;
    }
    static void zero(acc& a) { a.f = _mm512_setzero_ps(); }
    static void step(const uint8_t* xb, const shared& s, acc& a) {
        q6k_step(reinterpret_cast<const block_q6_k*>(xb), s, a.f);
    }
    static float finish(const acc& a) { return _mm512_reduce_add_ps(a.f); }
};

template <typename K, int R>
void kq_rows(const uint8_t* w, size_t stride, const block_q8_k* y, int64_t nb, float* out,
             const uint8_t* pf_end) {
    typename K::acc acc[R];
    for (int r = 0; r < R; ++r) K::zero(acc[r]);
    const size_t pf = pf_distance(R, stride);
    for (int64_t i = 0; i < nb; ++i) {
        const typename K::shared s = K::load(y + i);
        for (int r = 0; r < R; ++r) {
            const uint8_t* xb = w + r * stride + i * K::bytes;
            if (xb + pf < pf_end) {
                for (size_t o = 0; o < K::bytes; o += 64) {
                    _mm_prefetch(reinterpret_cast<const char*>(xb + pf + o), _MM_HINT_T0);
                }
            }
            K::step(xb, s, acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = K::finish(acc[r]);
}

template <typename K>
void vec_dot_rows_kq(int64_t n, const void* vw, size_t stride, int64_t nrows, const void* va,
                     float* out) {
    const uint8_t* w = static_cast<const uint8_t*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    const int64_t nb = n / qk_k;
    const uint8_t* end = w + nrows * stride;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) kq_rows<K, 4>(w + r * stride, stride, y, nb, out + r, end);
    switch (nrows - r) {
        case 3: kq_rows<K, 3>(w + r * stride, stride, y, nb, out + r, end); break;
        case 2: kq_rows<K, 2>(w + r * stride, stride, y, nb, out + r, end); break;
        case 1: kq_rows<K, 1>(w + r * stride, stride, y, nb, out + r, end); break;
        default: break;
    }
}

// ---------------------------------------------------------------------------------------------
// f32 / f16 / bf16 rows (activation of the same type)

struct ld_f32 {
    static __m512 load(const void* p, int64_t i) {
        return _mm512_loadu_ps(static_cast<const float*>(p) + i);
    }
    static __m512 load_tail(const void* p, int64_t i, __mmask16 m) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
    }
};
struct ld_f16 {
    static __m512 load(const void* p, int64_t i) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
    }
    static __m512 load_tail(const void* p, int64_t i, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
    }
};
struct ld_bf16 {
    static __m512 from(__m256i v) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
    }
    static __m512 load(const void* p, int64_t i) {
        return from(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
    }
    static __m512 load_tail(const void* p, int64_t i, __mmask16 m) {
        return from(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
    }
};

template <typename L, int R>
void float_rows(int64_t n, const uint8_t* w, size_t stride, const void* a, float* out) {
    __m512 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a0 = L::load(a, i), a1 = L::load(a, i + 16);
        for (int r = 0; r < R; ++r) {
            acc0[r] = _mm512_fmadd_ps(L::load(w + r * stride, i), a0, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(L::load(w + r * stride, i + 16), a1, acc1[r]);
        }
    }
    for (; i < n; i += 16) {
        const int64_t left = n - i;
        const __mmask16 m = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
        const __m512 a0 = L::load_tail(a, i, m);
        for (int r = 0; r < R; ++r) {
            acc0[r] = _mm512_fmadd_ps(L::load_tail(w + r * stride, i, m), a0, acc0[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

template <typename L>
void vec_dot_rows_float(int64_t n, const void* vw, size_t stride, int64_t nrows, const void* a,
                        float* out) {
    const uint8_t* w = static_cast<const uint8_t*>(vw);
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) float_rows<L, 4>(n, w + r * stride, stride, a, out + r);
    switch (nrows - r) {
        case 3: float_rows<L, 3>(n, w + r * stride, stride, a, out + r); break;
        case 2: float_rows<L, 2>(n, w + r * stride, stride, a, out + r); break;
        case 1: float_rows<L, 1>(n, w + r * stride, stride, a, out + r); break;
        default: break;
    }
}

// ---------------------------------------------------------------------------------------------
// Dequantization (bit-identical to the generic code: same multiply/add order, no FMA)

void dequant_q4_0(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m512i c8 = _mm512_set1_epi32(8);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q4_0), y += qk) {
        const __m512 d = _mm512_set1_ps(half(x));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2));
        const __m512i lo = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(q, m4)), c8);
        const __m512i hi =
            _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m4)), c8);
        _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
    }
}

void dequant_q4_1(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q4_1), y += qk) {
        const __m512 d = _mm512_set1_ps(half(x)), m = _mm512_set1_ps(half(x + 2));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 4));
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(q, m4));
        const __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m4));
        _mm512_storeu_ps(y, _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), m));
        _mm512_storeu_ps(y + 16, _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(hi), d), m));
    }
}

void dequant_q5_0(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m512i c16 = _mm512_set1_epi32(16);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q5_0), y += qk) {
        const __m512 d = _mm512_set1_ps(half(x));
        uint32_t qh;
        std::memcpy(&qh, x + 2, 4);
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 6));
        __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(q, m4));
        __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m4));
        lo = _mm512_mask_add_epi32(lo, static_cast<__mmask16>(qh), lo, c16);
        hi = _mm512_mask_add_epi32(hi, static_cast<__mmask16>(qh >> 16), hi, c16);
        _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(lo, c16)), d));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(hi, c16)), d));
    }
}

void dequant_q8_0(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q8_0), y += qk) {
        const __m512 d = _mm512_set1_ps(half(x));
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 18));
        _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d));
    }
}

void dequant_q4_k(const void* src, float* y, int64_t n) {
    const block_q4_k* x = static_cast<const block_q4_k*>(src);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = half(reinterpret_cast<const uint8_t*>(&x[i].d));
        const float dmin = half(reinterpret_cast<const uint8_t*>(&x[i].dmin));
        for (int j = 0; j < 8; ++j, y += 32) {
            uint8_t sc, m;
            scale_min_k4(j, x[i].scales, &sc, &m);
            const __m512 dl = _mm512_set1_ps(d * sc), ml = _mm512_set1_ps(dmin * m);
            const uint8_t* q = x[i].qs + 32 * (j / 2);
            for (int h = 0; h < 2; ++h) {
                __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h));
                if (j & 1) v = _mm_srli_epi16(v, 4);
                const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(v, m4)));
                _mm512_storeu_ps(y + 16 * h, _mm512_sub_ps(_mm512_mul_ps(dl, f), ml));
            }
        }
    }
}

void dequant_q6_k(const void* src, float* y, int64_t n) {
    const block_q6_k* x = static_cast<const block_q6_k*>(src);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i c32 = _mm512_set1_epi8(32);
    const __m512i rot_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
    const __m512i rot_hi = _mm512_setr_epi64(0, 0, 0, 0, 62, 62, 62, 62);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = half(reinterpret_cast<const uint8_t*>(&x[i].d));
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h)));
            const __m512i v[2] = {
                _mm512_sub_epi8(_mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4),
                                                          _mm512_rolv_epi64(qh, rot_lo), m30, 0xF8),
                                c32),
                _mm512_sub_epi8(
                    _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                              _mm512_rolv_epi64(qh, rot_hi), m30, 0xF8),
                    c32)};
            alignas(64) int8_t q[128];
            _mm512_store_si512(q, v[0]);
            _mm512_store_si512(q + 64, v[1]);
            for (int j = 0; j < 8; ++j, y += 16) {
                const __m512 dl = _mm512_set1_ps(d * x[i].scales[8 * h + j]);
                const __m128i qq = _mm_load_si128(reinterpret_cast<const __m128i*>(q + 16 * j));
                _mm512_storeu_ps(y,
                                 _mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qq))));
            }
        }
    }
}

void dequant_f16(const void* src, float* y, int64_t n);

// ---------------------------------------------------------------------------------------------
// Activation quantization (byte-identical to the generic code)

template <bool q8_1>
void quant_q8(const float* x, void* dst, int64_t n) {
    uint8_t* y = static_cast<uint8_t*>(dst);
    const size_t bs = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    for (int64_t i = 0; i < n / qk; ++i, x += qk, y += bs) {
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const float amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        // As ggml's AVX quantize_row_q8_0/q8_1 (what the peer runs): id = 127 / amax, not
        // 1 / d, and round half to even (_mm256_round_ps(_MM_ROUND_NEAREST)).
        const float d = amax / 127.f;
        const float id = amax != 0.f ? 127.f / amax : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        constexpr int rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(x0, vid), rne));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(x1, vid), rne));
        const uint16_t dh = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        std::memcpy(y, &dh, 2);
        uint8_t* qs = y + (q8_1 ? 4 : 2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
        if (q8_1) {
            const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            const uint16_t sh = static_cast<uint16_t>(
                _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT));
            std::memcpy(y + 2, &sh, 2);
        }
    }
}

void quant_q8_0(const float* x, void* dst, int64_t n) { quant_q8<false>(x, dst, n); }
void quant_q8_1(const float* x, void* dst, int64_t n) { quant_q8<true>(x, dst, n); }

void quant_q8_k(const float* x, void* dst, int64_t n) {
    uint8_t* y = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, x += qk_k, y += sizeof(block_q8_k)) {
        __m512 vmax = _mm512_setzero_ps();
        for (int j = 0; j < 16; ++j)
            vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)));
        const float amax = _mm512_reduce_max_ps(vmax);
        block_q8_k b;
        std::memset(&b, 0, sizeof(b));
        if (amax != 0.f) {
            // ggml keeps the first element of largest magnitude, with its sign.
            float max = 0.f;
            const __m512 va = _mm512_set1_ps(amax);
            for (int j = 0; j < 16; ++j) {
                const __mmask16 m =
                    _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)), va, _CMP_EQ_OQ);
                if (m) {
                    max = x[16 * j + __builtin_ctz(m)];
                    break;
                }
            }
            const float iscale = -127.f / max;
            const __m512 vs = _mm512_set1_ps(iscale);
            const __m512i c127 = _mm512_set1_epi32(127);
            for (int j = 0; j < 16; ++j) {
                __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * j), vs));
                q = _mm512_min_epi32(q, c127);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * j),
                                 _mm512_cvtsepi32_epi8(q));
                b.bsums[j] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
            }
            const float d = 1 / iscale;
            std::memcpy(b.d, &d, 4);
        }
        std::memcpy(y, &b, sizeof(b));
    }
}

void quant_f16(const float* x, void* dst, int64_t n);

}  // namespace

// ---------------------------------------------------------------------------------------------
// fp16 rows

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(
            dst + i,
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
    }
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(
            dst + i, m,
            _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT));
    }
}

namespace {
void dequant_f16(const void* src, float* y, int64_t n) {
    fp16_to_fp32_row(static_cast<const uint16_t*>(src), y, n);
}
void quant_f16(const float* x, void* dst, int64_t n) {
    fp32_to_fp16_row(x, static_cast<uint16_t*>(dst), n);
}
}  // namespace

// q4_1 and q8_0 run the ggml-exact kernels of qgemm-avx512.cpp (one activation row).
template <dtype T>
void vec_dot_rows_exact(int64_t n, const void* w, size_t stride, int64_t nrows, const void* a,
                        float* out) {
    find_vec_dot_tile(T)(n, w, stride, nrows, a, 0, 1, out, 0);
}

// ---------------------------------------------------------------------------------------------
// Lookup

vec_dot_rows_fn find_vec_dot_rows(dtype t) {
    switch (t) {
        case dtype::q4_0: return vec_dot_rows_nib<k_q4_0, false, 8, sizeof(block_q4_0)>;
        case dtype::q4_1: return vec_dot_rows_exact<dtype::q4_1>;
        case dtype::q5_0: return vec_dot_rows_nib<k_q5_0, false, 16, sizeof(block_q5_0)>;
        case dtype::q5_1: return vec_dot_rows_nib<k_q5_1, true, 0, sizeof(block_q5_1)>;
        case dtype::q8_0: return vec_dot_rows_exact<dtype::q8_0>;
        case dtype::q4_k: return vec_dot_rows_kq<kq_q4_k>;
        case dtype::q5_k: return vec_dot_rows_kq<kq_q5_k>;
        case dtype::q6_k: return vec_dot_rows_kq<kq_q6_k>;
        case dtype::f32: return vec_dot_rows_float<ld_f32>;
        case dtype::f16: return vec_dot_rows_float<ld_f16>;
        case dtype::bf16: return vec_dot_rows_float<ld_bf16>;
        default: return nullptr;
    }
}

dequantize_fn find_dequantize(dtype t) {
    switch (t) {
        case dtype::q4_0: return dequant_q4_0;
        case dtype::q4_1: return dequant_q4_1;
        case dtype::q5_0: return dequant_q5_0;
        case dtype::q8_0: return dequant_q8_0;
        case dtype::q4_k: return dequant_q4_k;
        case dtype::q6_k: return dequant_q6_k;
        case dtype::f16: return dequant_f16;
        default: return nullptr;
    }
}

quantize_fn find_quantize(dtype t) {
    switch (t) {
        case dtype::q8_0: return quant_q8_0;
        case dtype::q8_1: return quant_q8_1;
        case dtype::q8_k: return quant_q8_k;
        case dtype::f16: return quant_f16;
        default: return nullptr;
    }
}

}  // namespace avx512
}  // namespace cacheblend
