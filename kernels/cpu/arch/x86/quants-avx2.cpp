// AVX2 + FMA + F16C quantization kernels; called only when cpu_isa_active() == avx2.
//
// No VNNI here: byte products go through vpmaddubsw (u8 x s8 -> s16 pairs, saturating) and
// vpmaddwd (-> s32). Operands are kept small enough that no pair can saturate: nibbles (<= 31)
// times activations (|a| <= 127), or |w| (<= 128) times sign-adjusted activations for q8_0.
// Several weight rows per call share each activation load; one FMA per block and row.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/quants-impl.h"

namespace cacheblend {
namespace avx2 {
namespace {

using namespace qimpl;

inline float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

// 0x10 in byte j where bit j of x is set (ggml's bytes_from_bits_32, masked).
inline __m256i bit4_bytes(uint32_t x) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
    const __m256i bits = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    b = _mm256_or_si256(b, bits);
    b = _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

inline uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// u8 x s8 dot of 32 bytes -> 8 s32 lanes.
inline __m256i dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// ---------------------------------------------------------------------------------------------
// 4/5-bit types, two blocks per step. The activation is prepared per chunk in a nibble layout:
// pair p holds lo = [a(2p)[0..15] | a(2p+1)[0..15]] and hi = the elements 16..31, so one 32-byte
// load of each block pair's nibbles pairs with it directly (low 128 bits = block 2p).

constexpr int kc_blocks = 128;

// Software prefetch distance for weight rows (bytes ahead, within the call's rows): interleaved
// row streams otherwise leave much of the DRAM bandwidth unused.
constexpr size_t pf_min = 8192;

inline size_t pf_distance(int r, size_t stride) {
    const size_t d = static_cast<size_t>(r) * stride;
    return d < pf_min ? pf_min : d;
}

inline void prefetch_if(const uint8_t* p, const uint8_t* end) {
    if (p < end) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

struct act_pair {
    alignas(32) int8_t lo[kc_blocks * 16];
    alignas(32) int8_t hi[kc_blocks * 16];
    alignas(32) float ds[kc_blocks * 2];          // {d, s} per block (s = 0 for q8_0)
    alignas(32) int32_t corr[kc_blocks / 2 * 8];  // -offset * 4-byte sums, per block pair
};

void prep_pair(const uint8_t* a, bool q8_1, int nb, int offset, act_pair* p) {
    const size_t ablk = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const int nb2 = (nb + 1) & ~1;
    for (int b = 0; b < nb2; ++b) {
        __m256i q = _mm256_setzero_si256();
        float d = 0.f, sv = 0.f;
        if (b < nb) {
            const uint8_t* blk = a + b * ablk;
            q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (q8_1 ? 4 : 2)));
            d = half(blk);
            if (q8_1) sv = half(blk + 2);
        }
        _mm_store_si128(reinterpret_cast<__m128i*>(p->lo + 16 * b), _mm256_castsi256_si128(q));
        _mm_store_si128(reinterpret_cast<__m128i*>(p->hi + 16 * b), _mm256_extracti128_si256(q, 1));
        p->ds[2 * b] = d;
        p->ds[2 * b + 1] = sv;
    }
    if (offset) {
        const __m256i off = _mm256_set1_epi8(static_cast<char>(offset));
        for (int pr = 0; pr < nb2 / 2; ++pr) {
            const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(p->lo + 32 * pr));
            const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(p->hi + 32 * pr));
            const __m256i s16 =
                _mm256_add_epi16(_mm256_maddubs_epi16(off, lo), _mm256_maddubs_epi16(off, hi));
            const __m256i c = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            _mm256_store_si256(reinterpret_cast<__m256i*>(p->corr + 8 * pr),
                               _mm256_sub_epi32(_mm256_setzero_si256(), c));
        }
    }
}

