#include "kernels/cuda/attention-mass.cuh"

#include <cfloat>

#include "kernels/cuda/block-reduce.cuh"
#include "kernels/cuda/math/attention-mass.h"
#include "kernels/cuda/math/causal-mask.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;

// Row r = (query i, head h) of p[rows][n_keys]: softmax over keys [0, limit), 0 beyond.
// group: query heads per KV head (attention_kv_heads).
__global__ void probs_kernel(attention_args a, int group, float* p) {
    __shared__ float shared[k_threads / 32];
    const int64_t r = blockIdx.x;
    const int64_t i = r / a.n_head;
    const int h = int(r % a.n_head);
    const float* q = a.q + i * a.q_stride + int64_t(h) * a.head_dim;
    const uint16_t* k = a.k + int64_t(h / group) * a.head_dim;
    const int64_t limit = hd::attn_visible_keys(a.q_pos[i], a.n_keys);
    float* pr = p + r * a.n_keys;
    float mx = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        pr[j] = hd::attention_score(q, k + j * a.kv_stride, a.head_dim, a.scale);
        mx = fmaxf(mx, pr[j]);
    }
    mx = block_reduce<true, k_threads>(mx, shared);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        pr[j] = expf(pr[j] - mx);
        sum += pr[j];
    }
    sum = block_reduce<false, k_threads>(sum, shared);
    for (int64_t j = threadIdx.x; j < a.n_keys; j += k_threads)
        pr[j] = j < limit ? pr[j] / sum : 0.f;
}

// scores[j] = sum over rows of p[row][j], rows in order.
__global__ void column_sum_kernel(const float* p, int64_t rows, int64_t n_keys, float* scores) {
    const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (j >= n_keys) return;
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r) s += p[r * n_keys + j];
    scores[j] = s;
}

}  // namespace

void cbl_cuda_attention_mass(cuda_ctx& ctx, const attention_args& a, float* scores) {
    const int group = a.n_head / attention_kv_heads(a, "cuda attention_mass");
    if (a.n_keys <= 0) return;
    const int64_t rows = a.n_q * a.n_head;
    if (rows <= 0) {
        CBL_CUDA_CHECK(cudaMemsetAsync(scores, 0, size_t(a.n_keys) * sizeof(float), ctx.stream()));
        return;
    }
    if (rows > 0x7fffffff) {
        throw kernel_error(kernel_status::range, "cuda attention_mass: too many query rows");
    }
    float* p = static_cast<float*>(
        ctx.scratch(scratch_attention_probs, size_t(rows * a.n_keys) * sizeof(float)));
    CBL_CUDA_LAUNCH(unsigned(rows), k_threads, ctx.stream(), probs_kernel)(a, group, p);
    CBL_CUDA_LAUNCH_CHECK();
    CBL_CUDA_LAUNCH(grid_1d(a.n_keys, k_threads), k_threads, ctx.stream(), column_sum_kernel)
    (p, rows, a.n_keys, scores);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
