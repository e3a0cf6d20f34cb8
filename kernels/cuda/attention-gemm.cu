// Attention as two GEMMs per chunk of query rows, FlashAttention's work without its fused
// kernel: S = Q K^T for every head (Q staged as f16 like a matmul's activations, f32 scores on
// tensor cores), a causal softmax by absolute position into f16 probabilities, O = P V. The row
// kernel (attention.cu) folds keys one at a time, n_keys dependent steps per query row and head.
// Keys past a row's position are scored and then masked: positions are device data, so the host
// cannot trim them, and for a prefill that costs at most twice the causal work. The scores of
// a chunk are materialized, so chunks are sized to bound that memory for long contexts.
#include "kernels/cuda/attention-gemm.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/block-reduce.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/math/f16-staging.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;
// Scores (f32) and probabilities (f16) of one chunk, all heads.
constexpr size_t k_chunk_bytes = size_t(256) << 20;

struct softmax_args {
    float* s;       // [n_head][chunk][ld] scores, overwritten with exponentials
    __half* p;      // [n_head][chunk][ld] probabilities
    int64_t ld;     // row stride of s and p, >= n_keys
    int64_t chunk;  // rows per head in s and p
    int64_t n_keys;
    const int32_t* q_pos;  // the chunk's query positions
    const int32_t* exps;   // the chunk's f16 staging exponents (f16-staging.h)
    float scale;
};

// Block (r, h): row r of the chunk, head h. Keys j < limit (j <= q_pos[r], j < n_keys) get
// softmax(S * 2^-e * scale); the rest, to n_keys, get 0 so that P V sums only visible keys.
__global__ void causal_softmax_kernel(softmax_args a) {
    __shared__ float shared[k_threads / 32];
    const int64_t r = blockIdx.x, h = blockIdx.y;
    float* sr = a.s + (h * a.chunk + r) * a.ld;
    __half* pr = a.p + (h * a.chunk + r) * a.ld;
    const int64_t pos = a.q_pos[r];
    const int64_t limit = pos + 1 < a.n_keys ? (pos + 1 > 0 ? pos + 1 : 0) : a.n_keys;
    const int e = a.exps[r];
    float mx = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        sr[j] = hd::mul_rn(hd::f16_unstage(sr[j], e), a.scale);
        mx = fmaxf(mx, sr[j]);
    }
    mx = block_reduce<true, k_threads>(mx, shared);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        sr[j] = expf(sr[j] - mx);  // each thread rereads only the entries it wrote
        sum += sr[j];
    }
    sum = block_reduce<false, k_threads>(sum, shared);
    for (int64_t j = threadIdx.x; j < a.n_keys; j += k_threads) {
        pr[j] = __float2half_rn(j < limit ? sr[j] / sum : 0.f);
    }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

bool cbl_cuda_attention_gemm_fits(const attention_args& a) {
    return a.n_q >= k_attn_gemm_min_rows && a.n_keys > 0 && a.head_dim % 8 == 0 &&
           a.kv_stride % 8 == 0 && a.out_stride % 4 == 0 && aligned(a.k, 16) && aligned(a.v, 16) &&
           aligned(a.out, 16);
}

void cbl_cuda_attention_gemm(cuda_ctx& ctx, const attention_args& a, int n_kv) {
    const int64_t d = a.head_dim, n_head = a.n_head, group = n_head / n_kv;
    const int64_t width = n_head * d;           // a query row, every head
    const int64_t ld = (a.n_keys + 7) / 8 * 8;  // rows of S and P start 16-byte aligned
    const size_t row_bytes = size_t(n_head) * size_t(ld) * (sizeof(float) + sizeof(__half));
    const int64_t chunk =
        std::min<int64_t>(a.n_q, std::max<int64_t>(1, int64_t(k_chunk_bytes / row_bytes)));
    if (n_head > 65535) throw kernel_error(kernel_status::range, "cuda attention: too many heads");

    // One op's scratch: the matmul's and attention_mass's slots are free while it runs.
    auto* qh = static_cast<__half*>(
        ctx.scratch(scratch_x_f16, size_t(chunk) * size_t(width) * sizeof(__half)));
    auto* exps =
        static_cast<int32_t*>(ctx.scratch(scratch_row_exponent, size_t(chunk) * sizeof(int32_t)));
    auto* s =
        static_cast<float*>(ctx.scratch(scratch_attention_probs, size_t(n_head) * size_t(chunk) *
                                                                     size_t(ld) * sizeof(float)));
    auto* p = static_cast<__half*>(
        ctx.scratch(scratch_w_f16, size_t(n_head) * size_t(chunk) * size_t(ld) * sizeof(__half)));

    for (int64_t i0 = 0; i0 < a.n_q; i0 += chunk) {
        const int64_t rows = std::min(chunk, a.n_q - i0);
        cbl_cuda_f16_stage_rows(ctx, a.q + i0 * a.q_stride, rows, width, a.q_stride, qh, width,
                                exps);
        // Head h = b * group + hh reads KV head b. For each hh, one GEMM batched over b: its
        // operands sit at fixed strides (Q: group * d, K and V: d, S and P: group heads).
        for (int64_t hh = 0; hh < group; ++hh) {
            gemm_args g;  // S_h = Q_h K_b^T: rows x n_keys
            g.ab_type = CUDA_R_16F;
            g.w = a.k;
            g.ldw = a.kv_stride;
            g.x = qh + hh * d;
            g.ldx = width;
            g.y = s + hh * chunk * ld;
            g.ldy = ld;
            g.m = rows;
            g.n = a.n_keys;
            g.k = d;
            g.batch = n_kv;
            g.stride_w = d;
            g.stride_x = group * d;
            g.stride_y = group * chunk * ld;
            cbl_cuda_gemm(ctx, g);
        }
        softmax_args sa{s, p, ld, chunk, a.n_keys, a.q_pos + i0, exps, a.scale};
        causal_softmax_kernel<<<dim3(unsigned(rows), unsigned(n_head)), k_threads, 0,
                                ctx.stream()>>>(sa);
        CBL_CUDA_LAUNCH_CHECK();
        for (int64_t hh = 0; hh < group; ++hh) {
            gemm_args g;  // O_h = P_h V_b: rows x d, into the output's head columns
            g.ab_type = CUDA_R_16F;
            g.w = a.v;
            g.ldw = a.kv_stride;
            g.w_kn = true;
            g.x = p + hh * chunk * ld;
            g.ldx = ld;
            g.y = a.out + i0 * a.out_stride + hh * d;
            g.ldy = a.out_stride;
            g.m = rows;
            g.n = d;
            g.k = a.n_keys;
            g.batch = n_kv;
            g.stride_w = d;
            g.stride_x = group * chunk * ld;
            g.stride_y = group * d;
            cbl_cuda_gemm(ctx, g);
        }
    }
}

}  // namespace cuda
}  // namespace cacheblend
