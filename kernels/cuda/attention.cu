// The row kernel, for decode and short batches: one block per (query row, head), its warps
// taking keys round-robin, each warp folding one key at a time into its own online-softmax state
// (lanes split head_dim), and the warps' partial states merged at the end. K/V rows of a KV head
// are re-read by each query head of its group (through L2). Batches of many rows go to the GEMM
// path (attention-gemm.cu); a fused FlashAttention kernel would also save its score memory.
#include "kernels/cuda/attention.cuh"

#include <cuda_fp16.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention-gemm.cuh"
#include "kernels/cuda/math/causal-mask.h"
#include "kernels/cuda/math/online-softmax.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_warps = hd::k_attn_row_warps;
constexpr int k_per_lane = k_attn_max_head_dim / 32;  // head_dim elements per lane, at most

struct attn_params {
    attention_args a;
    int group;     // query heads per KV head
    float qscale;  // scale * log2(e): scores come out in log2 units
};

__device__ inline float load_h(const uint16_t* p) { return __half2float(__ushort_as_half(*p)); }

__global__ void __launch_bounds__(k_warps * 32) attention_kernel(attn_params prm) {
    const attention_args& a = prm.a;
    const int64_t qi = blockIdx.x;
    const int h = blockIdx.y;
    const int d = a.head_dim;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t koff = int64_t(h / prm.group) * d;

    __shared__ float q[k_attn_max_head_dim];
    __shared__ float part_o[k_warps][k_attn_max_head_dim];
    __shared__ hd::softmax_state part_st[k_warps];

    const float* qrow = a.q + qi * a.q_stride + int64_t(h) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) q[c] = qrow[c] * prm.qscale;
    __syncthreads();

    const int64_t limit = hd::attn_visible_keys(a.q_pos[qi], a.n_keys);

    hd::softmax_state st = hd::softmax_empty();
    float o[k_per_lane];
#pragma unroll
    for (int t = 0; t < k_per_lane; ++t) o[t] = 0.f;

    for (int64_t j = warp; j < limit; j += k_warps) {
        const uint16_t* kr = a.k + j * a.kv_stride + koff;
        float s = 0.f;
#pragma unroll
        for (int t = 0; t < k_per_lane; ++t) {
            const int c = lane + 32 * t;
            if (c < d) s = fmaf(q[c], load_h(kr + c), s);
        }
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        float alpha, w;
        hd::softmax_step(&st, s, &alpha, &w);
        const uint16_t* vr = a.v + j * a.kv_stride + koff;
#pragma unroll
        for (int t = 0; t < k_per_lane; ++t) {
            const int c = lane + 32 * t;
            if (c < d) o[t] = hd::softmax_acc(o[t], alpha, w, load_h(vr + c));
        }
    }

#pragma unroll
    for (int t = 0; t < k_per_lane; ++t) {
        const int c = lane + 32 * t;
        if (c < d) part_o[warp][c] = o[t];
    }
    if (lane == 0) part_st[warp] = st;
    __syncthreads();

    // Merge the warps' states in a fixed order; every thread derives the same weights.
    float wgt[k_warps];
    hd::softmax_state all = part_st[0];
    wgt[0] = 1.f;
    for (int w = 1; w < k_warps; ++w) {
        float wa, wb;
        hd::softmax_merge(&all, part_st[w], &wa, &wb);
        for (int u = 0; u < w; ++u) wgt[u] *= wa;
        wgt[w] = wb;
    }
    float* out = a.out + qi * a.out_stride + int64_t(h) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.f;
        for (int w = 0; w < k_warps; ++w) acc = fmaf(part_o[w][c], wgt[w], acc);
        out[c] = hd::softmax_finish(acc, all);
    }
}

// CBL_CUDA_ATTENTION=rows keeps every batch on the row kernel: a check of the GEMM path
// against it on a GPU (scripts/gpu-check.sh), read once.
bool rows_kernel_forced() {
    static const bool forced = [] {
        const char* v = std::getenv("CBL_CUDA_ATTENTION");
        return v != nullptr && std::strcmp(v, "rows") == 0;
    }();
    return forced;
}

}  // namespace

void cbl_cuda_attention(cuda_ctx& ctx, const attention_args& a) {
    if (a.n_q <= 0 || a.n_head <= 0 || a.head_dim <= 0) return;
    const int n_kv = attention_kv_heads(a, "cuda attention");
    // The GEMM path scores every key below n_keys (and masks by position after), so it needs
    // them all written; the row kernel reads only the visible ones.
    if (!a.visible_keys_only && cbl_cuda_attention_gemm_fits(a) && !rows_kernel_forced()) {
        cbl_cuda_attention_gemm(ctx, a, n_kv);
        return;
    }
    if (a.head_dim > k_attn_max_head_dim) {
        throw kernel_error(kernel_status::unsupported,
                           kernel_fmt("cuda attention: head_dim %d > %d", a.head_dim,
                                      k_attn_max_head_dim));
    }
    if (a.n_q > 0x7fffffff || a.n_head > 65535) {
        throw kernel_error(kernel_status::range, "cuda attention: grid too large");
    }
    attn_params prm{a, a.n_head / n_kv, a.scale * 1.4426950408889634f};
    const dim3 grid(unsigned(a.n_q), unsigned(a.n_head));
    CBL_CUDA_LAUNCH(grid, k_warps * 32, ctx.stream(), attention_kernel)(prm);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
