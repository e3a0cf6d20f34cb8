#include "kernels/cuda/gemm.cuh"

#include <cstdint>

namespace cacheblend {
namespace cuda {

bool gemm_plan_key::operator==(const gemm_plan_key& o) const {
    return m == o.m && n == o.n && k == o.k && ldw == o.ldw && ldx == o.ldx && ldy == o.ldy &&
           ab_type == o.ab_type && align_w == o.align_w && align_x == o.align_x &&
           align_y == o.align_y;
}

size_t gemm_plan_key_hash::operator()(const gemm_plan_key& k) const noexcept {
    size_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(uint64_t(k.m)); mix(uint64_t(k.n)); mix(uint64_t(k.k));
    mix(uint64_t(k.ldw)); mix(uint64_t(k.ldx)); mix(uint64_t(k.ldy));
    mix(uint64_t(k.ab_type));
    mix(uint64_t(k.align_w) << 32 | uint64_t(k.align_x) << 16 | uint64_t(k.align_y));
    return h;
}

gemm_plan::~gemm_plan() {
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (op) cublasLtMatmulDescDestroy(op);
}

namespace {

int alignment_of(const void* p) {
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    int a = 256;
    while (a > 1 && (v % a) != 0) a >>= 1;
    return a;
}

void set_pref_u32(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                  uint32_t v) {
    CBL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
}

// cuBLASLt is column-major. Row-major y[m][ldy] is the column-major n x m matrix Y^T, and
//   Y^T = W * X^T  with  W = (column-major k x n, ld ldw)^T,  X^T = column-major k x m (ld ldx),
// so A = w (transposed), B = x (as is), C = D = y.
std::unique_ptr<gemm_plan> make_plan(cuda_ctx& ctx, const gemm_plan_key& key) {
    auto plan = std::make_unique<gemm_plan>();
    const cudaDataType_t ab = static_cast<cudaDataType_t>(key.ab_type);
    CBL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_w = CUBLAS_OP_T, trans_x = CUBLAS_OP_N;
    CBL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &trans_w, sizeof(trans_w)));
    CBL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &trans_x, sizeof(trans_x)));
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->w, ab, uint64_t(key.k), uint64_t(key.n),
                                                key.ldw));
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->x, ab, uint64_t(key.k), uint64_t(key.m),
                                                key.ldx));
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->y, CUDA_R_32F, uint64_t(key.n),
                                                uint64_t(key.m), key.ldy));

    cublasLtMatmulPreference_t pref = nullptr;
    CBL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    struct pref_guard {
        cublasLtMatmulPreference_t p;
        ~pref_guard() { cublasLtMatmulPreferenceDestroy(p); }
    } guard{pref};
    const uint64_t ws = ctx.workspace_bytes();
    CBL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // The default assumes 256-byte aligned buffers; callers may pass row offsets.
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(key.align_w));
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(key.align_x));
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(key.align_y));
    set_pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(key.align_y));

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CBL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), plan->op, plan->w, plan->x,
                                                    plan->y, plan->y, pref, 1, &result, &found));
    if (found < 1) {
        throw kernel_error(
            kernel_status::unsupported,
            kernel_fmt("cublasLt: no algorithm for m=%lld n=%lld k=%lld (lds %lld %lld %lld)",
                       static_cast<long long>(key.m), static_cast<long long>(key.n),
                       static_cast<long long>(key.k), static_cast<long long>(key.ldw),
                       static_cast<long long>(key.ldx), static_cast<long long>(key.ldy)));
    }
    plan->algo = result.algo;
    return plan;
}

}  // namespace

const gemm_plan& gemm_plan_cache::get(cuda_ctx& ctx, const gemm_plan_key& key) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    std::unique_ptr<gemm_plan> plan = make_plan(ctx, key);
    if (plans_.size() >= k_max_plans) plans_.clear();
    return *plans_.emplace(key, std::move(plan)).first->second;
}

void cbl_cuda_gemm(cuda_ctx& ctx, const gemm_args& a) {
    if (a.m <= 0 || a.n <= 0) return;
    const gemm_plan_key key{a.m,   a.n,   a.k, a.ldw, a.ldx, a.ldy, static_cast<int>(a.ab_type),
                            alignment_of(a.w), alignment_of(a.x), alignment_of(a.y)};
    const gemm_plan& p = ctx.plans().get(ctx, key);
    const float alpha = 1.f, beta = 0.f;
    CBL_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt(), p.op, &alpha, a.w, p.w, a.x, p.x, &beta, a.y,
                                    p.y, a.y, p.y, &p.algo, ctx.workspace(),
                                    ctx.workspace_bytes(), ctx.stream()));
}

}  // namespace cuda
}  // namespace cacheblend
