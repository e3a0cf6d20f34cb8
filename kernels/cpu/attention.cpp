// Flash-style attention: selected query rows against an f16 KV cache, causal by absolute position.
//
// A task is (block of queries) x (KV head) [x (range of key tiles) when there are too few tasks
// to keep every thread busy, e.g. a single decode query]. The query heads of one KV group are
// processed together, so each K/V tile is converted from f16 once and feeds G x BQ query rows.
// Per key tile: S = Q K^T and O += P V run on the GEMM micro-kernel of the active ISA; the online
// softmax works in log2 units (Q is pre-scaled by scale * log2 e) with f32 accumulation.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ukernels.h"
#include "kernels/fp16.h"
#include "kernels/memory.h"

namespace cacheblend {

namespace ukr {
namespace {

constexpr int k_gen_nr = 8;  // must match gemm_generic().nr

void gen_load_k(const uint16_t* k, int64_t ld, int n_valid, int head_dim, float* kt) {
    for (int p = 0; p < k_key_tile / k_gen_nr; ++p) {
        float* panel = kt + static_cast<int64_t>(p) * head_dim * k_gen_nr;
        for (int d = 0; d < head_dim; ++d) {
            for (int c = 0; c < k_gen_nr; ++c) {
                const int j = p * k_gen_nr + c;
                panel[d * k_gen_nr + c] = j < n_valid ? fp16_to_fp32(k[j * ld + d]) : 0.f;
            }
        }
    }
}

void gen_load_v(const uint16_t* v, int64_t ld, int n_valid, int head_dim, float* vt) {
    const int n_panels = (head_dim + k_gen_nr - 1) / k_gen_nr;
    for (int p = 0; p < n_panels; ++p) {
        float* panel = vt + static_cast<int64_t>(p) * k_key_tile * k_gen_nr;
        for (int j = 0; j < k_key_tile; ++j) {
            for (int c = 0; c < k_gen_nr; ++c) {
                const int d = p * k_gen_nr + c;
                panel[j * k_gen_nr + c] =
                    (j < n_valid && d < head_dim) ? fp16_to_fp32(v[j * ld + d]) : 0.f;
            }
        }
    }
}

void gen_softmax(float* s, int64_t ld, int rows, const int* limit, float* m, float* l,
                 float* alpha) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int r = 0; r < rows; ++r) {
        float* row = s + r * ld;
        const int n = limit[r];
        float mx = neg_inf;
        for (int c = 0; c < n; ++c) mx = std::max(mx, row[c]);
        const float m_new = std::max(m[r], mx);
        if (m_new == neg_inf) {
            alpha[r] = 1.f;
            std::fill(row, row + k_key_tile, 0.f);
            continue;
        }
        alpha[r] = std::exp2(m[r] - m_new);
        float sum = 0.f;
        for (int c = 0; c < n; ++c) {
            row[c] = std::exp2(row[c] - m_new);
            sum += row[c];
        }
        for (int c = n; c < k_key_tile; ++c) row[c] = 0.f;
        l[r] = l[r] * alpha[r] + sum;
        m[r] = m_new;
    }
}

void gen_scale_rows(float* o, int64_t ld, int rows, int n, const float* alpha) {
    for (int r = 0; r < rows; ++r) {
        if (alpha[r] == 1.f) continue;
        for (int c = 0; c < n; ++c) o[r * ld + c] *= alpha[r];
    }
}

const attn_kernels k_gen_table = {gen_load_k, gen_load_v, gen_softmax, gen_scale_rows, nullptr};

}  // namespace

const attn_kernels& attn_generic() { return k_gen_table; }

}  // namespace ukr

