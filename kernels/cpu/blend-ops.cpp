#include "kernels/cpu/blend-ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/kernel-error.h"

namespace cacheblend {

void relocate_kv(thread_pool& pool, const void* k_src, dtype k_type, const uint16_t* v_src,
                 int64_t n, int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                 const rope_params& rope_p, uint16_t* k_cache, uint16_t* v_cache,
                 int64_t ld_cache) {
    if (k_type != dtype::f32 && k_type != dtype::f16) {
        throw kernel_error(kernel_status::invalid_arg,
                           kernel_fmt("relocate_kv: keys in %s (f32 or f16 only)",
                                      dtype_name(k_type)));
    }
    const int64_t width = static_cast<int64_t>(n_kv_head) * head_dim;
    // Rows are independent; each worker rotates a block of rows in f32 scratch. The rotation is
    // the same rope() the forward pass uses, so a chunk placed where it was computed gets
    // exactly the keys full prefill would store.
    pool.parallel_for(n, 16, [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> tmp;
        tmp.resize(static_cast<size_t>(width));
        thread_pool serial(1);
        for (int64_t i = begin; i < end; ++i) {
            if (k_type == dtype::f16) {
                fp16_to_fp32_row(static_cast<const uint16_t*>(k_src) + i * ld_src, tmp.data(),
                                 width);
            } else {
                const float* k = static_cast<const float*>(k_src) + i * ld_src;
                std::copy(k, k + width, tmp.data());
            }
            rope(serial, tmp.data(), 1, width, n_kv_head, head_dim, pos + i, rope_p);
            fp32_to_fp16_row(tmp.data(), k_cache + static_cast<int64_t>(pos[i]) * ld_cache, width);
            std::copy(v_src + i * ld_src, v_src + i * ld_src + width,
                      v_cache + static_cast<int64_t>(pos[i]) * ld_cache);
        }
    });
}

void kv_deviation(thread_pool& pool, const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                  int64_t ld_cached, int64_t n, int64_t width, float* d) {
    pool.parallel_for(n, 64, [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> tmp;
        tmp.resize(static_cast<size_t>(width));
        for (int64_t i = begin; i < end; ++i) {
            fp16_to_fp32_row(cached + i * ld_cached, tmp.data(), width);
            const float* f = fresh + i * ld_fresh;
            float s = 0.f;
            for (int64_t j = 0; j < width; ++j) {
                const float e = f[j] - tmp[static_cast<size_t>(j)];
                s += e * e;
            }
            d[i] = s;
        }
    });
}

void attention_mass(thread_pool& pool, const attention_args& a, float* scores) {
    const int64_t nk = a.n_keys, hd = a.head_dim;
    const int64_t rows = a.n_q * a.n_head;
    const int group = a.n_head / attention_kv_heads(a, "attention_mass");
    // One probability row per (query row, head), then a sum per key in row order: the same
    // result on any number of threads.
    std::vector<float> p(static_cast<size_t>(std::max<int64_t>(1, rows * nk)), 0.f);
    pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> kf;
        kf.resize(static_cast<size_t>(hd));
        for (int64_t r = begin; r < end; ++r) {
            const int64_t i = r / a.n_head;
            const int h = static_cast<int>(r % a.n_head);
            const float* q = a.q + i * a.q_stride + static_cast<int64_t>(h) * hd;
            const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
            const int64_t limit = std::min<int64_t>(nk, static_cast<int64_t>(a.q_pos[i]) + 1);
            float* pr = p.data() + r * nk;
            float mx = -INFINITY;
            for (int64_t j = 0; j < limit; ++j) {
                fp16_to_fp32_row(a.k + j * a.kv_stride + kv_off, kf.data(), hd);
                float dot = 0.f;
                for (int64_t d = 0; d < hd; ++d) dot += q[d] * kf[static_cast<size_t>(d)];
                pr[j] = dot * a.scale;
                mx = std::max(mx, pr[j]);
            }
            float sum = 0.f;
            for (int64_t j = 0; j < limit; ++j) {
                pr[j] = std::exp(pr[j] - mx);
                sum += pr[j];
            }
            for (int64_t j = 0; j < limit; ++j) pr[j] /= sum;
        }
    });
    pool.parallel_for(nk, 64, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
            float s = 0.f;
            for (int64_t r = 0; r < rows; ++r) s += p[static_cast<size_t>(r * nk + j)];
            scores[j] = s;
        }
    });
}

}  // namespace cacheblend
