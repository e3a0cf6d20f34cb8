#include "kernels/dtype.h"

namespace cacheblend {

namespace {

// Indexed by ggml type id; name == nullptr marks ids we do not support (removed ids, IQ types,
// integer and f64 tensors). Sizes from reference/gguf-and-llama-facts.md §2.1.
constexpr dtype_traits k_unsupported{nullptr, 0, 0};
constexpr dtype_traits k_table[] = {
    {"f32", 1, 4},       // 0
    {"f16", 1, 2},       // 1
    {"q4_0", 32, 18},    // 2
    {"q4_1", 32, 20},    // 3
    k_unsupported,       // 4 (removed Q4_2)
    k_unsupported,       // 5 (removed Q4_3)
    {"q5_0", 32, 22},    // 6
    {"q5_1", 32, 24},    // 7
    {"q8_0", 32, 34},    // 8
    {"q8_1", 32, 36},    // 9
    {"q2_K", 256, 84},   // 10
    {"q3_K", 256, 110},  // 11
    {"q4_K", 256, 144},  // 12
    {"q5_K", 256, 176},  // 13
    {"q6_K", 256, 210},  // 14
    {"q8_K", 256, 292},  // 15
    k_unsupported,       // 16 IQ2_XXS
    k_unsupported,       // 17 IQ2_XS
    k_unsupported,       // 18 IQ3_XXS
    k_unsupported,       // 19 IQ1_S
    k_unsupported,       // 20 IQ4_NL
    k_unsupported,       // 21 IQ3_S
    k_unsupported,       // 22 IQ2_S
    k_unsupported,       // 23 IQ4_XS
    k_unsupported,       // 24 I8
    k_unsupported,       // 25 I16
    k_unsupported,       // 26 I32
    k_unsupported,       // 27 I64
    k_unsupported,       // 28 F64
    k_unsupported,       // 29 IQ1_M
    {"bf16", 1, 2},      // 30
};
constexpr uint32_t k_table_len = sizeof(k_table) / sizeof(k_table[0]);

}  // namespace

const dtype_traits* dtype_info(uint32_t ggml_type_id) {
    if (ggml_type_id >= k_table_len) return nullptr;
    const dtype_traits* t = &k_table[ggml_type_id];
    return t->name ? t : nullptr;
}

const char* dtype_name(dtype t) {
    const dtype_traits* info = dtype_info(t);
    return info ? info->name : "unknown";
}

size_t dtype_row_bytes(dtype t, int64_t n) {
    const dtype_traits* info = dtype_info(t);
    if (!info || n <= 0) return 0;
    return static_cast<size_t>(n / info->block_elems) * info->block_bytes;
}

}  // namespace cacheblend
