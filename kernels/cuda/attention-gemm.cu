// Attention as two GEMMs per chunk of query rows, FlashAttention's work without its fused
// kernel: S = Q K^T for every head (Q staged as f16 like a matmul's activations, f32 scores on
// tensor cores), a causal softmax by absolute position into f16 weights, O = P V, each output
// row divided by its softmax sum (math/attention-gemm-plan.h says why after the GEMM). The row
// kernel (attention.cu) folds keys one at a time, n_keys dependent steps per query row and head.
// Keys past a row's position are scored and then masked: positions are device data, so the host
// cannot trim them, and for a prefill that costs at most twice the causal work. Their weights
// are 0, so V rows [0, n_keys) must be finite, which they are: the engine writes every row below
// n_keys before it attends (the row kernel reads only visible rows). The scores of a chunk are
// materialized, so chunks are sized to bound that memory for long contexts.
#include "kernels/cuda/attention-gemm.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/block-reduce.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/math/attention-gemm-plan.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;
std::atomic<int64_t> attention_gemm_calls_{0};
// Scores (f32), weights (f16) and sums of one chunk, all heads.
constexpr size_t k_chunk_bytes = size_t(256) << 20;

struct softmax_args {
    float* s;       // [n_head][chunk][ld] scores
    __half* p;      // [n_head][chunk][ld] softmax weights exp(score - max)
    float* sums;    // [n_head][chunk] their sums (math/attention-gemm-plan.h)
    int64_t ld;     // row stride of s and p, >= n_keys
    int64_t chunk;  // rows per head in s and p
    int64_t n_keys;
    const int32_t* q_pos;  // the chunk's query positions
    const int32_t* exps;   // the chunk's f16 staging exponents (f16-staging.h)
    float scale;
};

// Block (r, h): row r of the chunk, head h. Keys j < limit (j <= q_pos[r], j < n_keys) get the
// weight exp(score - max) in f16; the rest, to n_keys, get 0 so that P V sums only visible keys.
// The sum of the rounded weights goes to sums for the output's scale.
__global__ void causal_softmax_kernel(softmax_args a) {
    __shared__ float shared[k_threads / 32];
    const int64_t r = blockIdx.x, h = blockIdx.y;
    float* sr = a.s + hd::attn_prob_row(h, r, a.chunk, a.ld);
    __half* pr = a.p + hd::attn_prob_row(h, r, a.chunk, a.ld);
    const int64_t limit = hd::attn_visible_keys(a.q_pos[r], a.n_keys);
    const int e = a.exps[r];
    float mx = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        sr[j] = hd::attn_gemm_score(sr[j], e, a.scale);
        mx = fmaxf(mx, sr[j]);
    }
    mx = block_reduce<true, k_threads>(mx, shared);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < a.n_keys; j += k_threads) {
        const __half w = __float2half_rn(j < limit ? expf(sr[j] - mx) : 0.f);
        pr[j] = w;
        sum += __half2float(w);
    }
    sum = block_reduce<false, k_threads>(sum, shared);
    if (threadIdx.x == 0) a.sums[h * a.chunk + r] = sum;
}

// Block (r, h): the chunk's output row r, head h's columns, divided by its softmax sum.
__global__ void scale_out_kernel(float* out, int64_t out_stride, int64_t d, int64_t chunk,
                                 const float* sums) {
    const int64_t r = blockIdx.x, h = blockIdx.y;
    const float f = hd::attn_gemm_out_scale(sums[h * chunk + r]);
    float* o = out + r * out_stride + h * d;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) o[c] = hd::mul_rn(o[c], f);
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// One planned step (math/attention-gemm-plan.h) on cuBLASLt, f16 operands, f32 output.
void run_step(cuda_ctx& ctx, const hd::attn_gemm_step& st, const __half* w, const __half* x,
              float* y) {
    gemm_args g;
    g.ab_type = CUDA_R_16F;
    g.w = w + st.w_off;
    g.ldw = st.ldw;
    g.x = x + st.x_off;
    g.ldx = st.ldx;
    g.y = y + st.y_off;
    g.ldy = st.ldy;
    g.m = st.m;
    g.n = st.n;
    g.k = st.k;
    g.w_kn = st.w_kn;
    g.batch = st.batch;
    g.stride_w = st.stride_w;
    g.stride_x = st.stride_x;
    g.stride_y = st.stride_y;
    cbl_cuda_gemm(ctx, g);
}

}  // namespace