// Block layout of each type: bytes, offsets of qs / qh, whether it has a min (m * s term).
struct w_q4_0 {
    static constexpr size_t bytes = sizeof(block_q4_0), qs = 2, qh = 0;
    static constexpr bool has_min = false, five = false;
};
struct w_q4_1 {
    static constexpr size_t bytes = sizeof(block_q4_1), qs = 4, qh = 0;
    static constexpr bool has_min = true, five = false;
};
struct w_q5_0 {
    static constexpr size_t bytes = sizeof(block_q5_0), qs = 6, qh = 2;
    static constexpr bool has_min = false, five = true;
};
struct w_q5_1 {
    static constexpr size_t bytes = sizeof(block_q5_1), qs = 8, qh = 4;
    static constexpr bool has_min = true, five = true;
};

struct pair_acc {
    __m256 f;
    __m128 m;  // lanes 1 and 3: m * s of the pairs' blocks
};

// One block pair (or a single last block when !two) of one row.
template <typename W, bool two>
inline void pair_step(const uint8_t* wb, __m256i alo, __m256i ahi, __m256i corr, __m128 ds,
                      pair_acc& acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + W::qs));
    const __m128i q1 =
        two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + W::bytes + W::qs))
            : _mm_setzero_si128();
    const __m256i v = _mm256_set_m128i(q1, q0);
    __m256i lo = _mm256_and_si256(v, m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (W::five) {
        const uint32_t h0 = load32(wb + W::qh);
        const uint32_t h1 = two ? load32(wb + W::bytes + W::qh) : 0;
        lo = _mm256_or_si256(lo, bit4_bytes((h0 & 0xFFFF) | (h1 << 16)));
        hi = _mm256_or_si256(hi, bit4_bytes((h0 >> 16) | (h1 & 0xFFFF0000u)));
    }
    // s16 pairs stay below 2 * 2 * 31 * 127: no saturation.
    const __m256i p16 =
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
    __m256i isum = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    if (!W::has_min) isum = _mm256_add_epi32(isum, corr);
    // [d0, m0, d1, m1] (the m slots hold qs/qh bits without a min: they are never used).
    const __m128i dm0 = _mm_cvtsi32_si128(static_cast<int>(load32(wb)));
    const __m128i dm =
        two ? _mm_insert_epi32(dm0, static_cast<int>(load32(wb + W::bytes)), 1) : dm0;
    const __m128 f = _mm_mul_ps(_mm_cvtph_ps(dm), ds);
    if (W::has_min) acc.m = _mm_add_ps(acc.m, f);
    const __m256 sc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(f),
                                               _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
    acc.f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), sc, acc.f);
}

template <typename W, int R>
void rows_pair(const uint8_t* w, size_t stride, const act_pair& p, int nb, bool offset, float* out,
               bool first, const uint8_t* pf_end) {
    const size_t pf = pf_distance(R, stride);
    pair_acc acc[R];
    for (int r = 0; r < R; ++r) {
        acc[r].f = _mm256_setzero_ps();
        acc[r].m = _mm_setzero_ps();
    }
    const int npairs = nb / 2;
    for (int pr = 0; pr <= npairs; ++pr) {
        const bool tail = pr == npairs;
        if (tail && nb % 2 == 0) break;
        const __m256i alo = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.lo + 32 * pr));
        const __m256i ahi = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.hi + 32 * pr));
        const __m256i corr =
            offset ? _mm256_load_si256(reinterpret_cast<const __m256i*>(p.corr + 8 * pr))
                   : _mm256_setzero_si256();
        const __m128 ds = _mm_load_ps(p.ds + 4 * pr);
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * stride + 2 * pr * W::bytes;
            if (tail) {
                pair_step<W, false>(wb, alo, ahi, corr, ds, acc[r]);
            } else {
                prefetch_if(wb + pf, pf_end);  // a pair is 36-48 bytes
                pair_step<W, true>(wb, alo, ahi, corr, ds, acc[r]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        float v = hsum8(acc[r].f);
        if (W::has_min) {
            const __m128 m = acc[r].m;
            v += _mm_cvtss_f32(_mm_movehdup_ps(m)) + _mm_cvtss_f32(_mm_permute_ps(m, 3));
        }
        out[r] = first ? v : out[r] + v;
    }
}

