// Built instead of igemm-amx.cpp when the compiler does not accept -mamx-tile -mamx-int8
// (CMakeLists.txt): the AMX prefill kernel is absent and matmul keeps the VNNI one.
#include "kernels/cpu/igemm.h"

namespace cacheblend {
namespace igemm {

bool amx_built() { return false; }

void gemm_rows_amx(dtype, int64_t, const void*, size_t, int64_t, const acts&, int64_t, int64_t, float*, int64_t) {}

}  // namespace igemm
}  // namespace cacheblend
