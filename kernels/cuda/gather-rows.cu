#include "kernels/cuda/gather-rows.cuh"

namespace cacheblend {
namespace cuda {
namespace {

constexpr int k_threads = 128;
constexpr int64_t k_max_blocks = 65535;

// One block per row (grid-stride over rows), its threads over the row's words: KV rows are a
// few hundred 4-byte words, so a block moves one row in one or two coalesced passes.
template <typename W>
__global__ void gather_rows_kernel(const uint8_t* src, size_t src_stride, const int32_t* idx,
                                   int64_t n, size_t words, uint8_t* dst, size_t dst_stride) {
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const W* s = reinterpret_cast<const W*>(src + size_t(idx[r]) * src_stride);
        W* d = reinterpret_cast<W*>(dst + size_t(r) * dst_stride);
        for (size_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
    }
}

}  // namespace

void cbl_cuda_gather_rows(cuda_ctx& ctx, const void* src, size_t src_stride, const int32_t* idx,
                          int64_t n, size_t row_bytes, void* dst, size_t dst_stride) {
    if (n <= 0 || row_bytes == 0) return;
    const unsigned blocks = unsigned(n < k_max_blocks ? n : k_max_blocks);
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    // Whole 4-byte words when every address and length allows (f32 and f16 KV rows of an even
    // width always do), else bytes.
    const bool words = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                         src_stride | dst_stride | row_bytes) &
                        3u) == 0;
    if (words) {
        CBL_CUDA_LAUNCH(blocks, k_threads, ctx.stream(), gather_rows_kernel<uint32_t>)
        (s, src_stride, idx, n, row_bytes / 4, d, dst_stride);
    } else {
        CBL_CUDA_LAUNCH(blocks, k_threads, ctx.stream(), gather_rows_kernel<uint8_t>)
        (s, src_stride, idx, n, row_bytes, d, dst_stride);
    }
    CBL_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace cacheblend
