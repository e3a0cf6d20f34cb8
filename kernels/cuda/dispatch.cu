#include "kernels/cuda/dispatch.cuh"

#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/weight-types.cuh"

namespace cacheblend {
namespace cuda {
namespace {

// Calls f(traits{}) for the weight type t and returns true, or returns false for a type the
// CUDA backend does not read yet.
template <typename F>
bool with_weight_type(dtype t, F&& f) {
    switch (t) {
        case dtype::f32: f(hd::deq_f32{}); return true;
        case dtype::f16: f(hd::deq_f16{}); return true;
        case dtype::bf16: f(hd::deq_bf16{}); return true;
        case dtype::q4_0: f(hd::deq_q4_0{}); return true;
        case dtype::q4_1: f(hd::deq_q4_1{}); return true;
        case dtype::q5_0: f(hd::deq_q5_0{}); return true;
        case dtype::q5_1: f(hd::deq_q5_1{}); return true;
        case dtype::q8_0: f(hd::deq_q8_0{}); return true;
        case dtype::q2_k: f(hd::deq_q2_k{}); return true;
        case dtype::q3_k: f(hd::deq_q3_k{}); return true;
        case dtype::q4_k: f(hd::deq_q4_k{}); return true;
        case dtype::q5_k: f(hd::deq_q5_k{}); return true;
        case dtype::q6_k: f(hd::deq_q6_k{}); return true;
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

// Largest dequantized weight panel staged at once (f16 bytes): bounds scratch memory for big
// vocabularies while keeping each GEMM large.
constexpr size_t k_panel_bytes = size_t(64) << 20;

// Prefill: activations -> f16 once (each row scaled into f16's range when it is not, see
// kernels/cuda/math/f16-staging.h), then per panel of weight rows: dequantize -> f16, GEMM into
// the panel's columns of y; finally staged rows are scaled back and the bias added in one pass.
// f16 weights are used in place; f32 weights run an f32 GEMM on x.
template <typename T>
void matmul_gemm(cuda_ctx& ctx, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                 float* y, int64_t ldy, const float* bias) {
    const int64_t n = w.rows, k = w.cols;
    const auto* wbytes = static_cast<const uint8_t*>(w.data);
    if (w.type == dtype::f32) {
        const int64_t ldw = static_cast<int64_t>(w.row_bytes / sizeof(float));
        cbl_cuda_gemm(ctx, {CUDA_R_32F, wbytes, ldw, x, ldx, y, ldy, m, n, k});
        if (bias) cbl_cuda_add_bias(ctx, y, m, n, ldy, bias);
        return;
    }
    void* xh = ctx.scratch(scratch_x_f16, size_t(m) * size_t(k) * sizeof(__half));
    auto* exps =
        static_cast<int32_t*>(ctx.scratch(scratch_row_exponent, size_t(m) * sizeof(int32_t)));
    cbl_cuda_f16_stage_rows(ctx, x, m, k, ldx, xh, k, exps);
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
    cbl_cuda_f16_unstage_rows(ctx, y, m, n, ldy, exps, bias);
}

}  // namespace

bool cbl_cuda_supports_weight(dtype t) {
    return with_weight_type(t, [](auto) {});
}

void cbl_cuda_matmul(cuda_ctx& ctx, const weight_view& w, const float* x, int64_t m, int64_t ldx,
                     float* y, int64_t ldy, const float* bias) {
    if (m <= 0 || w.rows <= 0) return;
    const bool ok = with_weight_type(w.type, [&](auto tr) {
        using T = decltype(tr);
        check_weight(w, T::block_elems, T::block_bytes, "matmul");
        if (w.cols == 0) {  // empty dot products: y = bias or 0
            CBL_CUDA_CHECK(cudaMemset2DAsync(y, size_t(ldy) * sizeof(float), 0,
                                             size_t(w.rows) * sizeof(float), size_t(m),
                                             ctx.stream()));
            if (bias) cbl_cuda_add_bias(ctx, y, m, w.rows, ldy, bias);
        } else if (m <= k_gemv_max_rows) {
            gemv_args ga;
            ga.w = static_cast<const uint8_t*>(w.data);
            ga.row_bytes = w.row_bytes;
            ga.n = w.rows;
            ga.k = w.cols;
            ga.x = x;
            ga.ldx = ldx;
            ga.m = static_cast<int>(m);
            ga.y = y;
            ga.ldy = ldy;
            ga.bias = bias;
            cbl_cuda_gemv<T>(ctx, ga);
        } else {
            matmul_gemm<T>(ctx, w, x, m, ldx, y, ldy, bias);
        }
    });
    if (!ok) throw_unsupported(w.type, "matmul");
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
