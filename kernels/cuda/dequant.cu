#include "kernels/cuda/dequant.cuh"

#include <cuda_fp16.h>

#include "kernels/cuda/weight-types.cuh"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;

__device__ inline void store_elem(float* p, float v) { *p = v; }
// GEMM staging only (the KV cache uses hd::f2h): __float2half_rn rounds finite values exactly
// like hd::f2h and is one instruction.
__device__ inline void store_elem(__half* p, float v) { *p = __float2half_rn(v); }

// One thread per output element, grid-stride over rows x cols.
template <typename T, typename Out>
__global__ void dequant_rows_kernel(dequant_args a) {
    const int64_t total = a.n_rows * a.cols;
    Out* dst = static_cast<Out*>(a.dst);
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = idx / a.cols;
        const int64_t c = idx - r * a.cols;
        const int64_t sr = a.ids ? a.ids[r] : a.row0 + r;
        float v = 0.f;  // an id outside the weight gives a zero row, as on the CPU
        if (sr >= 0 && sr < a.n_src_rows) v = hd::dequant_at<T>(a.src + sr * a.row_bytes, c);
        store_elem(dst + r * a.ld_dst + c, v);
    }
}

// The same for rows of a multiple of 8 columns (every model's weights): one thread per 8 outputs,
// which share one sub-block scale, decoded once (hd::dequant_run8); bit-identical values.
template <typename T, typename Out>
__global__ void dequant_rows8_kernel(dequant_args a) {
    const int64_t runs = a.cols / 8;
    const int64_t total = a.n_rows * runs;
    Out* dst = static_cast<Out*>(a.dst);
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = idx / runs;
        const int64_t c0 = (idx - r * runs) * 8;
        const int64_t sr = a.ids ? a.ids[r] : a.row0 + r;
        float v[8] = {};  // an id outside the weight gives a zero row, as on the CPU
        if (sr >= 0 && sr < a.n_src_rows) hd::dequant_run8<T>(a.src + sr * a.row_bytes, c0, v);
        Out* d = dst + r * a.ld_dst + c0;
#pragma unroll
        for (int j = 0; j < 8; ++j) store_elem(d + j, v[j]);
    }
}

template <typename T, typename Out>
void launch(cuda_ctx& ctx, const dequant_args& a) {
    if (a.n_rows <= 0 || a.cols <= 0) return;
    const bool by8 = a.cols % 8 == 0;
    const int64_t total = a.n_rows * (by8 ? a.cols / 8 : a.cols);
    const unsigned blocks = grid_1d(total < (int64_t(1) << 28) ? total : (int64_t(1) << 28),
                                    k_threads);
    if (by8) {
        CBL_CUDA_LAUNCH(blocks, k_threads, ctx.stream(), dequant_rows8_kernel<T, Out>)(a);
    } else {
        CBL_CUDA_LAUNCH(blocks, k_threads, ctx.stream(), dequant_rows_kernel<T, Out>)(a);
    }
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace

template <typename T>
void cbl_cuda_dequant_rows_f32(cuda_ctx& ctx, const dequant_args& a) {
    launch<T, float>(ctx, a);
}

template <typename T>
void cbl_cuda_dequant_rows_f16(cuda_ctx& ctx, const dequant_args& a) {
    launch<T, __half>(ctx, a);
}

#define CBL_INSTANTIATE(id, T)                                                  \
    template void cbl_cuda_dequant_rows_f32<T>(cuda_ctx&, const dequant_args&); \
    template void cbl_cuda_dequant_rows_f16<T>(cuda_ctx&, const dequant_args&);
CBL_CUDA_FOR_EACH_WEIGHT_TYPE(CBL_INSTANTIATE)
#undef CBL_INSTANTIATE

}  // namespace cuda
}  // namespace cacheblend
