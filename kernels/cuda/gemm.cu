#include "kernels/cuda/gemm.cuh"

#include <cstdint>

namespace cacheblend {
namespace cuda {

bool gemm_plan_key::operator==(const gemm_plan_key& o) const {
    return m == o.m && n == o.n && k == o.k && ldw == o.ldw && ldx == o.ldx && ldy == o.ldy &&
           stride_w == o.stride_w && stride_x == o.stride_x && stride_y == o.stride_y &&
           batch == o.batch && w_kn == o.w_kn && ab_type == o.ab_type && align_w == o.align_w &&
           align_x == o.align_x && align_y == o.align_y;
}

size_t gemm_plan_key_hash::operator()(const gemm_plan_key& k) const noexcept {
    size_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(uint64_t(k.m)); mix(uint64_t(k.n)); mix(uint64_t(k.k));
    mix(uint64_t(k.ldw)); mix(uint64_t(k.ldx)); mix(uint64_t(k.ldy));
    mix(uint64_t(k.stride_w));
    mix(uint64_t(k.stride_x));
    mix(uint64_t(k.stride_y));
    mix(uint64_t(k.batch) << 1 | uint64_t(k.w_kn));
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

int alignment_of(uintptr_t v) {
    int a = 256;
    while (a > 1 && (v % a) != 0) a >>= 1;
    return a;
}

// The alignment every matrix of a batch keeps: the first one's, and that of the stride between.
int alignment_of(const void* p, int batch, int64_t stride, size_t elem_bytes) {
    const int a = alignment_of(reinterpret_cast<uintptr_t>(p));
    if (batch <= 1) return a;
    const int b = alignment_of(static_cast<uintptr_t>(stride) * elem_bytes);
    return a < b ? a : b;
}

void set_pref_u32(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                  uint32_t v) {
    CBL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
}

// Makes `layout` describe `batch` matrices `stride` elements apart (nothing for one matrix).
void set_batch(cublasLtMatrixLayout_t layout, int batch, int64_t stride) {
    if (batch <= 1) return;
    const int32_t count = batch;
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof(count)));
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout,
                                                      CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &stride, sizeof(stride)));
}

// cuBLASLt is column-major. Row-major y[m][ldy] is the column-major n x m matrix Y^T, and
//   Y^T = W * X^T  with  W = (column-major k x n, ld ldw)^T,  X^T = column-major k x m (ld ldx),
// so A = w (transposed), B = x (as is), C = D = y. With w_kn, row-major w[k][ldw] is the
// column-major n x k matrix that Y^T = w^T * X^T needs as it is: A = w, not transposed.
std::unique_ptr<gemm_plan> make_plan(cuda_ctx& ctx, const gemm_plan_key& key) {
    auto plan = std::make_unique<gemm_plan>();
    const cudaDataType_t ab = static_cast<cudaDataType_t>(key.ab_type);
    CBL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_w = key.w_kn ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasOperation_t trans_x = CUBLAS_OP_N;
    CBL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &trans_w, sizeof(trans_w)));
    CBL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &trans_x, sizeof(trans_x)));
    if (key.w_kn) {
        CBL_CUBLAS_CHECK(
            cublasLtMatrixLayoutCreate(&plan->w, ab, uint64_t(key.n), uint64_t(key.k), key.ldw));
    } else {
        CBL_CUBLAS_CHECK(
            cublasLtMatrixLayoutCreate(&plan->w, ab, uint64_t(key.k), uint64_t(key.n), key.ldw));
    }
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->x, ab, uint64_t(key.k), uint64_t(key.m),
                                                key.ldx));
    CBL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->y, CUDA_R_32F, uint64_t(key.n),
                                                uint64_t(key.m), key.ldy));
    set_batch(plan->w, key.batch, key.stride_w);
    set_batch(plan->x, key.batch, key.stride_x);
    set_batch(plan->y, key.batch, key.stride_y);

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
    if (a.m <= 0 || a.n <= 0 || a.batch <= 0) return;
    const size_t ab_bytes = a.ab_type == CUDA_R_32F ? 4 : 2;
    const gemm_plan_key key{a.m,
                            a.n,
                            a.k,
                            a.ldw,
                            a.ldx,
                            a.ldy,
                            a.batch > 1 ? a.stride_w : 0,
                            a.batch > 1 ? a.stride_x : 0,
                            a.batch > 1 ? a.stride_y : 0,
                            a.batch,
                            a.w_kn,
                            static_cast<int>(a.ab_type),
                            alignment_of(a.w, a.batch, a.stride_w, ab_bytes),
                            alignment_of(a.x, a.batch, a.stride_x, ab_bytes),
                            alignment_of(a.y, a.batch, a.stride_y, sizeof(float))};
    const gemm_plan& p = ctx.plans().get(ctx, key);
    const float alpha = 1.f, beta = 0.f;
    CBL_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt(), p.op, &alpha, a.w, p.w, a.x, p.x, &beta, a.y,
                                    p.y, a.y, p.y, &p.algo, ctx.workspace(),
                                    ctx.workspace_bytes(), ctx.stream()));
}

}  // namespace cuda
}  // namespace cacheblend
