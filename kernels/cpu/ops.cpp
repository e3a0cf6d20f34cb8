// Row-wise CPU ops of the forward pass: RMS-norm, RoPE, SwiGLU, residual add, embedding lookup,
// KV-cache stores. The math follows ggml's CPU ops in float (RMS-norm sums in double, as ggml).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu-features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quants.h"
#include "kernels/cpu/ukernels.h"
#include "kernels/fp16.h"

namespace cacheblend {

namespace ukr {
namespace {

double gen_sum_sq(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
    return s;
}

void gen_scale_mul(const float* x, float s, const float* g, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * g[i];
}

void gen_swiglu(const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float x = gate[i];
        out[i] = x / (1.f + std::exp(-x)) * up[i];
    }
}

void gen_add(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

const elem_kernels k_gen_table = {gen_sum_sq, gen_scale_mul, gen_swiglu, gen_add};

}  // namespace

const elem_kernels& elem_generic() { return k_gen_table; }

}  // namespace ukr

namespace {

// Rows per parallel chunk for streaming ops: below this a job costs more than it saves.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)); }

}  // namespace

void rms_norm(thread_pool& pool, const float* x, int64_t m, int64_t n, int64_t ldx,
              const float* gamma, float eps, float* y, int64_t ldy) {
    if (m <= 0 || n <= 0) return;
    const ukr::elem_kernels& ek = ukr::elem_for(cpu_isa_active());
    pool.parallel_for(m, row_grain(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = x + r * ldx;
            const float mean = static_cast<float>(ek.sum_sq(xr, n) / static_cast<double>(n));
            const float scale = 1.0f / std::sqrt(mean + eps);
            ek.scale_mul(xr, scale, gamma, y + r * ldy, n);
        }
    });
}

namespace {

// cos/sin per (position, pair), computed exactly as ggml's rope_f32 (float theta, multiplied by
// theta_scale once per pair, divided by the frequency factor, times freq_scale; cosf/sinf).
// Prefill calls rope twice per layer with the same positions, so rows are cached per caller
// thread and reused across calls with the same parameters.
struct rope_table {
    int n_dims = 0;
    float freq_base = 0.f, freq_scale = 0.f;
    std::vector<float> factors;
    std::vector<float> cs;  // [pos][n_dims/2][cos, sin]
    std::vector<char> have;  // per position

    bool same(const rope_params& p) const {
        if (p.n_dims != n_dims || p.freq_base != freq_base || p.freq_scale != freq_scale) {
            return false;
        }
        if (!p.freq_factors) return factors.empty();
        return !factors.empty() &&
               std::equal(factors.begin(), factors.end(), p.freq_factors);
    }
    void reset(const rope_params& p) {
        n_dims = p.n_dims;
        freq_base = p.freq_base;
        freq_scale = p.freq_scale;
        factors.clear();
        if (p.freq_factors) factors.assign(p.freq_factors, p.freq_factors + p.n_dims / 2);
        cs.clear();
        have.clear();
    }
};

void rope_row_cache(const rope_params& p, int32_t pos, float* out) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
    float theta = static_cast<float>(pos);
    for (int i = 0; i < p.n_dims / 2; ++i) {
        const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
        const float t = p.freq_scale * (theta / ff);
        out[2 * i] = std::cos(t);
        out[2 * i + 1] = std::sin(t);
        theta *= theta_scale;
    }
}

// Positions above this are computed per call instead of cached (bounds the table's memory).
constexpr int32_t k_rope_cache_max_pos = 1 << 16;

// The rotation as GCC contracts ggml's rotate_pairs (x0*c - x1*s, x0*s + x1*c) into FMAs in the
// peer's build, so rotated values have its bits.
void rope_apply(float* x, int n_head, int head_dim, const rope_params& p, const float* cs) {
    const int half = p.n_dims / 2;
    for (int h = 0; h < n_head; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;
        if (p.style == rope_style::norm) {
            for (int i = 0; i < half; ++i) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = std::fma(x0, c, -(x1 * s));
                v[2 * i + 1] = std::fma(x0, s, x1 * c);
            }
        } else {
            for (int i = 0; i < half; ++i) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float x0 = v[i], x1 = v[i + half];
                v[i] = std::fma(x0, c, -(x1 * s));
                v[i + half] = std::fma(x0, s, x1 * c);
            }
        }
    }
}

}  // namespace

