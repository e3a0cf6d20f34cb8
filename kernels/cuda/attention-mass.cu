#include "kernels/cuda/attention-mass.cuh"

#include <cfloat>

#include "kernels/cuda/math/attention-mass.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;

// Block-wide max or sum of one value per thread (k_threads, a multiple of 32).
template <bool Max>
__device__ float block_reduce(float v, float* shared) {
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = Max ? fmaxf(v, o) : v + o;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < k_threads / 32 ? shared[lane] : (Max ? -FLT_MAX : 0.f);
        for (int off = 16; off > 0; off >>= 1) {
            const float o = __shfl_xor_sync(0xffffffffu, v, off);
            v = Max ? fmaxf(v, o) : v + o;
        }
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    const float r = shared[0];
    __syncthreads();  // shared is reused by the next reduction
    return r;
}

// Row r = (query i, head h) of p[rows][n_keys]: softmax over keys [0, limit), 0 beyond.
__global__ void probs_kernel(attention_args a, float* p) {
    __shared__ float shared[k_threads / 32];
    const int64_t r = blockIdx.x;
    const int64_t i = r / a.n_head;
    const int h = int(r % a.n_head);
    const int group = a.n_head / a.n_kv_head;
    const float* q = a.q + i * a.q_stride + int64_t(h) * a.head_dim;
    const uint16_t* k = a.k + int64_t(h / group) * a.head_dim;
    const int64_t visible = int64_t(a.q_pos[i]) + 1;
    const int64_t limit = visible < a.n_keys ? visible : a.n_keys;
    float* pr = p + r * a.n_keys;
    float mx = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        pr[j] = hd::attention_score(q, k + j * a.kv_stride, a.head_dim, a.scale);
        mx = fmaxf(mx, pr[j]);
    }
    mx = block_reduce<true>(mx, shared);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < limit; j += k_threads) {
        pr[j] = expf(pr[j] - mx);
        sum += pr[j];
    }
    sum = block_reduce<false>(sum, shared);
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
    // As the CPU: a division by zero does not trap on the device, it reads out of bounds.
    if (a.n_kv_head <= 0 || a.n_head % a.n_kv_head != 0) {
        throw kernel_error(kernel_status::invalid_arg,
                           kernel_fmt("attention_mass: %d heads do not group over %d KV heads",
                                      a.n_head, a.n_kv_head));
    }
    if (a.n_keys <= 0) return;
    const int64_t rows = a.n_q * a.n_head;
    if (rows <= 0) {
        CBL_CUDA_CHECK(cudaMemsetAsync(scores, 0, size_t(a.n_keys) * sizeof(float), ctx.stream()));
        return;
    }
    float* p = static_cast<float*>(
        ctx.scratch(scratch_attention_probs, size_t(rows * a.n_keys) * sizeof(float)));
    probs_kernel<<<unsigned(rows), k_threads, 0, ctx.stream()>>>(a, p);
    CBL_CUDA_LAUNCH_CHECK();
    column_sum_kernel<<<grid_1d(a.n_keys, k_threads), k_threads, 0, ctx.stream()>>>(p, rows,
                                                                                    a.n_keys,
                                                                                    scores);
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
