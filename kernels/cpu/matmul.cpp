// y = x * W^T with W in its GGUF type.
//
// q4_0 / q5_0 / q4_K / q5_K / q6_K on AVX-512 VNNI (the Qwen models): matmul_igemm, the integer
// GEMM of igemm.h (docs/kernels.md), the same bits at every m; its prefill runs on AMX tiles
// where the active level is amx.
// q4_1 / q8_0 on AVX-512 (SmolLM2): matmul_qgemm, an int8 GEMM bit-exact with ggml's vec_dot at
// every m. Other types and ISAs:
// Small m (decode): activations are quantized once to vec_dot_type(W) and each thread runs
// vec_dot_rows over its range of weight rows (int8 dot products for quantized W).
// Large m (prefill): the threads first dequantize W (a chunk of output columns at a time) into
// packed f32 panels [k][nr] shared by all, then run the register-blocked micro-kernel of the
// active ISA (ukernels.h) over a 2-D split of (rows of x) x (panels). Accumulation is f32.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/igemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants.h"
#include "kernels/cpu/ukernels.h"
#include "kernels/memory.h"

namespace cacheblend {

namespace ukr {
namespace {

constexpr int k_gen_mr = 4;
constexpr int k_gen_nr = 8;  // two SSE vectors: 4 x 8 accumulators fit the 16 xmm registers

// Portable 4-float vectors (GCC/Clang vector extensions: SSE2 on x86-64, NEON on arm64). Plain
// loops get vectorised across k by GCC with heavy shuffling, at a fraction of this speed.
typedef float v4f __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
    v4f v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

template <int MR>
void gen_tile_mr(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                 int n_valid, const float* init, bool accumulate) {
    alignas(16) float tmp[MR][k_gen_nr];
    for (int i = 0; i < MR; ++i) {
        for (int j = 0; j < k_gen_nr; ++j) {
            tmp[i][j] = j < n_valid ? (accumulate ? c[i * ldc + j] : (init ? init[j] : 0.f)) : 0.f;
        }
    }
    v4f acc[MR][2];
    for (int i = 0; i < MR; ++i) {
        acc[i][0] = load4(tmp[i]);
        acc[i][1] = load4(tmp[i] + 4);
    }
    for (int64_t k = 0; k < kc; ++k) {
        const v4f b0 = load4(b + k * k_gen_nr), b1 = load4(b + k * k_gen_nr + 4);
        for (int i = 0; i < MR; ++i) {
            const float av = a[i * lda + k];
            const v4f va = {av, av, av, av};
            acc[i][0] += va * b0;
            acc[i][1] += va * b1;
        }
    }
    for (int i = 0; i < MR; ++i) {
        std::memcpy(tmp[i], &acc[i][0], sizeof(v4f));
        std::memcpy(tmp[i] + 4, &acc[i][1], sizeof(v4f));
        for (int j = 0; j < n_valid; ++j) c[i * ldc + j] = tmp[i][j];
    }
}

void gen_tile(int mr, int64_t kc, const float* a, int64_t lda, const float* b, float* c,
              int64_t ldc, int n_valid, const float* init, bool accumulate) {
    switch (mr) {
        case 4: return gen_tile_mr<4>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 3: return gen_tile_mr<3>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 2: return gen_tile_mr<2>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        case 1: return gen_tile_mr<1>(kc, a, lda, b, c, ldc, n_valid, init, accumulate);
        default: return;
    }
}

void gen_pack_b(const float* src, int64_t ld, int n_valid, int64_t kc, float* dst) {
    for (int64_t k = 0; k < kc; ++k) {
        for (int r = 0; r < k_gen_nr; ++r) {
            dst[k * k_gen_nr + r] = r < n_valid ? src[r * ld + k] : 0.f;
        }
    }
}

const gemm_kernels k_gen_table = {k_gen_mr, k_gen_nr, gen_tile, gen_pack_b};

}  // namespace

const gemm_kernels& gemm_generic() { return k_gen_table; }

}  // namespace ukr

namespace {

// Up to this many rows of x, the quantized GEMV path beats dequantize + GEMM (q4_1, K = N = 576:
// GEMV ~5 us per row vs GEMM ~50 us of packing + ~2.5 us per row on one Zen 5 core).
constexpr int64_t k_gemv_max_m = 16;
// Elements of K dequantized at once while packing: a multiple of every block size (32, 256).
constexpr int64_t k_pack_kseg = 256;
// Bytes of packed f32 weights per chunk of output columns (shared by the threads, in L2/L3).
constexpr size_t k_pack_bytes = size_t(4) << 20;
// Rows of x per block, reused from L2 across the panels of a chunk.
constexpr int64_t k_mc_rows = 192;

// Per-thread scratch that survives between calls (no page faults on the hot path).
float* scratch_floats(aligned_array<float>& buf, size_t n) {
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}

void matmul_gemv(thread_pool& pool, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                 float* y, int64_t ldy, const float* bias) {
    const dtype vt = vec_dot_type(w.type);
    const int64_t k = w.cols;
    const size_t a_row = dtype_row_bytes(vt, k);
    static thread_local aligned_array<unsigned char> qbuf;
    if (qbuf.size() < a_row * m) qbuf.resize(a_row * m);
    unsigned char* qa = qbuf.data();
    for (int64_t i = 0; i < m; ++i) quantize_row(vt, x + i * ldx, qa + i * a_row, k);

    const auto* wbase = static_cast<const unsigned char*>(w.data);
    // Rows per block: the block's weights stay in L1/L2 while every activation row passes.
    constexpr int64_t k_rows_blk = 32;
    const int64_t n_blocks = (w.rows + k_rows_blk - 1) / k_rows_blk;
    pool.parallel_for(n_blocks, 4, [&](int64_t b0, int64_t b1) {
        const int64_t r0 = b0 * k_rows_blk;
        const int64_t r1 = std::min(w.rows, b1 * k_rows_blk);
        if (m == 1) {
            vec_dot_rows(w.type, k, wbase + r0 * w.row_bytes, w.row_bytes, r1 - r0, qa, y + r0);
        } else {
            for (int64_t r = r0; r < r1; r += k_rows_blk) {
                const int64_t nr = std::min(k_rows_blk, r1 - r);
                for (int64_t i = 0; i < m; ++i) {
                    vec_dot_rows(w.type, k, wbase + r * w.row_bytes, w.row_bytes, nr,
                                 qa + i * a_row, y + i * ldy + r);
                }
            }
        }
        if (bias) {
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t r = r0; r < r1; ++r) y[i * ldy + r] += bias[r];
            }
        }
    });
}

