#include "kernels/cuda/dispatch.cuh"

#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/weight-types.cuh"

namespace cacheblend {
namespace cuda {
namespace {

// Calls f(traits{}) for the weight type t and returns true, or returns false for a type the
// CUDA backend does not read yet.
template <typename F>
bool with_weight_type(dtype t, F&& f) {
    switch (t) {
#define CBL_CASE(id, T) \
    case id: f(T{}); return true;
        CBL_CUDA_FOR_EACH_WEIGHT_TYPE(CBL_CASE)
#undef CBL_CASE
        default: return false;
    }
}

void throw_unsupported(dtype t, const char* op) {
    throw kernel_error(kernel_status::unsupported,
                       kernel_fmt("cuda %s: weight type %s is not supported yet", op,
                                  dtype_name(t)));
}

// Rows must hold whole blocks; row_bytes may exceed the packed size (a strided view).
void check_weight(const weight_view& w, int block_elems, int block_bytes, const char* op) {
    if (w.cols % block_elems != 0 || w.row_bytes < dtype_row_bytes(w.type, w.cols) ||
        w.row_bytes % (block_elems == 1 ? block_bytes : 1) != 0) {
        throw kernel_error(kernel_status::invalid_arg,
                           kernel_fmt("cuda %s: %s rows of %lld columns, %zu bytes apart", op,
                                      dtype_name(w.type), static_cast<long long>(w.cols),
                                      w.row_bytes));
    }
}

// check_weight for a weight of any type the backend reads.
void check_weight_type(const weight_view& w, const char* op) {
    const bool ok = with_weight_type(w.type, [&](auto tr) {
        using T = decltype(tr);
        check_weight(w, T::block_elems, T::block_bytes, op);
    });
    if (!ok) throw_unsupported(w.type, op);
}

// Largest dequantized weight panel staged at once (f16 bytes): bounds scratch memory for big
// vocabularies while keeping each GEMM large.
constexpr size_t k_panel_bytes = size_t(64) << 20;

// Prefill's activations as f16 (each row scaled into f16's range when it is not, see
// kernels/cuda/math/f16-staging.h), staged on first use and shared by every product of one input.
class staged_input {
public:
    staged_input(cuda_ctx& ctx, const float* x, int64_t m, int64_t k, int64_t ldx)
        : ctx_(ctx), x_(x), m_(m), k_(k), ldx_(ldx) {}
    const void* f16() {
        if (!xh_) {
            xh_ = ctx_.scratch(scratch_x_f16, size_t(m_) * size_t(k_) * sizeof(__half));
            exps_ = static_cast<int32_t*>(
                ctx_.scratch(scratch_row_exponent, size_t(m_) * sizeof(int32_t)));
            cbl_cuda_f16_stage_rows(ctx_, x_, m_, k_, ldx_, xh_, k_, exps_);
        }
        return xh_;
    }
    const int32_t* exponents() const { return exps_; }
    const float* f32() const { return x_; }
    int64_t m() const { return m_; }
    int64_t ldx() const { return ldx_; }

private:
    cuda_ctx& ctx_;
    const float* x_;
    int64_t m_, k_, ldx_;
    void* xh_ = nullptr;
    int32_t* exps_ = nullptr;
};

// Prefill: per panel of weight rows dequantize -> f16, GEMM against the staged input into the
// panel's columns of y; finally staged rows are scaled back and the bias added in one pass.
// f16 weights are used in place; f32 weights run an f32 GEMM on x.
template <typename T>
void matmul_gemm(cuda_ctx& ctx, const weight_view& w, staged_input& in, float* y, int64_t ldy,
                 const float* bias) {
    const int64_t n = w.rows, k = w.cols, m = in.m();
    const auto* wbytes = static_cast<const uint8_t*>(w.data);
    if (w.type == dtype::f32) {
        const int64_t ldw = static_cast<int64_t>(w.row_bytes / sizeof(float));
        cbl_cuda_gemm(ctx, {CUDA_R_32F, wbytes, ldw, in.f32(), in.ldx(), y, ldy, m, n, k});
        if (bias) cbl_cuda_add_bias(ctx, y, m, n, ldy, bias);
        return;
    }
    const void* xh = in.f16();
    if (w.type == dtype::f16) {
        const int64_t ldw = static_cast<int64_t>(w.row_bytes / sizeof(__half));
        cbl_cuda_gemm(ctx, {CUDA_R_16F, wbytes, ldw, xh, k, y, ldy, m, n, k});
    } else {
        const int64_t panel = std::max<int64_t>(
            256, static_cast<int64_t>(k_panel_bytes / (size_t(k) * sizeof(__half))) / 256 * 256);
        const int64_t rows = std::min(panel, n);
        void* wh = ctx.scratch(scratch_w_f16, size_t(rows) * size_t(k) * sizeof(__half));
        for (int64_t r0 = 0; r0 < n; r0 += rows) {
            const int64_t nr = std::min(rows, n - r0);
            dequant_args da;
            da.src = wbytes;
            da.row_bytes = w.row_bytes;
            da.n_src_rows = n;
            da.cols = k;
            da.row0 = r0;
            da.n_rows = nr;
            da.dst = wh;
            da.ld_dst = k;
            cbl_cuda_dequant_rows_f16<T>(ctx, da);
            cbl_cuda_gemm(ctx, {CUDA_R_16F, wh, k, xh, k, y + r0, ldy, m, nr, k});
        }
    }
    cbl_cuda_f16_unstage_rows(ctx, y, m, n, ldy, in.exponents(), bias);
}

gemv_out gemv_out_of(const matmul_out& o) {
    gemv_out g;
    g.w = static_cast<const uint8_t*>(o.w.data);
    g.row_bytes = o.w.row_bytes;
    g.n = o.w.rows;
    g.y = o.y;
    g.ldy = o.ldy;
    g.bias = o.bias;
    g.type = o.w.type;
    return g;
}

// One product of `in`; the empty one (no columns) writes the bias or zeros.
void matmul_one(cuda_ctx& ctx, const matmul_out& o, staged_input& in) {
    const weight_view& w = o.w;
    if (in.m() <= 0 || w.rows <= 0) return;
    const bool ok = with_weight_type(w.type, [&](auto tr) {
        using T = decltype(tr);
        check_weight(w, T::block_elems, T::block_bytes, "matmul");
        if (w.cols == 0) {
            CBL_CUDA_CHECK(cudaMemset2DAsync(o.y, size_t(o.ldy) * sizeof(float), 0,
                                             size_t(w.rows) * sizeof(float), size_t(in.m()),
                                             ctx.stream()));
            if (o.bias) cbl_cuda_add_bias(ctx, o.y, in.m(), w.rows, o.ldy, o.bias);
        } else if (in.m() <= k_gemv_max_rows) {
            gemv_args ga;
            ga.out[0] = gemv_out_of(o);
            ga.k = w.cols;
            ga.x = in.f32();
            ga.ldx = in.ldx();
            ga.m = static_cast<int>(in.m());
            cbl_cuda_gemv<T>(ctx, ga);
        } else {
            matmul_gemm<T>(ctx, w, in, o.y, o.ldy, o.bias);
        }
    });
    if (!ok) throw_unsupported(w.type, "matmul");
}

// Whether b's product joins a's in one GEMV launch: the same columns, nothing empty. Types may
// differ (Q4_K_M files keep v in Q6_K in some layers): that launch branches per weight.
bool joins_gemv(const weight_view& a, const weight_view& b) {
    return a.cols == b.cols && a.cols > 0 && a.rows > 0 && b.rows > 0;
}

// A decode-sized product (1 .. k_gemv_max_rows rows) of ga's weights, each of them checked by
// the caller (check_weight_type): one type's own kernel, or the mixed-type one.
void gemv_fused(cuda_ctx& ctx, const gemv_args& ga, const char* op) {
    const dtype t = ga.out[0].type;
    bool mixed = false;
    for (int i = 1; i < ga.n_out; ++i) {
        mixed = mixed || ga.out[i].type != t;
        // The mixed kernel has no case for a type the backend does not read (it would write 0).
        if (!cbl_cuda_supports_weight(ga.out[i].type)) throw_unsupported(ga.out[i].type, op);
    }
    if (mixed) {
        cbl_cuda_gemv<gemv_mixed_types>(ctx, ga);
        return;
    }
    if (!with_weight_type(t, [&](auto tr) { cbl_cuda_gemv<decltype(tr)>(ctx, ga); })) {
        throw_unsupported(t, op);
    }
}

gemv_args gemv_input(const float* x, int64_t m, int64_t ldx, int64_t k) {
    gemv_args ga;
    ga.k = k;
    ga.x = x;
    ga.ldx = ldx;
    ga.m = static_cast<int>(m);
    return ga;
}

}  // namespace

bool cbl_cuda_supports_weight(dtype t) {
    return with_weight_type(t, [](auto) {});
}

void cbl_cuda_matmul(cuda_ctx& ctx, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                     float* y, int64_t ldy, const float* bias) {
    staged_input in(ctx, x, m, w.cols, ldx);
    matmul_one(ctx, {w, y, ldy, bias}, in);
}

void cbl_cuda_matmuls(cuda_ctx& ctx, const float* x, int64_t m, int64_t ldx, const matmul_out* outs,
                      int n, const pre_norm* norm) {
    if (m <= 0 || n <= 0) return;
    for (int j = 1; j < n; ++j) {
        if (outs[j].w.cols != outs[0].w.cols) {
            throw kernel_error(kernel_status::invalid_arg,
                               kernel_fmt("cuda matmuls: weights of %lld and %lld columns share "
                                          "one input",
                                          static_cast<long long>(outs[0].w.cols),
                                          static_cast<long long>(outs[j].w.cols)));
        }
    }
    const int64_t k = outs[0].w.cols;
    // Decode sizes normalize inside every GEMV launch; the rest normalize into h once.
    bool norm_in_gemv = norm && m <= k_gemv_max_rows;
    for (int j = 0; norm_in_gemv && j < n; ++j) {
        norm_in_gemv = outs[j].w.rows > 0 && k > 0;
    }
    if (norm && !norm_in_gemv) {
        cbl_cuda_rms_norm(ctx, {x, m, k, ldx, norm->gamma, norm->eps, norm->h, norm->ldh});
        x = norm->h;
        ldx = norm->ldh;
    }
    staged_input in(ctx, x, m, k, ldx);
    for (int j = 0; j < n;) {
        // Decode: consecutive weights (up to three) go in one launch.
        int len = 1;
        while (m <= k_gemv_max_rows && j + len < n && len < k_gemv_max_outs &&
               joins_gemv(outs[j].w, outs[j + len].w)) {
            ++len;
        }
        if (len == 1 && !norm_in_gemv) {
            matmul_one(ctx, outs[j], in);
        } else {
            gemv_args ga = gemv_input(x, m, ldx, k);
            if (norm_in_gemv) {
                ga.norm_gamma = norm->gamma;
                ga.norm_eps = norm->eps;
            }
            ga.n_out = len;
            for (int i = 0; i < len; ++i) {
                check_weight_type(outs[j + i].w, "matmuls");
                ga.out[i] = gemv_out_of(outs[j + i]);
            }
            gemv_fused(ctx, ga, "matmuls");
        }
        j += len;
    }
}

void cbl_cuda_matmul_add(cuda_ctx& ctx, const weight_view& w, const float* x, int64_t m,
                         int64_t ldx, float* y, int64_t ldy, float* tmp) {
    if (m <= 0 || w.rows <= 0) return;
    if (m <= k_gemv_max_rows && w.cols > 0) {
        check_weight_type(w, "matmul_add");
        gemv_args ga = gemv_input(x, m, ldx, w.cols);
        ga.out[0] = gemv_out_of({w, y, ldy, nullptr});
        ga.epilogue = gemv_epilogue::accumulate;
        gemv_fused(ctx, ga, "matmul_add");
        return;
    }
    cbl_cuda_matmul(ctx, w, x, m, ldx, tmp, ldy, nullptr);
    cbl_cuda_add_rows(ctx, y, tmp, m, w.rows, ldy);
}

void cbl_cuda_matmul_swiglu(cuda_ctx& ctx, const weight_view& gate, const weight_view& up,
                            const float* x, int64_t m, int64_t ldx, float* out, int64_t ld,
                            float* tmp, const pre_norm* norm) {
    if (m <= 0) return;
    if (gate.rows != up.rows) {
        throw kernel_error(kernel_status::invalid_arg,
                           kernel_fmt("cuda matmul_swiglu: %lld gate rows, %lld up rows",
                                      static_cast<long long>(gate.rows),
                                      static_cast<long long>(up.rows)));
    }
    if (m <= k_gemv_max_rows && joins_gemv(gate, up)) {
        check_weight_type(gate, "matmul_swiglu");
        check_weight_type(up, "matmul_swiglu");
        gemv_args ga = gemv_input(x, m, ldx, gate.cols);
        if (norm) {
            ga.norm_gamma = norm->gamma;
            ga.norm_eps = norm->eps;
        }
        ga.n_out = 2;
        ga.out[0] = gemv_out_of({gate, out, ld, nullptr});
        ga.out[1] = gemv_out_of({up, tmp, ld, nullptr});
        ga.epilogue = gemv_epilogue::swiglu;
        gemv_fused(ctx, ga, "matmul_swiglu");
        return;
    }
    const matmul_out outs[2] = {{gate, out, ld, nullptr}, {up, tmp, ld, nullptr}};
    cbl_cuda_matmuls(ctx, x, m, ldx, outs, 2, norm);
    cbl_cuda_swiglu(ctx, out, tmp, m, gate.rows, ld, out);
}

void cbl_cuda_get_rows(cuda_ctx& ctx, const weight_view& w, const int32_t* ids, int64_t m,
                       float* y, int64_t ldy) {
    if (m <= 0 || w.cols <= 0) return;
    const bool ok = with_weight_type(w.type, [&](auto tr) {
        using T = decltype(tr);
        check_weight(w, T::block_elems, T::block_bytes, "get_rows");
        dequant_args da;
        da.src = static_cast<const uint8_t*>(w.data);
        da.row_bytes = w.row_bytes;
        da.n_src_rows = w.rows;
        da.cols = w.cols;
        da.ids = ids;
        da.n_rows = m;
        da.dst = y;
        da.ld_dst = ldy;
        cbl_cuda_dequant_rows_f32<T>(ctx, da);
    });
    if (!ok) throw_unsupported(w.type, "get_rows");
}

}  // namespace cuda
}  // namespace cacheblend