void rope(thread_pool& pool, float* x, int64_t m, int64_t ldx, int n_head, int head_dim,
          const int32_t* pos, const rope_params& p) {
    if (m <= 0 || n_head <= 0 || p.n_dims <= 0 || p.n_dims > head_dim || p.n_dims % 2 != 0) {
        return;
    }
    const int64_t row_floats = p.n_dims;  // n_dims/2 (cos, sin) pairs
    static thread_local rope_table table;
    if (!table.same(p)) table.reset(p);

    int32_t max_pos = -1;
    for (int64_t i = 0; i < m; ++i) max_pos = std::max(max_pos, pos[i]);
    const bool cached = max_pos < k_rope_cache_max_pos;
    if (cached) {
        if (static_cast<int64_t>(table.have.size()) <= max_pos) {
            table.have.resize(static_cast<size_t>(max_pos) + 1, 0);
            table.cs.resize(table.have.size() * row_floats);
        }
        for (int64_t i = 0; i < m; ++i) {
            const int32_t ps = pos[i];
            if (ps < 0 || table.have[ps]) continue;
            rope_row_cache(p, ps, table.cs.data() + ps * row_floats);
            table.have[ps] = 1;
        }
    }
    const float* cs_all = table.cs.data();
    pool.parallel_for(m, std::max<int64_t>(1, 4096 / (int64_t(n_head) * head_dim)),
                      [&](int64_t r0, int64_t r1) {
        std::vector<float> local;
        for (int64_t r = r0; r < r1; ++r) {
            const float* cs;
            if (cached && pos[r] >= 0) {
                cs = cs_all + static_cast<int64_t>(pos[r]) * row_floats;
            } else {
                local.resize(static_cast<size_t>(row_floats));
                rope_row_cache(p, pos[r], local.data());
                cs = local.data();
            }
            rope_apply(x + r * ldx, n_head, head_dim, p, cs);
        }
    });
}

void swiglu(thread_pool& pool, const float* gate, const float* up, int64_t m, int64_t n,
            int64_t ld, float* out) {
    if (m <= 0 || n <= 0) return;
    const ukr::elem_kernels& ek = ukr::elem_for(cpu_isa_active());
    pool.parallel_for(m, row_grain(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) ek.swiglu(gate + r * ld, up + r * ld, out + r * ld, n);
    });
}

void add_rows(thread_pool& pool, float* y, const float* x, int64_t m, int64_t n, int64_t ld) {
    if (m <= 0 || n <= 0) return;
    const ukr::elem_kernels& ek = ukr::elem_for(cpu_isa_active());
    pool.parallel_for(m, row_grain(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) ek.add(y + r * ld, x + r * ld, n);
    });
}

void get_rows(thread_pool& pool, const weight_view& w, const int32_t* ids, int64_t m, float* y,
              int64_t ldy) {
    if (m <= 0 || w.cols <= 0) return;
    const auto* base = static_cast<const unsigned char*>(w.data);
    pool.parallel_for(m, row_grain(w.cols), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int32_t id = ids[r];
            float* dst = y + r * ldy;
            if (id < 0 || id >= w.rows) {
                std::fill(dst, dst + w.cols, 0.f);  // callers validate ids; never read outside W
                continue;
            }
            dequantize_row(w.type, base + static_cast<int64_t>(id) * w.row_bytes, dst, w.cols);
        }
    });
}

void store_rows_f16(thread_pool& pool, const float* src, int64_t m, int64_t n, int64_t ldsrc,
                    const int32_t* pos, uint16_t* cache, int64_t ld_cache) {
    if (m <= 0 || n <= 0) return;
    pool.parallel_for(m, row_grain(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            fp32_to_fp16_row(src + r * ldsrc, cache + static_cast<int64_t>(pos[r]) * ld_cache, n);
        }
    });
}

}  // namespace cacheblend
