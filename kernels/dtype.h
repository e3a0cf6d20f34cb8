// Tensor element types, numbered as ggml_type ids so GGUF tensor infos map 1:1.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cacheblend {

enum class dtype : uint32_t {
    f32 = 0,
    f16 = 1,
    q4_0 = 2,
    q4_1 = 3,
    q5_0 = 6,
    q5_1 = 7,
    q8_0 = 8,
    q8_1 = 9,   // activation side only (dot products with q4_1 / q5_1)
    q2_k = 10,
    q3_k = 11,
    q4_k = 12,
    q5_k = 13,
    q6_k = 14,
    q8_k = 15,  // activation side only (dot products with k-quants)
    bf16 = 30,
};

struct dtype_traits {
    const char* name;
    int64_t block_elems;  // elements per block (1 for f32/f16/bf16)
    size_t block_bytes;   // bytes per block
};

// Traits of a ggml type id, or nullptr when the id is not one we support (unknown ids included).
const dtype_traits* dtype_info(uint32_t ggml_type_id);
inline const dtype_traits* dtype_info(dtype t) { return dtype_info(static_cast<uint32_t>(t)); }
const char* dtype_name(dtype t);

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers).
size_t dtype_row_bytes(dtype t, int64_t n);

}  // namespace cacheblend
