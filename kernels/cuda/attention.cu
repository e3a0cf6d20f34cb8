// The row kernel, for decode and short batches: one block per (query row, head, split of the
// keys), its warps taking keys round-robin, each warp folding one key at a time into its own
// online-softmax state (lanes split head_dim), and the warps' partial states merged at the end.
// Where a row sees many keys they are split over several blocks (flash-decoding), so a decode
// step's few heads fill the GPU: each block leaves its unnormalized output and state in a fixed
// buffer, and the block that counts in last (an arrival counter per row and head, reset by it)
// merges them and writes the row. K/V rows of a KV head are re-read by each query head of its
// group (through L2). Batches of many rows go to the GEMM path (attention-gemm.cu); a fused
// FlashAttention kernel would also save its score memory.
#include "kernels/cuda/attention.cuh"

#include <cuda_fp16.h>

#include <atomic>
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

// Blocks per SM the split aims for (a block is 512 threads; __launch_bounds__ keeps its registers
// to what lets two share an SM: 56 a thread on sm_90 without the bound), splits per row at most,
// and partial slots (row, head, split) the fixed buffer holds.
constexpr int k_blocks_per_sm = 2;
constexpr int k_max_splits = 64;
constexpr int64_t k_split_slots = 8192;
std::atomic<int64_t> split_calls_{0};

struct attn_params {
    attention_args a;
    int group;     // query heads per KV head
    float qscale;  // scale * log2(e): scores come out in log2 units
    int n_split;   // blocks per (row, head) over the keys (grid z); 1: no partials
    unsigned* arrivals;             // [n_q * n_head] (n_split > 1), 0 between launches
    hd::softmax_state* partial_st;  // [n_q * n_head * n_split]
    float* partial_o;               // [n_q * n_head * n_split][head_dim], unnormalized
};

// Bytes of the fixed buffer: arrival counters, then states, then outputs.
constexpr size_t k_partials_bytes = k_split_slots * (sizeof(unsigned) + sizeof(hd::softmax_state) +
                                                     k_attn_max_head_dim * sizeof(float));

__device__ inline float load_h(const uint16_t* p) { return __half2float(__ushort_as_half(*p)); }

__global__ void __launch_bounds__(k_warps * 32, k_blocks_per_sm) attention_kernel(attn_params prm) {
    const attention_args& a = prm.a;
    const int64_t qi = blockIdx.x;
    const int h = blockIdx.y;
    const int split = blockIdx.z;
    const int d = a.head_dim;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t koff = int64_t(h / prm.group) * d;

    const int64_t limit = hd::attn_visible_keys(a.q_pos[qi], a.n_keys);
    const int64_t chunk = prm.n_split > 1 ? hd::attn_split_chunk(limit, prm.n_split) : limit;
    const int n_active = prm.n_split > 1 ? hd::attn_active_splits(limit, chunk) : 1;
    if (split >= n_active) return;  // the whole block: this row sees fewer keys
    const int64_t j0 = int64_t(split) * chunk;
    const int64_t j1 = n_active == 1 ? limit : (j0 + chunk < limit ? j0 + chunk : limit);

    __shared__ float q[k_attn_max_head_dim];
    __shared__ float part_o[k_warps][k_attn_max_head_dim];
    __shared__ hd::softmax_state part_st[k_warps];
    __shared__ int merge_here;

    const float* qrow = a.q + qi * a.q_stride + int64_t(h) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) q[c] = qrow[c] * prm.qscale;
    __syncthreads();

    hd::softmax_state st = hd::softmax_empty();
    float o[k_per_lane];
#pragma unroll
    for (int t = 0; t < k_per_lane; ++t) o[t] = 0.f;

    for (int64_t j = j0 + warp; j < j1; j += k_warps) {
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
    // The block's output: the row itself when it is the row's only split, else this split's
    // unnormalized part for the merge below.
    const int64_t row_head = qi * a.n_head + h;
    const int64_t base = row_head * prm.n_split;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.f;
        for (int w = 0; w < k_warps; ++w) acc = fmaf(part_o[w][c], wgt[w], acc);
        if (n_active == 1) {
            out[c] = hd::softmax_finish(acc, all);
        } else {  // partial_o is null in a launch of one split
            prm.partial_o[(base + split) * d + c] = acc;
        }
    }
    if (n_active == 1) return;

    // One of several splits: publish this part's state, then count in; the last one merges.
    if (threadIdx.x == 0) prm.partial_st[base + split] = all;
    __threadfence();  // this block's part is visible device-wide before its arrival counts
    __syncthreads();
    if (threadIdx.x == 0) {
        merge_here = atomicAdd(prm.arrivals + row_head, 1u) == unsigned(n_active - 1);
        __threadfence();  // the other parts are read after the count that saw them all
    }
    __syncthreads();
    if (!merge_here) return;

    // Every split's part, rescaled to the largest max: out = sum(o_s w_s) / sum(l_s w_s),
    // w_s = exp2(m_s - m), in split order (each thread derives the same sums).
    const volatile hd::softmax_state* sts = prm.partial_st + base;
    float m = hd::neg_inf();
    for (int s = 0; s < n_active; ++s) m = hd::max_f(m, sts[s].m);
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        const volatile float* po = prm.partial_o + base * d + c;
        float acc = 0.f, l = 0.f;
        for (int s = 0; s < n_active; ++s) {
            const float w = hd::exp2_f(sts[s].m - m);
            acc = hd::fma_rn(po[int64_t(s) * d], w, acc);
            l = hd::fma_rn(sts[s].l, w, l);
        }
        out[c] = l > 0.f ? acc / l : 0.f;
    }
    if (threadIdx.x == 0) prm.arrivals[row_head] = 0;  // as found, for the next launch
}

// Blocks per (row, head) to fill the GPU: about k_blocks_per_sm per SM over all rows and heads,
// within the fixed buffer; 1 where the rows and heads fill it already.
int split_count(cuda_ctx& ctx, int64_t n_q, int n_head) {
    const int64_t heads = n_q * n_head;
    const int64_t target = int64_t(k_blocks_per_sm) * ctx.sm_count();
    int64_t s = (target + heads - 1) / heads;
    s = s < k_max_splits ? s : k_max_splits;
    s = s < k_split_slots / heads ? s : k_split_slots / heads;
    return s > 1 ? int(s) : 1;
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

int64_t cbl_cuda_attention_split_calls() noexcept {
    return split_calls_.load(std::memory_order_relaxed);
}

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
    attn_params prm{};
    prm.a = a;
    prm.group = a.n_head / n_kv;
    prm.qscale = a.scale * 1.4426950408889634f;
    prm.n_split = split_count(ctx, a.n_q, a.n_head);
    if (prm.n_split > 1) {
        auto* base = static_cast<unsigned char*>(ctx.fixed_zeroed(k_partials_bytes));
        prm.arrivals = reinterpret_cast<unsigned*>(base);
        prm.partial_st =
            reinterpret_cast<hd::softmax_state*>(base + k_split_slots * sizeof(unsigned));
        prm.partial_o = reinterpret_cast<float*>(
            base + k_split_slots * (sizeof(unsigned) + sizeof(hd::softmax_state)));
        split_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    const dim3 grid(unsigned(a.n_q), unsigned(a.n_head), unsigned(prm.n_split));
    CBL_CUDA_LAUNCH(grid, k_warps * 32, ctx.stream(), attention_kernel)(prm);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
