#include "kernels/cuda/gemv.cuh"

#include "kernels/cuda/math/elementwise.h"
#include "kernels/cuda/rms-block-sum.cuh"
#include "kernels/cuda/weight-types.cuh"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_warps = 4;  // output rows per block

__host__ __device__ inline int64_t blocks_of(int64_t n) { return (n + k_warps - 1) / k_warps; }

// x[i][c] as the product reads it: the row itself, or (Norm) normalized as rms_norm_kernel writes
// it. Its own struct, by value: the kernel indexes its outs at run time, which may put its
// arguments in local memory, and the loop should not read them from there.
struct gemv_input {
    const float* x;
    int64_t ldx;
    const float* gamma;
    float scale[k_gemv_max_rows];
};

template <bool Norm>
__device__ inline float input_at(const gemv_input& in, int i, int64_t c) {
    const float v = in.x[i * in.ldx + c];
    return Norm ? hd::rms_norm_apply(v, in.scale[i], in.gamma[c]) : v;
}

// acc[i] = dot(dequant(row), x[i]) for i < m, on every lane. Lane l takes columns 8l .. 8l + 7 of
// every 256-column span, so one warp step covers a K-quant super-block (eight 32-column blocks of
// the others) and each lane decodes its sub-block's scale once for its 8 weights
// (hd::dequant_run8) instead of once per weight. Columns past the last multiple of 8 (only
// unquantized rows can have them) go one per lane. Then a butterfly reduction per activation row.
template <typename T, bool Norm>
__device__ void dot_row(const uint8_t* row, const gemv_input& in, int64_t k, int m, int lane,
                        float (&acc)[k_gemv_max_rows]) {
#pragma unroll
    for (int i = 0; i < k_gemv_max_rows; ++i) acc[i] = 0.f;
    const int64_t k8 = k & ~int64_t(7);
    for (int64_t c0 = int64_t(lane) * 8; c0 < k8; c0 += 32 * 8) {
        float wv[8];
        hd::dequant_run8<T>(row, c0, wv);
#pragma unroll
        for (int i = 0; i < k_gemv_max_rows; ++i) {
            if (i >= m) break;
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i] = fmaf(wv[j], input_at<Norm>(in, i, c0 + j), acc[i]);
        }
    }
    for (int64_t c = k8 + lane; c < k; c += 32) {
        const float wv = hd::dequant_at<T>(row, c);
#pragma unroll
        for (int i = 0; i < k_gemv_max_rows; ++i) {
            if (i < m) acc[i] = fmaf(wv, input_at<Norm>(in, i, c), acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < k_gemv_max_rows; ++i) {
        for (int off = 16; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], off);
    }
}

// acc = the products of row r of o, of weight type T (or of o.type).
template <typename T, bool Norm>
struct out_row {
    __device__ static void dot(const gemv_out& o, int64_t r, const gemv_input& in, int64_t k, int m,
                               int lane, float (&acc)[k_gemv_max_rows]) {
        dot_row<T, Norm>(o.w + r * o.row_bytes, in, k, m, lane, acc);
    }
};

template <bool Norm>
struct out_row<gemv_mixed_types, Norm> {
    __device__ static void dot(const gemv_out& o, int64_t r, const gemv_input& in, int64_t k, int m,
                               int lane, float (&acc)[k_gemv_max_rows]) {
        switch (o.type) {
#define CBL_CASE(id, T) \
    case id: dot_row<T, Norm>(o.w + r * o.row_bytes, in, k, m, lane, acc); return;
            CBL_CUDA_FOR_EACH_WEIGHT_TYPE(CBL_CASE)
#undef CBL_CASE
            default:  // the host checks every type first (dispatch.cu)
#pragma unroll
                for (int i = 0; i < k_gemv_max_rows; ++i) acc[i] = 0.f;
        }
    }
};