// Types with a native int8 GEMM (vec_dot_tile_native): activations quantized to vec_dot_type
// for every m, outputs from vec_dot_tile, so each output has the bits of the decode GEMV
// (ggml's vec_dot, bit for bit, on AVX-512) whatever m, the row's position and the thread split.
void matmul_qgemm(thread_pool& pool, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                  float* y, int64_t ldy, const float* bias) {
    const dtype vt = vec_dot_type(w.type);
    const int64_t k = w.cols;
    const size_t a_row = dtype_row_bytes(vt, k);
    static thread_local aligned_array<unsigned char> qbuf;
    if (qbuf.size() < a_row * m) qbuf.resize(a_row * m);
    unsigned char* qa = qbuf.data();
    if (m == 1) {
        quantize_row(vt, x, qa, k);
    } else {
        pool.parallel_for(m, 8, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) quantize_row(vt, x + i * ldx, qa + i * a_row, k);
        });
    }
    const auto* wbase = static_cast<const unsigned char*>(w.data);
    // Tasks: blocks of weight rows x blocks of activation rows. A row block's weights stay in L1/L2
    // while its activation rows pass.
    constexpr int64_t k_rows_blk = 32;
    constexpr int64_t k_act_blk = 64;
    const int64_t n_rb = (w.rows + k_rows_blk - 1) / k_rows_blk;
    const int64_t n_ab = (m + k_act_blk - 1) / k_act_blk;
    pool.parallel_for(n_rb * n_ab, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t ab = t / n_rb, rb = t % n_rb;
            const int64_t r0 = rb * k_rows_blk, r1 = std::min(w.rows, r0 + k_rows_blk);
            const int64_t i0 = ab * k_act_blk, i1 = std::min(m, i0 + k_act_blk);
            vec_dot_tile(w.type, k, wbase + r0 * w.row_bytes, w.row_bytes, r1 - r0,
                         qa + i0 * a_row, a_row, i1 - i0, y + i0 * ldy + r0, ldy);
            if (bias) {
                for (int64_t i = i0; i < i1; ++i) {
                    for (int64_t r = r0; r < r1; ++r) y[i * ldy + r] += bias[r];
                }
            }
        }
    });
}