int64_t cbl_cuda_attention_gemm_calls() noexcept {
    return attention_gemm_calls_.load(std::memory_order_relaxed);
}

bool cbl_cuda_attention_gemm_fits(const attention_args& a) {
    return a.n_q >= k_attn_gemm_min_rows && a.n_keys > 0 && a.head_dim % 8 == 0 &&
           a.head_dim <= k_attn_max_head_dim && a.kv_stride % 8 == 0 && a.out_stride % 4 == 0 &&
           aligned(a.k, 16) && aligned(a.v, 16) && aligned(a.out, 16);
}

void cbl_cuda_attention_gemm(cuda_ctx& ctx, const attention_args& a, int n_kv) {
    if (a.n_head > 65535)
        throw kernel_error(kernel_status::range, "cuda attention: too many heads");
    const hd::attn_gemm_layout l =
        hd::attn_gemm_layout_of(a.n_q, a.n_keys, a.n_head, n_kv, a.head_dim, k_chunk_bytes);
    const size_t probs = size_t(l.n_head) * size_t(l.chunk) * size_t(l.ld);

    // One op's scratch: the matmul's and attention_mass's slots are free while it runs.
    auto* qh = static_cast<__half*>(
        ctx.scratch(scratch_x_f16, size_t(l.chunk) * size_t(l.width) * sizeof(__half)));
    auto* exps =
        static_cast<int32_t*>(ctx.scratch(scratch_row_exponent, size_t(l.chunk) * sizeof(int32_t)));
    auto* s = static_cast<float*>(ctx.scratch(scratch_attention_probs, probs * sizeof(float)));
    auto* p = static_cast<__half*>(ctx.scratch(scratch_w_f16, probs * sizeof(__half)));
    auto* sums = static_cast<float*>(
        ctx.scratch(scratch_attention_sums, size_t(l.n_head) * size_t(l.chunk) * sizeof(float)));
    const auto* k = reinterpret_cast<const __half*>(a.k);
    const auto* v = reinterpret_cast<const __half*>(a.v);

    for (int64_t i0 = 0; i0 < a.n_q; i0 += l.chunk) {
        const int64_t rows = std::min(l.chunk, a.n_q - i0);
        cbl_cuda_f16_stage_rows(ctx, a.q + i0 * a.q_stride, rows, l.width, a.q_stride, qh, l.width,
                                exps);
        for (int64_t hh = 0; hh < l.group; ++hh) {
            run_step(ctx, hd::attn_scores_step(l, a.kv_stride, a.n_keys, rows, hh), k, qh, s);
        }
        const softmax_args sa{s, p, sums, l.ld, l.chunk, a.n_keys, a.q_pos + i0, exps, a.scale};
        CBL_CUDA_LAUNCH(dim3(unsigned(rows), unsigned(l.n_head)), k_threads, ctx.stream(),
                        causal_softmax_kernel)
        (sa);
        CBL_CUDA_LAUNCH_CHECK();
        for (int64_t hh = 0; hh < l.group; ++hh) {
            run_step(ctx,
                     hd::attn_values_step(l, a.kv_stride, a.n_keys, a.out_stride, i0, rows, hh), v,
                     p, a.out);
        }
        CBL_CUDA_LAUNCH(dim3(unsigned(rows), unsigned(l.n_head)), 128, ctx.stream(),
                        scale_out_kernel)
        (a.out + i0 * a.out_stride, a.out_stride, l.d, l.chunk, sums);
        CBL_CUDA_LAUNCH_CHECK();
    }
    attention_gemm_calls_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace cuda
}  // namespace cacheblend