// One warp per weight row. The outs' blocks follow one another in the grid (store, accumulate);
// for swiglu a warp takes row r of both gate and up. With a norm every block first reduces the
// input rows itself (a few KB from L2), which costs less than a launch that writes them out.
template <typename T, bool Norm>
__global__ void gemv_kernel(gemv_args a) {
    const int lane = threadIdx.x & 31;
    gemv_input in{a.x, a.ldx, a.norm_gamma, {}};
    if (Norm) {  // every thread, before any returns: the reduction has barriers
        __shared__ double partial[k_rms_threads / 32];
        for (int i = 0; i < a.m; ++i) {
            const double sum = rms_block_sum<k_warps * 32>(a.x + i * a.ldx, a.k, partial);
            in.scale[i] = hd::rms_norm_scale(sum, a.k, a.norm_eps);
        }
    }
    int64_t b = blockIdx.x;
    int j = 0;
    if (a.epilogue != gemv_epilogue::swiglu) {
        while (j + 1 < a.n_out && b >= blocks_of(a.out[j].n)) b -= blocks_of(a.out[j++].n);
    }
    const gemv_out& o = a.out[j];
    const int64_t r = b * k_warps + (threadIdx.x >> 5);
    if (r >= o.n) return;
    float acc[k_gemv_max_rows];
    out_row<T, Norm>::dot(o, r, in, a.k, a.m, lane, acc);
    float up[k_gemv_max_rows] = {};
    if (a.epilogue == gemv_epilogue::swiglu)
        out_row<T, Norm>::dot(a.out[1], r, in, a.k, a.m, lane, up);
    if (lane != 0) return;
#pragma unroll
    for (int i = 0; i < k_gemv_max_rows; ++i) {
        if (i >= a.m) break;
        const float s = o.bias ? acc[i] + o.bias[r] : acc[i];
        float* y = o.y + i * o.ldy + r;
        switch (a.epilogue) {
            case gemv_epilogue::store: *y = s; break;
            case gemv_epilogue::accumulate: *y = hd::add(*y, s); break;
            case gemv_epilogue::swiglu: {
                const float u = a.out[1].bias ? up[i] + a.out[1].bias[r] : up[i];
                *y = hd::swiglu(s, u);
                break;
            }
        }
    }
}

}  // namespace

template <typename T>
void cbl_cuda_gemv(cuda_ctx& ctx, const gemv_args& a) {
    if (a.m <= 0) return;
    if (a.m > k_gemv_max_rows || a.n_out < 1 || a.n_out > k_gemv_max_outs ||
        (a.epilogue == gemv_epilogue::swiglu && (a.n_out != 2 || a.out[0].n != a.out[1].n))) {
        throw kernel_error(kernel_status::internal,
                           kernel_fmt("cuda gemv: %d rows (max %d), %d weights (max %d)", a.m,
                                      k_gemv_max_rows, a.n_out, k_gemv_max_outs));
    }
    int64_t blocks = 0;
    if (a.epilogue == gemv_epilogue::swiglu) {
        blocks = blocks_of(a.out[0].n);
    } else {
        for (int j = 0; j < a.n_out; ++j) blocks += blocks_of(a.out[j].n);
    }
    if (blocks <= 0) return;
    const unsigned grid = grid_1d(blocks * k_warps, k_warps);
    if (a.norm_gamma) {
        CBL_CUDA_LAUNCH(grid, k_warps * 32, ctx.stream(), gemv_kernel<T, true>)(a);
    } else {
        CBL_CUDA_LAUNCH(grid, k_warps * 32, ctx.stream(), gemv_kernel<T, false>)(a);
    }
    CBL_CUDA_LAUNCH_CHECK();
}

#define CBL_INSTANTIATE(id, T) template void cbl_cuda_gemv<T>(cuda_ctx&, const gemv_args&);
CBL_CUDA_FOR_EACH_WEIGHT_TYPE(CBL_INSTANTIATE)
CBL_INSTANTIATE(mixed, gemv_mixed_types)
#undef CBL_INSTANTIATE

}  // namespace cuda
}  // namespace cacheblend