template <typename W, bool q8_1, int offset>
void vec_dot_rows_32(int64_t n, const void* vw, size_t stride, int64_t nrows, const void* va,
                     float* out) {
    const uint8_t* w = static_cast<const uint8_t*>(vw);
    const uint8_t* a = static_cast<const uint8_t*>(va);
    const size_t ablk = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const int64_t nb = n / qk;
    act_pair p;
    for (int64_t b0 = 0; b0 < nb; b0 += kc_blocks) {
        const int cnb = static_cast<int>(nb - b0 < kc_blocks ? nb - b0 : kc_blocks);
        prep_pair(a + b0 * ablk, q8_1, cnb, offset, &p);
        const uint8_t* wc = w + b0 * W::bytes;
        const uint8_t* end = wc + nrows * stride;
        const bool first = b0 == 0, off = offset != 0;
        int64_t r = 0;
        for (; r + 4 <= nrows; r += 4) {
            rows_pair<W, 4>(wc + r * stride, stride, p, cnb, off, out + r, first, end);
        }
        switch (nrows - r) {
            case 3:
                rows_pair<W, 3>(wc + r * stride, stride, p, cnb, off, out + r, first, end);
                break;
            case 2:
                rows_pair<W, 2>(wc + r * stride, stride, p, cnb, off, out + r, first, end);
                break;
            case 1:
                rows_pair<W, 1>(wc + r * stride, stride, p, cnb, off, out + r, first, end);
                break;
            default: break;
        }
    }
}

// q8_0 x q8_0: |w| x sign(a, w) keeps vpmaddubsw pairs within s16 (128 * 127 * 2). Weights may
// hold -128; activations from quantize_row never do (sign(-128) would overflow).
template <int R>
void rows_q8_0(const uint8_t* w, size_t stride, const uint8_t* a, int64_t nb, float* out,
               const uint8_t* pf_end) {
    const size_t pf = pf_distance(R, stride);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* ab = a + b * sizeof(block_q8_0);
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + 2));
        const float da = half(ab);
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * stride + b * sizeof(block_q8_0);
            prefetch_if(wb + pf, pf_end);
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 2));
            const __m256i isum = dot_us(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv));
            acc[r] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(half(wb) * da), acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
}

void vec_dot_rows_q8_0(int64_t n, const void* vw, size_t stride, int64_t nrows, const void* va,
                       float* out) {
    const uint8_t* w = static_cast<const uint8_t*>(vw);
    const uint8_t* a = static_cast<const uint8_t*>(va);
    const int64_t nb = n / qk;
    const uint8_t* end = w + nrows * stride;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) rows_q8_0<4>(w + r * stride, stride, a, nb, out + r, end);
    switch (nrows - r) {
        case 3: rows_q8_0<3>(w + r * stride, stride, a, nb, out + r, end); break;
        case 2: rows_q8_0<2>(w + r * stride, stride, a, nb, out + r, end); break;
        case 1: rows_q8_0<1>(w + r * stride, stride, a, nb, out + r, end); break;
        default: break;
    }
}

// ---------------------------------------------------------------------------------------------
// k-quants x q8_K

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

// Broadcasts 16-bit element j of each 128-bit half: pshufb control for words (2j, 2j+1).
inline __m256i word_bcast(int j) {
    return _mm256_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8)));
}