// The integer GEMM of igemm.h (q4_0, q5_0, q4_K, q5_K, q6_K on AVX-512 VNNI): activations
// quantized once (ggml's q8_0 / q8_K integers), then raw-block GEMV for few rows or packed-panel
// GEMM for many, with the same bits for every output either way (batch invariance).
constexpr int64_t k_igemm_gemv_max_m = 8;

void matmul_igemm(thread_pool& pool, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                  float* y, int64_t ldy, const float* bias) {
    const int64_t k = w.cols;
    // The calling thread's buffer; the pool's threads reach it through this reference (a
    // thread_local named inside the lambda would be each thread's own).
    static thread_local igemm::act_buffer acts_tls;
    igemm::act_buffer& acts = acts_tls;
    acts.reserve(w.type, k, m);
    if (m == 1) {
        acts.quantize_rows(x, ldx, 0, 1);
    } else {
        pool.parallel_for(m, 8, [&](int64_t i0, int64_t i1) { acts.quantize_rows(x, ldx, i0, i1); });
    }
    const igemm::acts a = acts.view();
    const auto* wbase = static_cast<const unsigned char*>(w.data);
    const bool gemv = m <= k_igemm_gemv_max_m;
    const bool amx = !gemv && igemm::prefill_kernel_active() == igemm::prefill_kernel::amx;
    // Tasks of whole panels: a panel is unpacked once and meets every activation row.
    const int64_t blk = igemm::panel_cols;
    const int64_t n_blocks = (w.rows + blk - 1) / blk;
    pool.parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
        const int64_t r0 = b0 * blk, r1 = std::min(w.rows, b1 * blk);
        if (gemv) {
            igemm::gemv_rows(w.type, k, wbase + r0 * w.row_bytes, w.row_bytes, r1 - r0, a, 0, m, y + r0, ldy);
        } else if (amx) {
            igemm::gemm_rows_amx(w.type, k, wbase + r0 * w.row_bytes, w.row_bytes, r1 - r0, a, 0, m, y + r0, ldy);
        } else {
            igemm::gemm_rows(w.type, k, wbase + r0 * w.row_bytes, w.row_bytes, r1 - r0, a, 0, m, y + r0, ldy);
        }
        if (bias) {
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t r = r0; r < r1; ++r) y[i * ldy + r] += bias[r];
            }
        }
    });
}

// Packs columns [n0, n0 + n_panels*nr) of W (all of K) into bp[panel][k][nr].
void pack_chunk(const ukr::gemm_kernels& kern, const weight_view& w, int64_t n0, int64_t n_panels,
                float* bp, int ith, int nth) {
    const int nr = kern.nr;
    const int64_t k = w.cols;
    const int64_t n_kseg = (k + k_pack_kseg - 1) / k_pack_kseg;
    const int64_t n_tasks = n_panels * n_kseg;
    const auto* wbase = static_cast<const unsigned char*>(w.data);
    const dtype_traits* tr = dtype_info(w.type);
    static thread_local aligned_array<float> tmp_buf;
    float* tmp = nullptr;
    if (w.type != dtype::f32) tmp = scratch_floats(tmp_buf, size_t(nr) * k_pack_kseg);

    for (int64_t t = n_tasks * ith / nth; t < n_tasks * (ith + 1) / nth; ++t) {
        const int64_t p = t / n_kseg;
        const int64_t k0 = (t % n_kseg) * k_pack_kseg;
        const int64_t kc = std::min(k_pack_kseg, k - k0);
        const int64_t row0 = n0 + p * nr;
        const int n_valid = static_cast<int>(std::min<int64_t>(nr, w.rows - row0));
        float* dst = bp + p * k * nr + k0 * nr;
        if (w.type == dtype::f32) {
            const float* src = reinterpret_cast<const float*>(wbase + row0 * w.row_bytes) + k0;
            kern.pack_b(src, static_cast<int64_t>(w.row_bytes / sizeof(float)), n_valid, kc, dst);
        } else {
            const size_t off = static_cast<size_t>(k0 / tr->block_elems) * tr->block_bytes;
            for (int r = 0; r < n_valid; ++r) {
                dequantize_row(w.type, wbase + (row0 + r) * w.row_bytes + off, tmp + r * kc, kc);
            }
            kern.pack_b(tmp, kc, n_valid, kc, dst);
        }
    }
}

