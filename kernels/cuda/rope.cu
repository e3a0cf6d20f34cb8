#include "kernels/cuda/rope.cuh"

#include "kernels/cuda/math/rope.h"
#include "kernels/fp16.h"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 256;
constexpr int64_t k_max_blocks = int64_t(1) << 20;

hd::rope_consts make_consts(const rope_params& p, int head_dim) {
    return hd::rope_make_consts(p.style == rope_style::neox, p.n_dims, p.freq_base, p.freq_scale,
                                p.freq_factors, head_dim);
}

// One thread per (row, head, rotated pair).
__global__ void rope_kernel(rope_args a, hd::rope_consts k) {
    const int64_t total = a.m * a.n_head * k.n_rot;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(idx % k.n_rot);
        const int64_t rh = idx / k.n_rot;
        const int h = static_cast<int>(rh % a.n_head);
        const int64_t r = rh / a.n_head;
        hd::rope_pair(a.x + r * a.ldx + int64_t(h) * a.head_dim, k, a.pos[r], i);
    }
}

// Block per row (grid-stride): the row's query and key pairs rotated by rope_pair (rope_kernel's
// arithmetic), a barrier, then its keys and values rounded to f16 into the cache
// (store_rows_kernel's). The same bits as the four launches.
__global__ void rope_store_kernel(rope_store_args a, hd::rope_consts k) {
    const int64_t kd = int64_t(a.n_kv_head) * a.head_dim;
    for (int64_t r = blockIdx.x; r < a.m; r += gridDim.x) {
        const int32_t pos = a.pos[r];
        for (int idx = threadIdx.x; idx < a.n_head * k.n_rot; idx += blockDim.x) {
            const int h = idx / k.n_rot;
            hd::rope_pair(a.q + r * a.ldq + int64_t(h) * a.head_dim, k, pos, idx - h * k.n_rot);
        }
        for (int idx = threadIdx.x; idx < a.n_kv_head * k.n_rot; idx += blockDim.x) {
            const int h = idx / k.n_rot;
            hd::rope_pair(a.k + r * a.ldkv + int64_t(h) * a.head_dim, k, pos, idx - h * k.n_rot);
        }
        __syncthreads();
        const float* kr = a.k + r * a.ldkv;
        const float* vr = a.v + r * a.ldkv;
        uint16_t* kc = a.k_cache + int64_t(pos) * a.ld_cache;
        uint16_t* vc = a.v_cache + int64_t(pos) * a.ld_cache;
        for (int64_t c = threadIdx.x; c < kd; c += blockDim.x) {
            kc[c] = hd::f2h(kr[c]);
            vc[c] = hd::f2h(vr[c]);
        }
    }
}

// One thread per (row, KV head, dim pair); Key is the stored keys' element type (float or the
// f16 bits, uint16_t).
template <typename Key>
__global__ void relocate_kernel(relocate_args a, hd::rope_consts k) {
    const Key* keys = static_cast<const Key*>(a.k_src);
    const int n_pairs = (a.head_dim + 1) / 2;
    const int64_t total = a.n * a.n_kv_head * n_pairs;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int p = static_cast<int>(idx % n_pairs);
        const int64_t rh = idx / n_pairs;
        const int h = static_cast<int>(rh % a.n_kv_head);
        const int64_t r = rh / a.n_kv_head;
        const int32_t pos = a.pos[r];
        const int64_t src = r * a.ld_src + int64_t(h) * a.head_dim;
        const int64_t dst = int64_t(pos) * a.ld_cache + int64_t(h) * a.head_dim;
        hd::relocate_pair(keys + src, a.v_src + src, a.k_cache + dst, a.v_cache + dst, a.head_dim,
                          k, pos, p);
    }
}

unsigned blocks_for(int64_t total) {
    const int64_t b = (total + k_threads - 1) / k_threads;
    return unsigned(b < k_max_blocks ? b : k_max_blocks);
}

}  // namespace

void cbl_cuda_rope(cuda_ctx& ctx, const rope_args& a) {
    if (a.m <= 0 || a.n_head <= 0) return;
    const hd::rope_consts k = make_consts(a.p, a.head_dim);
    if (k.n_rot == 0) return;  // the CPU leaves x untouched too
    CBL_CUDA_LAUNCH(blocks_for(a.m * a.n_head * k.n_rot), k_threads, ctx.stream(), rope_kernel)
    (a, k);
    CBL_CUDA_LAUNCH_CHECK();
}

void cbl_cuda_rope_qk_store_kv(cuda_ctx& ctx, const rope_store_args& a) {
    if (a.m <= 0 || a.n_kv_head <= 0 || a.head_dim <= 0) return;
    const hd::rope_consts k = make_consts(a.rope, a.head_dim);
    const unsigned blocks = unsigned(a.m < k_max_blocks ? a.m : k_max_blocks);
    CBL_CUDA_LAUNCH(blocks, k_threads, ctx.stream(), rope_store_kernel)(a, k);
    CBL_CUDA_LAUNCH_CHECK();
}

void cbl_cuda_relocate_kv(cuda_ctx& ctx, const relocate_args& a) {
    if (a.k_type != dtype::f32 && a.k_type != dtype::f16) {
        throw kernel_error(kernel_status::invalid_arg,
                           kernel_fmt("relocate_kv: keys in %s (f32 or f16 only)",
                                      dtype_name(a.k_type)));
    }
    if (a.n <= 0 || a.n_kv_head <= 0 || a.head_dim <= 0) return;
    const hd::rope_consts k = make_consts(a.p, a.head_dim);
    const int64_t total = a.n * a.n_kv_head * ((a.head_dim + 1) / 2);
    if (a.k_type == dtype::f16) {
        CBL_CUDA_LAUNCH(blocks_for(total), k_threads, ctx.stream(), relocate_kernel<uint16_t>)
        (a, k);
    } else {
        CBL_CUDA_LAUNCH(blocks_for(total), k_threads, ctx.stream(), relocate_kernel<float>)(a, k);
    }
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