template <bool five>
float dot_k4_row(const uint8_t* x, const block_q8_k* y, int64_t nb) {
    const size_t bytes = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 macc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; ++i, x += bytes) {
        const block_q4_k* x4 = reinterpret_cast<const block_q4_k*>(x);
        const block_q5_k* x5 = reinterpret_cast<const block_q5_k*>(x);
        const uint8_t* qs = five ? x5->qs : x4->qs;
        const __m128i sm = unpack_k4_scales(five ? x5->scales : x4->scales);
        // Mins: sum_j mn_j * (bsums[2j] + bsums[2j+1]).
        const __m128i bs_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y[i].bsums));
        const __m128i bs_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y[i].bsums + 8));
        const __m128i prod = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm)),
                                            _mm_hadd_epi16(bs_lo, bs_hi));
        const float yd = q8k_d(&y[i]);
        const float dmin = yd * half(x + 2);
        macc = _mm_fmadd_ps(_mm_cvtepi32_ps(prod), _mm_set1_ps(dmin), macc);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const __m256i qh = five ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x5->qh))
                                : _mm256_setzero_si256();
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                const __m256i b10 = _mm256_set1_epi8(0x10);
                // Bit 2c of qh[l] -> bit 4 for the low half, bit 2c+1 for the high half.
                const __m256i h0 = 2 * c <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * c)
                                              : _mm256_srli_epi16(qh, 2 * c - 4);
                const __m256i h1 = 2 * c + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - 2 * c)
                                                  : _mm256_srli_epi16(qh, 2 * c - 3);
                lo = _mm256_or_si256(lo, _mm256_and_si256(h0, b10));
                hi = _mm256_or_si256(hi, _mm256_and_si256(h1, b10));
            }
            const __m256i a0 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * c));
            const __m256i a1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * c + 32));
            const __m256i s0 = _mm256_shuffle_epi8(sc16, word_bcast(2 * c));
            const __m256i s1 = _mm256_shuffle_epi8(sc16, word_bcast(2 * c + 1));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s0));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s1));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(yd * half(x)), acc);
    }
    macc = _mm_hadd_ps(macc, macc);
    macc = _mm_hadd_ps(macc, macc);
    return hsum8(acc) - _mm_cvtss_f32(macc);
}

float dot_q6_k_row(const uint8_t* x, const block_q8_k* y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m3 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i, x += sizeof(block_q6_k)) {
        const block_q6_k* b = reinterpret_cast<const block_q6_k*>(x);
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        // Stored values are q + 32: subtract 32 * sum_j sc_j * bsums_j.
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h));
            const __m256i ql1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h));
            const __m256i g[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4),
                                _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4)),
            };
            for (int k = 0; k < 4; ++k) {
                // 32 elements = sub-blocks 8h+2k (low 128 bits) and 8h+2k+1 (high 128 bits).
                const int j = 8 * h + 2 * k;
                const __m256i s = _mm256_set_m128i(_mm_set1_epi16(b->scales[j + 1]),
                                                   _mm_set1_epi16(b->scales[j]));
                const __m256i a = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(y[i].qs + 128 * h + 32 * k));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(g[k], a), s));
            }
        }
        acc = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(isum),
            _mm256_set1_ps(q8k_d(&y[i]) * half(reinterpret_cast<const uint8_t*>(&b->d))), acc);
    }
    return hsum8(acc);
}

// pshufb control that broadcasts word 2j of each 16-byte half into the low half and word 2j+1
// into the high half: pairs the 8 scales of a 128-element half with 32-element groups j.
inline __m256i scale_pair_ctrl(int j) {
    const short lo = static_cast<short>((4 * j) | ((4 * j + 1) << 8));
    const short hi = static_cast<short>((4 * j + 2) | ((4 * j + 3) << 8));
    return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
}

float dot_q2_k_row(const uint8_t* x, const block_q8_k* y, int64_t nb) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i, x += sizeof(block_q2_k)) {
        const block_q2_k* b = reinterpret_cast<const block_q2_k*>(x);
        const float yd = q8k_d(&y[i]);
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
        // Mins: sum_j (sc_j >> 4) * bsums_j.
        const __m256i mins =
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0F)));
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
        const __m256i msum = _mm256_madd_epi16(mins, bs);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(0x0F)));
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * h));
            const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            for (int j = 0; j < 4; ++j) {
                // Bytes 0..15: sub-block 8h+2j, bytes 16..31: 8h+2j+1.
                const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i a = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(y[i].qs + 128 * h + 32 * j));
                const __m256i s = _mm256_shuffle_epi8(sch, scale_pair_ctrl(j));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v, a), s));
            }
        }
        const float d = yd * half(reinterpret_cast<const uint8_t*>(&b->d));
        const float dmin = yd * half(reinterpret_cast<const uint8_t*>(&b->dmin));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmin), acc);
    }
    return hsum8(acc);
}

