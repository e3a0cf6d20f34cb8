#include "kernels/cuda/gemv.cuh"

#include "kernels/cuda/weight-types.cuh"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_warps = 4;  // output rows per block

// One warp per weight row. Lane l takes columns 8l .. 8l + 7 of every 256-column span, so one warp
// step covers a K-quant super-block (eight 32-column blocks of the others) and each lane decodes
// its sub-block's scale once for its 8 weights (hd::dequant_run8) instead of once per weight.
// Columns past the last multiple of 8 (only unquantized rows can have them) go one per lane.
// Then a shuffle reduction per activation row.
template <typename T>
__global__ void gemv_kernel(gemv_args a) {
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * k_warps + (threadIdx.x >> 5);
    if (r >= a.n) return;
    const uint8_t* row = a.w + r * a.row_bytes;
    float acc[k_gemv_max_rows] = {};
    const int64_t k8 = a.k & ~int64_t(7);
    for (int64_t c0 = int64_t(lane) * 8; c0 < k8; c0 += 32 * 8) {
        float wv[8];
        hd::dequant_run8<T>(row, c0, wv);
#pragma unroll
        for (int i = 0; i < k_gemv_max_rows; ++i) {
            if (i >= a.m) break;
            const float* x = a.x + i * a.ldx + c0;
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i] = fmaf(wv[j], x[j], acc[i]);
        }
    }
    for (int64_t c = k8 + lane; c < a.k; c += 32) {
        const float wv = hd::dequant_at<T>(row, c);
#pragma unroll
        for (int i = 0; i < k_gemv_max_rows; ++i) {
            if (i < a.m) acc[i] = fmaf(wv, a.x[i * a.ldx + c], acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < k_gemv_max_rows; ++i) {
        float s = acc[i];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0 && i < a.m) a.y[i * a.ldy + r] = a.bias ? s + a.bias[r] : s;
    }
}

}  // namespace

template <typename T>
void cbl_cuda_gemv(cuda_ctx& ctx, const gemv_args& a) {
    if (a.n <= 0 || a.m <= 0) return;
    if (a.m > k_gemv_max_rows) {
        throw kernel_error(kernel_status::internal,
                           kernel_fmt("cuda gemv: %d rows (max %d)", a.m, k_gemv_max_rows));
    }
    const unsigned blocks = grid_1d(a.n, k_warps);
    CBL_CUDA_LAUNCH(blocks, k_warps * 32, ctx.stream(), gemv_kernel<T>)(a);
    CBL_CUDA_LAUNCH_CHECK();
}

#define CBL_INSTANTIATE(T) template void cbl_cuda_gemv<T>(cuda_ctx&, const gemv_args&);
CBL_CUDA_FOR_EACH_WEIGHT_TYPE(CBL_INSTANTIATE)
#undef CBL_INSTANTIATE

}  // namespace cuda
}  // namespace cacheblend