void matmul_gemm(thread_pool& pool, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                 float* y, int64_t ldy, const float* bias) {
    const ukr::gemm_kernels& kern = ukr::gemm_for(cpu_isa_active());
    const int64_t mr = kern.mr, nr = kern.nr;
    const int64_t k = w.cols;
    const int64_t n = w.rows;
    const int nth = pool.size();

    // Output columns per chunk: as many panels as fit the packing budget.
    const int64_t panel_bytes = k * nr * static_cast<int64_t>(sizeof(float));
    const int64_t n_panels_all = (n + nr - 1) / nr;
    const int64_t chunk_panels =
        std::min(n_panels_all, std::max<int64_t>(nth, k_pack_bytes / panel_bytes));

    static thread_local aligned_array<float> bp_buf;
    float* bp = scratch_floats(bp_buf, static_cast<size_t>(chunk_panels * k * nr));

    const int64_t m_tiles = (m + mr - 1) / mr;
    for (int64_t p0 = 0; p0 < n_panels_all; p0 += chunk_panels) {
        const int64_t n_panels = std::min(chunk_panels, n_panels_all - p0);
        const int64_t n0 = p0 * nr;
        pool.run([&](int ith, int nth_) { pack_chunk(kern, w, n0, n_panels, bp, ith, nth_); });

        // 2-D split: rows of x across tm threads, panels across tn threads. Splitting rows costs
        // nothing extra (the panels are shared), so prefer it whenever there are enough rows.
        int tm = nth, tn = 1;
        if (m_tiles < 2 * static_cast<int64_t>(nth)) {
            tn = static_cast<int>(std::min<int64_t>(nth, n_panels));
            tm = std::max(1, nth / tn);
        }
        pool.run([&](int ith, int) {
            if (ith >= tm * tn) return;
            const int im = ith / tn, in = ith % tn;
            const int64_t t0 = m_tiles * im / tm, t1 = m_tiles * (im + 1) / tm;
            const int64_t q0 = n_panels * in / tn, q1 = n_panels * (in + 1) / tn;
            const int64_t mc_tiles = std::max<int64_t>(1, k_mc_rows / mr);
            for (int64_t tb = t0; tb < t1; tb += mc_tiles) {
                const int64_t te = std::min(t1, tb + mc_tiles);
                for (int64_t q = q0; q < q1; ++q) {
                    const int64_t col = n0 + q * nr;
                    const int n_valid = static_cast<int>(std::min<int64_t>(nr, n - col));
                    const float* b = bp + q * k * nr;
                    const float* init = bias ? bias + col : nullptr;
                    for (int64_t t = tb; t < te; ++t) {
                        const int64_t row = t * mr;
                        const int rows = static_cast<int>(std::min<int64_t>(mr, m - row));
                        kern.tile(rows, k, x + row * ldx, ldx, b, y + row * ldy + col, ldy,
                                  n_valid, init, false);
                    }
                }
            }
        });
    }
}

}  // namespace

void matmul(thread_pool& pool, const weight_view& w, const float* x, int64_t m, int64_t ldx,
            float* y, int64_t ldy, const float* bias) {
    if (m <= 0 || w.rows <= 0) return;
    if (w.cols <= 0) {
        for (int64_t i = 0; i < m; ++i) {
            for (int64_t r = 0; r < w.rows; ++r) y[i * ldy + r] = bias ? bias[r] : 0.f;
        }
        return;
    }
    if (igemm::active(w.type)) {
        matmul_igemm(pool, w, x, m, ldx, y, ldy, bias);
    } else if (vec_dot_tile_native(w.type)) {
        matmul_qgemm(pool, w, x, m, ldx, y, ldy, bias);
    } else if (m <= k_gemv_max_m) {
        matmul_gemv(pool, w, x, m, ldx, y, ldy, bias);
    } else {
        matmul_gemm(pool, w, x, m, ldx, y, ldy, bias);
    }
}

}  // namespace cacheblend