float dot_q3_k_row(const uint8_t* x, const block_q8_k* y, int64_t nb) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i m1 = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i, x += sizeof(block_q3_k)) {
        const block_q3_k* b = reinterpret_cast<const block_q3_k*>(x);
        // 16 signed 6-bit scales (ggml's unpacking), as s16.
        uint32_t aux[3];
        std::memcpy(aux, b->scales, 12);
        const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f;
        const __m128i sc8 = _mm_sub_epi8(
            _mm_set_epi32(static_cast<int>(((aux[1] >> 4) & k2) | (((aux[2] >> 6) & k1) << 4)),
                          static_cast<int>(((aux[0] >> 4) & k2) | (((aux[2] >> 4) & k1) << 4)),
                          static_cast<int>((aux[1] & k2) | (((aux[2] >> 2) & k1) << 4)),
                          static_cast<int>((aux[0] & k2) | (((aux[2] >> 0) & k1) << 4))),
            _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        // Values are u - 4 with u = q2 | hbit << 2 in [0, 7]: subtract 4 * sum_j sc_j * bsums_j.
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 2));
        const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->hmask));
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * h));
            const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            for (int j = 0; j < 4; ++j) {
                const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), m1);
                const __m256i v = _mm256_or_si256(q2, _mm256_slli_epi16(hb, 2));
                const __m256i a = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(y[i].qs + 128 * h + 32 * j));
                const __m256i s = _mm256_shuffle_epi8(sch, scale_pair_ctrl(j));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v, a), s));
            }
        }
        const float d = q8k_d(&y[i]) * half(reinterpret_cast<const uint8_t*>(&b->d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
    }
    return hsum8(acc);
}

template <float (*Dot)(const uint8_t*, const block_q8_k*, int64_t)>
void vec_dot_rows_kq(int64_t n, const void* vw, size_t stride, int64_t nrows, const void* va,
                     float* out) {
    const uint8_t* w = static_cast<const uint8_t*>(vw);
    const block_q8_k* y = static_cast<const block_q8_k*>(va);
    for (int64_t r = 0; r < nrows; ++r) out[r] = Dot(w + r * stride, y, n / qk_k);
}

// ---------------------------------------------------------------------------------------------
// f32 / f16 / bf16 rows

struct ld_f32 {
    static __m256 load(const void* p, int64_t i) {
        return _mm256_loadu_ps(static_cast<const float*>(p) + i);
    }
    static float scalar(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};
struct ld_f16 {
    static __m256 load(const void* p, int64_t i) {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
    }
    static float scalar(const void* p, int64_t i) {
        return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
    }
};
struct ld_bf16 {
    static __m256 load(const void* p, int64_t i) {
        const __m128i v =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    }
    static float scalar(const void* p, int64_t i) {
        const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

template <typename L, int R>
void float_rows(int64_t n, const uint8_t* w, size_t stride, const void* a, float* out) {
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a0 = L::load(a, i), a1 = L::load(a, i + 8);
        for (int r = 0; r < R; ++r) {
            acc0[r] = _mm256_fmadd_ps(L::load(w + r * stride, i), a0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(L::load(w + r * stride, i + 8), a1, acc1[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        float v = hsum8(_mm256_add_ps(acc0[r], acc1[r]));
        for (int64_t j = i; j < n; ++j) v += L::scalar(w + r * stride, j) * L::scalar(a, j);
        out[r] = v;
    }
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

inline __m256 u8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

void dequant_q4_1(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q4_1), y += qk) {
        const __m256 d = _mm256_set1_ps(half(x)), m = _mm256_set1_ps(half(x + 2));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 4));
        const __m128i lo = _mm_and_si128(q, m4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int k = 0; k < 4; ++k) {
            _mm256_storeu_ps(y + 8 * k, _mm256_add_ps(_mm256_mul_ps(u8x8_to_ps(parts[k]), d), m));
        }
    }
}

void dequant_q4_0(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i c8 = _mm256_set1_epi32(8);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q4_0), y += qk) {
        const __m256 d = _mm256_set1_ps(half(x));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2));
        const __m128i lo = _mm_and_si128(q, m4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int k = 0; k < 4; ++k) {
            const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[k]), c8);
            _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}

