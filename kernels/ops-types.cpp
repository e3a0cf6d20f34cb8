#include "kernels/ops-types.h"

#include "kernels/kernel-error.h"

namespace cacheblend {

int attention_kv_heads(const attention_args& a, const char* op) {
    const int n_kv = a.n_kv_head == 0 ? a.n_head : a.n_kv_head;
    if (a.n_head == 0 && a.n_kv_head >= 0) return n_kv > 0 ? n_kv : 1;  // no query heads
    if (a.n_head < 0 || n_kv <= 0 || a.n_head % n_kv != 0) {
        throw kernel_error(kernel_status::invalid_arg,
                           kernel_fmt("%s: %d query heads do not group over %d KV heads", op,
                                      a.n_head, a.n_kv_head));
    }
    return n_kv;
}

}  // namespace cacheblend