namespace {

constexpr float k_log2e = 1.4426950408889634f;
// Query rows (queries x heads of a group) per block: enough to amortise a K/V tile conversion
// over many GEMM rows, small enough that Q, S and O stay in L2.
constexpr int k_rows_per_block = 256;
// A key-range split keeps at least this many key tiles per task.
constexpr int64_t k_min_tiles_per_split = 4;

struct attn_plan {
    const attention_args* a;
    const ukr::gemm_kernels* gk;
    const ukr::attn_kernels* ak;
    int group;      // query heads per KV head
    int bq;         // queries per block
    int rows;       // bq * group
    int64_t n_qb;   // query blocks
    int n_split;    // key-range splits per (block, KV head)
    std::vector<int64_t> kend;  // per block: keys any of its queries can see
};

struct task_scratch {
    aligned_array<float> qs, s, o, kt, vt, m, l, alpha;
    std::vector<int> limit, vis_end;
};

// Partial results of one split (only used when n_split > 1).
struct split_out {
    float* o;  // [rows][head_dim], unnormalised
    float* m;  // [rows]
    float* l;  // [rows]
};

void run_task(const attn_plan& pl, int64_t qb, int g, int64_t tile_begin, int64_t tile_end,
              task_scratch& ts, const split_out* part) {
    const attention_args& a = *pl.a;
    const ukr::gemm_kernels& gk = *pl.gk;
    const ukr::attn_kernels& ak = *pl.ak;
    const int d = a.head_dim;
    const int nr = gk.nr;
    const int64_t q0 = qb * pl.bq;
    const int nq = static_cast<int>(std::min<int64_t>(pl.bq, a.n_q - q0));
    const int rows = nq * pl.group;
    const int64_t kend = pl.kend[qb];

    float* qs = ts.qs.data();
    float* s = ts.s.data();
    float* o = ts.o.data();
    float* m = ts.m.data();
    float* l = ts.l.data();
    float* alpha = ts.alpha.data();
    int* limit = ts.limit.data();
    int* vis_end = ts.vis_end.data();

    // Gather this group's query rows, row r = (query r / G, head g*G + r % G), pre-scaled so
    // scores come out in log2 units.
    const float qscale = a.scale * k_log2e;
    for (int r = 0; r < rows; ++r) {
        const int64_t qi = q0 + r / pl.group;
        const int h = g * pl.group + r % pl.group;
        const float* src = a.q + qi * a.q_stride + static_cast<int64_t>(h) * d;
        for (int c = 0; c < d; ++c) qs[r * d + c] = src[c] * qscale;
        const int64_t p = a.q_pos[qi];
        vis_end[r] = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(a.n_keys, p + 1)));
        m[r] = -std::numeric_limits<float>::infinity();
        l[r] = 0.f;
    }
    std::fill(o, o + static_cast<int64_t>(rows) * d, 0.f);

    const int n_vpanels = (d + nr - 1) / nr;
    for (int64_t t = tile_begin; t < tile_end; ++t) {
        const int64_t j0 = t * ukr::k_key_tile;
        const int n_valid = static_cast<int>(std::min<int64_t>(ukr::k_key_tile, kend - j0));
        const int64_t koff = j0 * a.kv_stride + static_cast<int64_t>(g) * d;
        ak.load_k(a.k + koff, a.kv_stride, n_valid, d, ts.kt.data());
        ak.load_v(a.v + koff, a.kv_stride, n_valid, d, ts.vt.data());
        for (int r = 0; r < rows; ++r) {
            limit[r] = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(n_valid,
                                                                               vis_end[r] - j0)));
        }
        // Row tiles that see no key of this tile (above the causal diagonal) are skipped: the
        // softmax leaves them unchanged (limit 0) and their P rows would be all zero.
        auto tile_visible = [&](int r0, int mr) {
            for (int r = r0; r < r0 + mr; ++r) {
                if (limit[r] > 0) return true;
            }
            return false;
        };
        if (ak.row_tile) {
            for (int r0 = 0; r0 < rows; r0 += gk.mr) {
                const int mr = std::min(gk.mr, rows - r0);
                if (!tile_visible(r0, mr)) continue;
                ak.row_tile(mr, d, qs + r0 * d, d, ts.kt.data(), ts.vt.data(), n_valid,
                            limit + r0, m + r0, l + r0, o + r0 * d, d, s);
            }
            continue;
        }
        for (int r0 = 0; r0 < rows; r0 += gk.mr) {
            const int mr = std::min(gk.mr, rows - r0);
            if (!tile_visible(r0, mr)) continue;
            for (int p = 0; p < ukr::k_key_tile / nr; ++p) {
                gk.tile(mr, d, qs + r0 * d, d, ts.kt.data() + static_cast<int64_t>(p) * d * nr,
                        s + r0 * ukr::k_key_tile + p * nr, ukr::k_key_tile, nr, nullptr, false);
            }
        }
        ak.softmax(s, ukr::k_key_tile, rows, limit, m, l, alpha);
        ak.scale_rows(o, d, rows, d, alpha);
        for (int r0 = 0; r0 < rows; r0 += gk.mr) {
            const int mr = std::min(gk.mr, rows - r0);
            if (!tile_visible(r0, mr)) continue;
            for (int p = 0; p < n_vpanels; ++p) {
                gk.tile(mr, n_valid, s + r0 * ukr::k_key_tile, ukr::k_key_tile,
                        ts.vt.data() + static_cast<int64_t>(p) * ukr::k_key_tile * nr,
                        o + r0 * d + p * nr, d, std::min(nr, d - p * nr), nullptr, true);
            }
        }
    }

    if (part) {
        std::memcpy(part->o, o, sizeof(float) * rows * d);
        std::memcpy(part->m, m, sizeof(float) * rows);
        std::memcpy(part->l, l, sizeof(float) * rows);
        return;
    }
    for (int r = 0; r < rows; ++r) {
        const int64_t qi = q0 + r / pl.group;
        const int h = g * pl.group + r % pl.group;
        float* dst = a.out + qi * a.out_stride + static_cast<int64_t>(h) * d;
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        for (int c = 0; c < d; ++c) dst[c] = o[r * d + c] * inv;
    }
}

