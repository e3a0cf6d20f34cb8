#include "core/blend/blend-select.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/util/error.h"
#include "kernels/fp16.h"

namespace cacheblend {
namespace {

// A fixed pseudo-random score in [0, 1) (splitmix64): the same positions win on every run.
float random_score(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<float>(x >> 40) / static_cast<float>(1u << 24);
}

// The cached rows that are scored as they are, in f16: V, or K of the f16 format (as stored);
// null for f32 keys, which are rounded to f16 first.
const uint16_t* cached_f16_rows(const select_args& a, const uint16_t* cached_v,
                                const void* cached_k) {
    if (cached_v) return cached_v;
    return a.cached_k_type == dtype::f16 ? static_cast<const uint16_t*>(cached_k) : nullptr;
}

// The candidates' fresh and cached rows side by side, on a host backend: `fresh` (the forward
// pass's buffer) and the loader's slot are host memory, read in place.
void gather_on_host(const select_args& a, const std::vector<int64_t>& cand, const float* fresh,
                    const uint16_t* cached_v, const void* cached_k, select_scratch* s) {
    const int64_t kd = a.kv_dim;
    const int64_t mr = static_cast<int64_t>(cand.size());
    const uint16_t* c16 = cached_f16_rows(a, cached_v, cached_k);
    for (int64_t i = 0; i < mr; ++i) {
        const int64_t c = cand[static_cast<size_t>(i)];
        const int64_t r =
            (*a.reused_index)[static_cast<size_t>((*a.active)[static_cast<size_t>(c)])];
        std::memcpy(s->fresh.data() + i * kd, fresh + c * kd,
                    static_cast<size_t>(kd) * sizeof(float));
        if (c16) {
            std::memcpy(s->cached.data() + i * kd, c16 + r * kd,
                        static_cast<size_t>(kd) * sizeof(uint16_t));
        } else {
            fp32_to_fp16_row(static_cast<const float*>(cached_k) + r * kd,
                             s->cached.data() + i * kd, kd);
        }
    }
}

// The same on a device backend: row indices go up, the rows are gathered there (K rounded to f16
// by store_rows_f16, the CPU's rounding), so nothing crosses to the host row by row.
void gather_on_device(backend& be, const select_args& a, const std::vector<int64_t>& cand,
                      const float* fresh, const uint16_t* cached_v, const void* cached_k,
                      select_scratch* s, const float** fresh_d, const uint16_t** cached_d) {
    const auto kd = static_cast<size_t>(a.kv_dim);
    const size_t mr = cand.size();
    s->fresh_rows.resize(mr);
    s->cached_rows.resize(mr);
    for (size_t i = 0; i < mr; ++i) {
        const int64_t c = cand[i];
        s->fresh_rows[i] = static_cast<int32_t>(c);
        s->cached_rows[i] =
            (*a.reused_index)[static_cast<size_t>((*a.active)[static_cast<size_t>(c)])];
    }
    const int32_t* fi = s->fresh_rows_b.in(be, s->fresh_rows.data(), mr);
    const int32_t* ci = s->cached_rows_b.in(be, s->cached_rows.data(), mr);
    const auto n = static_cast<int64_t>(mr);
    float* f = grow_buffer<float>(be, &s->fresh_d, mr * kd);
    be.gather_rows(fresh, kd * sizeof(float), fi, n, kd * sizeof(float), f, kd * sizeof(float));
    uint16_t* cv = grow_buffer<uint16_t>(be, &s->cached_d, mr * kd);
    if (const uint16_t* c16 = cached_f16_rows(a, cached_v, cached_k)) {
        be.gather_rows(c16, kd * sizeof(uint16_t), ci, n, kd * sizeof(uint16_t), cv,
                       kd * sizeof(uint16_t));
    } else {
        float* k32 = grow_buffer<float>(be, &s->k32_d, mr * kd);
        be.gather_rows(cached_k, kd * sizeof(float), ci, n, kd * sizeof(float), k32,
                       kd * sizeof(float));
        s->iota.resize(mr);
        for (size_t i = 0; i < mr; ++i) s->iota[i] = static_cast<int32_t>(i);
        be.store_rows_f16(k32, n, a.kv_dim, a.kv_dim, s->iota_b.in(be, s->iota.data(), mr), cv,
                          a.kv_dim);
    }
    *fresh_d = f;
    *cached_d = cv;
}

// Adds each candidate's deviation of fresh vs cached rows to total[i]. Cached rows are scored as
// f16 (K is rounded for it: the ranking does not need more), gathered next to their fresh rows.
void add_deviation(backend& be, const select_args& a, const std::vector<int64_t>& cand,
                   const float* fresh, const uint16_t* cached_v, const void* cached_k,
                   select_scratch* s, std::vector<float>* total) {
    const int64_t kd = a.kv_dim;
    const int64_t mr = static_cast<int64_t>(cand.size());
    const float* fresh_rows = s->fresh.data();
    const uint16_t* cached_rows = s->cached.data();
    if (be.host_memory()) {
        gather_on_host(a, cand, fresh, cached_v, cached_k, s);
    } else {
        gather_on_device(be, a, cand, fresh, cached_v, cached_k, s, &fresh_rows, &cached_rows);
    }
    float* dev = s->dev_b.out_space(be, s->dev.data(), static_cast<size_t>(mr));
    be.kv_deviation(fresh_rows, kd, cached_rows, kd, mr, kd, dev);
    s->dev_b.out(be, s->dev.data(), dev, static_cast<size_t>(mr));
    for (int64_t i = 0; i < mr; ++i) {
        (*total)[static_cast<size_t>(i)] += s->dev[static_cast<size_t>(i)];
    }
}

// The candidates' deviation (higher = recompute first): V then K deviation as asked, or the
// seeded random control.
std::vector<float> deviation_scores(backend& be, const select_args& a,
                                    const std::vector<int64_t>& cand, select_scratch* s) {
    const int64_t mr = static_cast<int64_t>(cand.size());
    s->dev.resize(static_cast<size_t>(std::max<int64_t>(1, mr)));
    if (be.host_memory()) {
        s->fresh.resize(static_cast<size_t>(std::max<int64_t>(1, mr * a.kv_dim)));
        s->cached.resize(static_cast<size_t>(std::max<int64_t>(1, mr * a.kv_dim)));
    }
    std::vector<float> total(static_cast<size_t>(mr), 0.f);
    if (a.cached_k && a.cached_k_type != dtype::f32 && a.cached_k_type != dtype::f16)
        throw error(status::internal, "select: cached K rows are f32 or f16");
    if (a.deviation == deviation_kind::random) {
        for (int64_t i = 0; i < mr; ++i) {
            const auto row = static_cast<uint64_t>(
                (*a.active)[static_cast<size_t>(cand[static_cast<size_t>(i)])]);
            total[static_cast<size_t>(i)] =
                random_score(row + 1000003u * static_cast<uint64_t>(a.layer));
        }
        return total;
    }
    if (a.deviation != deviation_kind::k) {
        add_deviation(be, a, cand, a.fresh_v, a.cached_v, nullptr, s, &total);
    }
    if (a.deviation != deviation_kind::v) {
        add_deviation(be, a, cand, a.fresh_k, nullptr, a.cached_k, s, &total);
    }
    return total;
}

}  // namespace

void select_prepare(backend& be, const select_args& a, const token_selector& sel,
                    select_scratch* s, std::vector<int64_t>* cand, selection_input* in) {
    const std::vector<int32_t>& active = *a.active;
    const std::vector<int32_t>& reused_index = *a.reused_index;
    const std::vector<int64_t>& hit_offset = *a.hit_offset;
    cand->clear();
    in->chunk.clear();
    in->offset.clear();
    in->deviation.clear();
    in->query.clear();
    for (size_t i = 0; i < active.size(); ++i) {
        const int32_t r = reused_index[static_cast<size_t>(active[i])];
        if (r < 0) continue;
        cand->push_back(static_cast<int64_t>(i));
        // Hit chunks occupy consecutive ranges of R in prompt order.
        const auto c = std::upper_bound(hit_offset.begin(), hit_offset.end(), int64_t{r}) -
                       hit_offset.begin() - 1;
        in->chunk.push_back(static_cast<int32_t>(c));
        in->offset.push_back(static_cast<int32_t>(r - hit_offset[static_cast<size_t>(c)]));
    }
    const int64_t mr = static_cast<int64_t>(cand->size());
    in->budget = std::min<int64_t>(
        mr, static_cast<int64_t>(
                std::ceil(static_cast<double>(a.ratio) * static_cast<double>(a.n_reused) - 1e-9)));
    if (sel.needs_deviation()) in->deviation = deviation_scores(be, a, *cand, s);
}

void select_finish(const select_args& a, const token_selector& sel, const selection_input& in,
                   const std::vector<int64_t>& cand, std::vector<int32_t>* keep) {
    const std::vector<int32_t>& active = *a.active;
    const std::vector<int32_t>& reused_index = *a.reused_index;
    const int64_t n_act = static_cast<int64_t>(active.size());
    std::vector<uint8_t> chosen(static_cast<size_t>(n_act), 0);
    for (int64_t i : sel.choose(in)) {
        chosen[static_cast<size_t>(cand[static_cast<size_t>(i)])] = 1;
    }
    keep->clear();
    for (int64_t i = 0; i < n_act; ++i) {
        if (chosen[static_cast<size_t>(i)] ||
            reused_index[static_cast<size_t>(active[static_cast<size_t>(i)])] < 0) {
            keep->push_back(static_cast<int32_t>(i));
        }
    }
}

}  // namespace cacheblend