void dequant_q8_0(const void* src, float* y, int64_t n) {
    const uint8_t* x = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / qk; ++i, x += sizeof(block_q8_0), y += qk) {
        const __m256 d = _mm256_set1_ps(half(x));
        for (int k = 0; k < 4; ++k) {
            const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + 2 + 8 * k));
            _mm256_storeu_ps(y + 8 * k,
                             _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Activation quantization (byte-identical to the generic code)

template <bool q8_1>
void quant_q8(const float* x, void* dst, int64_t n) {
    uint8_t* y = static_cast<uint8_t*>(dst);
    const size_t bs = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / qk; ++i, x += qk, y += bs) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 4; ++k) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[k]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        // ggml's AVX quantize_row_q8_0/q8_1: id = 127 / amax, round half to even.
        const float d = amax / 127.f;
        const float id = amax != 0.f ? 127.f / amax : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; ++k) {
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], vid),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        const uint16_t dh = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        std::memcpy(y, &dh, 2);
        // Pack 32 s32 -> 32 s8 (values are within [-127, 127]), fixing the lane interleave.
        __m256i p0 = _mm256_packs_epi32(q[0], q[1]);
        __m256i p1 = _mm256_packs_epi32(q[2], q[3]);
        __m256i p = _mm256_packs_epi16(p0, p1);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + (q8_1 ? 4 : 2)), p);
        if (q8_1) {
            __m256i s =
                _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
            const int sum = _mm_cvtsi128_si32(s4);
            const uint16_t sh = static_cast<uint16_t>(
                _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT));
            std::memcpy(y + 2, &sh, 2);
        }
    }
}

void quant_q8_0(const float* x, void* dst, int64_t n) { quant_q8<false>(x, dst, n); }
void quant_q8_1(const float* x, void* dst, int64_t n) { quant_q8<true>(x, dst, n); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// fp16 rows

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(
            dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
    for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) dst[i] = static_cast<uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

namespace {
void dequant_f16(const void* src, float* y, int64_t n) {
    fp16_to_fp32_row(static_cast<const uint16_t*>(src), y, n);
}
void quant_f16(const float* x, void* dst, int64_t n) {
    fp32_to_fp16_row(x, static_cast<uint16_t*>(dst), n);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Lookup

vec_dot_rows_fn find_vec_dot_rows(dtype t) {
    switch (t) {
        case dtype::q4_0: return vec_dot_rows_32<w_q4_0, false, 8>;
        case dtype::q4_1: return vec_dot_rows_32<w_q4_1, true, 0>;
        case dtype::q5_0: return vec_dot_rows_32<w_q5_0, false, 16>;
        case dtype::q5_1: return vec_dot_rows_32<w_q5_1, true, 0>;
        case dtype::q8_0: return vec_dot_rows_q8_0;
        case dtype::q2_k: return vec_dot_rows_kq<dot_q2_k_row>;
        case dtype::q3_k: return vec_dot_rows_kq<dot_q3_k_row>;
        case dtype::q4_k: return vec_dot_rows_kq<dot_k4_row<false>>;
        case dtype::q5_k: return vec_dot_rows_kq<dot_k4_row<true>>;
        case dtype::q6_k: return vec_dot_rows_kq<dot_q6_k_row>;
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
        case dtype::q8_0: return dequant_q8_0;
        case dtype::f16: return dequant_f16;
        default: return nullptr;
    }
}

quantize_fn find_quantize(dtype t) {
    switch (t) {
        case dtype::q8_0: return quant_q8_0;
        case dtype::q8_1: return quant_q8_1;
        case dtype::f16: return quant_f16;
        default: return nullptr;
    }
}

}  // namespace avx2
}  // namespace cacheblend