void prepare_scratch(task_scratch& ts, const attn_plan& pl) {
    const int d = pl.a->head_dim;
    const int nr = pl.gk->nr;
    const size_t rows = static_cast<size_t>(pl.rows);
    const size_t dpad = static_cast<size_t>((d + nr - 1) / nr) * nr;
    ts.qs.resize(rows * d);
    ts.s.resize(rows * ukr::k_key_tile);
    ts.o.resize(rows * d);
    ts.kt.resize(static_cast<size_t>(ukr::k_key_tile) * d);
    ts.vt.resize(static_cast<size_t>(ukr::k_key_tile) * dpad);
    ts.m.resize(rows);
    ts.l.resize(rows);
    ts.alpha.resize(rows);
    ts.limit.resize(rows);
    ts.vis_end.resize(rows);
}

}  // namespace

namespace {

// Query rows per ggml tile (GGML_FA_TILE_Q): batches of fewer rows run ggml's one_chunk path.
constexpr int64_t k_ggml_tile_q = 64;

// AVX-512: ggml's CPU flash attention, bit for bit (attention-ggml-avx512.cpp). Rows are
// independent, so any split over (rows, heads) gives the same bits.
void attention_ggml(thread_pool& pool, const attention_args& a, int n_kv) {
#if defined(__x86_64__)
    const ukr::fa_exact_kernels& fk = ukr::fa_exact_avx512();
    const int group = a.n_head / n_kv;
    const int hd = a.head_dim;
    auto limit_of = [&](int64_t i) {
        return std::max<int64_t>(0, std::min<int64_t>(a.n_keys, int64_t(a.q_pos[i]) + 1));
    };
    if (a.n_q < k_ggml_tile_q) {
        pool.parallel_for(a.n_q * a.n_head, 1, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) {
                const int64_t i = t / a.n_head;
                const int h = static_cast<int>(t % a.n_head);
                const int64_t koff = int64_t(h / group) * hd;
                fk.one_chunk(a.q + i * a.q_stride + int64_t(h) * hd, a.k + koff, a.v + koff,
                             a.kv_stride, limit_of(i), hd, a.scale,
                             a.out + i * a.out_stride + int64_t(h) * hd);
            }
        });
        return;
    }
    constexpr int64_t k_rows = 64;  // rows per call: each K/V tile is converted once for them
    const int64_t n_rb = (a.n_q + k_rows - 1) / k_rows;
    pool.parallel_for(n_rb * a.n_head, 1, [&](int64_t t0, int64_t t1) {
        static thread_local aligned_array<float> scratch;
        if (scratch.size() < size_t(192) * hd) scratch.resize(size_t(192) * hd);
        int64_t lim[k_rows];
        for (int64_t t = t0; t < t1; ++t) {
            const int h = static_cast<int>(t / n_rb);
            const int64_t i0 = (t % n_rb) * k_rows;
            const int rows = static_cast<int>(std::min<int64_t>(k_rows, a.n_q - i0));
            for (int r = 0; r < rows; ++r) lim[r] = limit_of(i0 + r);
            const int64_t koff = int64_t(h / group) * hd;
            fk.tiled(rows, a.q + i0 * a.q_stride + int64_t(h) * hd, a.q_stride, a.k + koff,
                     a.v + koff, a.kv_stride, lim, hd, a.scale,
                     a.out + i0 * a.out_stride + int64_t(h) * hd, a.out_stride, scratch.data());
        }
    });
#else
    (void)pool, (void)a, (void)n_kv;
#endif
}

}  // namespace

void attention(thread_pool& pool, const attention_args& a) {
    if (a.n_q <= 0 || a.n_head <= 0 || a.head_dim <= 0) return;
    const int n_kv = attention_kv_heads(a, "attention");

    const cpu_isa isa = cpu_isa_active();
    if (isa >= cpu_isa::avx512 && a.head_dim % 16 == 0 && a.head_dim <= 256) {
        return attention_ggml(pool, a, n_kv);
    }
    attn_plan pl;
    pl.a = &a;
    pl.gk = &ukr::gemm_for(isa);
    pl.ak = &ukr::attn_for(isa);
    pl.group = a.n_head / n_kv;
    pl.bq = std::max(1, k_rows_per_block / pl.group);
    pl.bq = static_cast<int>(std::min<int64_t>(pl.bq, a.n_q));
    pl.rows = pl.bq * pl.group;
    pl.n_qb = (a.n_q + pl.bq - 1) / pl.bq;
    pl.kend.resize(static_cast<size_t>(pl.n_qb));
    int64_t max_tiles = 0;
    for (int64_t qb = 0; qb < pl.n_qb; ++qb) {
        int64_t mx = -1;
        for (int64_t i = qb * pl.bq; i < std::min<int64_t>(a.n_q, (qb + 1) * pl.bq); ++i) {
            mx = std::max<int64_t>(mx, a.q_pos[i]);
        }
        pl.kend[qb] = std::max<int64_t>(0, std::min<int64_t>(a.n_keys, mx + 1));
        max_tiles = std::max(max_tiles, (pl.kend[qb] + ukr::k_key_tile - 1) / ukr::k_key_tile);
    }

    // Few (block, head) pairs but many keys (decode): split the key range as well.
    const int nth = pool.size();
    const int64_t n_pairs = pl.n_qb * n_kv;
    pl.n_split = 1;
    if (n_pairs < 4 * nth) {
        const int64_t want = (4 * nth + n_pairs - 1) / n_pairs;
        pl.n_split = static_cast<int>(
            std::max<int64_t>(1, std::min(want, max_tiles / k_min_tiles_per_split)));
    }

    // Tasks, most expensive first so the tail of the schedule is short.
    const int64_t n_tasks = n_pairs * pl.n_split;
    std::vector<int64_t> order(static_cast<size_t>(n_pairs));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return pl.kend[x / n_kv] > pl.kend[y / n_kv];
    });

    const int d = a.head_dim;
    aligned_array<float> part_buf;
    if (pl.n_split > 1) {
        const size_t per = static_cast<size_t>(pl.rows) * (d + 2);
        part_buf.resize(per * static_cast<size_t>(n_tasks));
    }
    auto part_of = [&](int64_t pair, int split) {
        const size_t per = static_cast<size_t>(pl.rows) * (d + 2);
        float* base = part_buf.data() + per * static_cast<size_t>(pair * pl.n_split + split);
        return split_out{base, base + static_cast<size_t>(pl.rows) * d,
                         base + static_cast<size_t>(pl.rows) * (d + 1)};
    };

    std::atomic<int64_t> next{0};
    pool.run([&](int, int) {
        static thread_local task_scratch ts;
        prepare_scratch(ts, pl);
        for (;;) {
            const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
            if (t >= n_tasks) break;
            const int64_t pair = order[static_cast<size_t>(t / pl.n_split)];
            const int split = static_cast<int>(t % pl.n_split);
            const int64_t qb = pair / n_kv;
            const int g = static_cast<int>(pair % n_kv);
            const int64_t n_tiles = (pl.kend[qb] + ukr::k_key_tile - 1) / ukr::k_key_tile;
            const int64_t tb = n_tiles * split / pl.n_split;
            const int64_t te = n_tiles * (split + 1) / pl.n_split;
            if (pl.n_split > 1) {
                const split_out part = part_of(pair, split);
                run_task(pl, qb, g, tb, te, ts, &part);
            } else {
                run_task(pl, qb, g, tb, te, ts, nullptr);
            }
        }
    });
    if (pl.n_split == 1) return;

    // Merge the splits: rescale each partial sum to the common max.
    pool.parallel_for(n_pairs, 1, [&](int64_t p0, int64_t p1) {
        std::vector<float> acc(static_cast<size_t>(d));
        for (int64_t pair = p0; pair < p1; ++pair) {
            const int64_t qb = pair / n_kv;
            const int g = static_cast<int>(pair % n_kv);
            const int64_t q0 = qb * pl.bq;
            const int nq = static_cast<int>(std::min<int64_t>(pl.bq, a.n_q - q0));
            for (int r = 0; r < nq * pl.group; ++r) {
                float mx = -std::numeric_limits<float>::infinity();
                for (int s = 0; s < pl.n_split; ++s) mx = std::max(mx, part_of(pair, s).m[r]);
                float lsum = 0.f;
                std::fill(acc.begin(), acc.end(), 0.f);
                if (mx != -std::numeric_limits<float>::infinity()) {
                    for (int s = 0; s < pl.n_split; ++s) {
                        const split_out ps = part_of(pair, s);
                        if (ps.l[r] == 0.f) continue;
                        const float w = std::exp2(ps.m[r] - mx);
                        lsum += ps.l[r] * w;
                        for (int c = 0; c < d; ++c) acc[c] += ps.o[r * d + c] * w;
                    }
                }
                const int64_t qi = q0 + r / pl.group;
                const int h = g * pl.group + r % pl.group;
                float* dst = a.out + qi * a.out_stride + static_cast<int64_t>(h) * d;
                const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
                for (int c = 0; c < d; ++c) dst[c] = acc[c] * inv;
            }
        }
    });
}

}  // namespace cacheblend
