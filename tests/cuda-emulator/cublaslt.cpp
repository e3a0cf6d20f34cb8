// The CUDA emulator's cuBLASLt: matmul descriptions checked as cuBLASLt documents them, and the
// product computed on the host in f32 when the stream reaches it.
#include <cublasLt.h>

#include <immintrin.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_fp16.h"
#include "emulator-internal.h"

struct cublasLtContext {
    int unused = 0;
};
struct cublasLtMatmulDescOpaque {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    cublasOperation_t trans_a = CUBLAS_OP_N;
    cublasOperation_t trans_b = CUBLAS_OP_N;
};
struct cublasLtMatrixLayoutOpaque {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch = 1;
    int64_t stride = 0;  // elements between the matrices of a batch
};
struct cublasLtMatmulPreferenceOpaque {
    uint64_t max_workspace = 0;
    uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's default assumption
};

namespace {

constexpr uint64_t k_algo_magic = 0xcb1e0a1f;

size_t elem_bytes(cudaDataType_t t) { return t == CUDA_R_16F ? 2 : 4; }

bool known_type(cudaDataType_t t) { return t == CUDA_R_16F || t == CUDA_R_32F; }

// The bytes one batch of `l` spans, and all of its batches.
size_t span_bytes(const cublasLtMatrixLayoutOpaque& l) {
    const size_t one = (size_t(l.cols) - 1) * size_t(l.ld) + size_t(l.rows);
    return (one + size_t(l.batch - 1) * size_t(l.stride)) * elem_bytes(l.type);
}

// Shapes as cuBLASLt requires them: op(A) m x k, op(B) k x n, C and D m x n, ld >= rows, one
// batch count, known types.
bool consistent(const cublasLtMatmulDescOpaque& op, const cublasLtMatrixLayoutOpaque& a,
                const cublasLtMatrixLayoutOpaque& b, const cublasLtMatrixLayoutOpaque& c,
                const cublasLtMatrixLayoutOpaque& d) {
    if (op.compute != CUBLAS_COMPUTE_32F || op.scale != CUDA_R_32F) return false;
    if (!known_type(a.type) || a.type != b.type || c.type != d.type || !known_type(d.type)) {
        return false;
    }
    const uint64_t m = d.rows, n = d.cols;
    const uint64_t a_rows = op.trans_a == CUBLAS_OP_N ? a.rows : a.cols;
    const uint64_t k = op.trans_a == CUBLAS_OP_N ? a.cols : a.rows;
    const uint64_t b_rows = op.trans_b == CUBLAS_OP_N ? b.rows : b.cols;
    const uint64_t b_cols = op.trans_b == CUBLAS_OP_N ? b.cols : b.rows;
    if (a_rows != m || b_rows != k || b_cols != n || c.rows != m || c.cols != n) return false;
    for (const auto* l : {&a, &b, &c, &d}) {
        if (l->rows == 0 || l->cols == 0 || l->ld < int64_t(l->rows) || l->batch < 1) return false;
        if (l->batch != d.batch) return false;
        if (l->batch > 1 && l->stride < 0) return false;
    }
    return true;
}

int alignment_of(const void* p, const cublasLtMatrixLayoutOpaque& l) {
    uintptr_t v = reinterpret_cast<uintptr_t>(p);
    if (l.batch > 1) v |= uintptr_t(l.stride) * elem_bytes(l.type);
    int a = 256;
    while (a > 1 && v % uintptr_t(a) != 0) a >>= 1;
    return a;
}

float load(const void* base, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return static_cast<const float*>(base)[i];
    return __half2float(static_cast<const __half*>(base)[i]);
}

void store(void* base, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F) {
        static_cast<float*>(base)[i] = v;
    } else {
        static_cast<__half*>(base)[i] = __float2half_rn(v);
    }
}

// f32 dot products in interleaved sums (cuBLAS's summation order is its own, too); AVX2 + FMA
// where the host has them, since the emulated GEMMs are most of a model test's time.
float dot_plain(const float* a, const float* b, size_t k) {
    float acc[16] = {};
    size_t p = 0;
    for (; p + 16 <= k; p += 16) {
        for (int u = 0; u < 16; ++u) acc[u] += a[p + u] * b[p + u];
    }
    float s = 0.f;
    for (float x : acc) s += x;
    for (; p < k; ++p) s += a[p] * b[p];
    return s;
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, size_t k) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    size_t p = 0;
    for (; p + 32 <= k; p += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), _mm256_loadu_ps(b + p + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 16), _mm256_loadu_ps(b + p + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 24), _mm256_loadu_ps(b + p + 24), acc3);
    }
    const __m256 acc = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    float s = 0.f;
    for (float x : lanes) s += x;
    for (; p < k; ++p) s += a[p] * b[p];
    return s;
}

float dot(const float* a, const float* b, size_t k) {
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return avx2 ? dot_avx2(a, b, k) : dot_plain(a, b, k);
}

struct matmul_job {
    cublasLtMatmulDescOpaque op;
    cublasLtMatrixLayoutOpaque a, b, c, d;
    const void *pa, *pb, *pc;
    void* pd;
    float alpha, beta;
};

// D = alpha * op(A) * op(B) + beta * C per batch; C is not read when beta is 0 (cuBLAS's rule).
void run_matmul(const matmul_job& j) {
    const size_t m = j.d.rows, n = j.d.cols;
    const size_t k = j.op.trans_a == CUBLAS_OP_N ? j.a.cols : j.a.rows;
    std::vector<float> at(m * k), bt(n * k);  // op(A) by rows, op(B) by columns, k contiguous
    for (int32_t batch = 0; batch < j.d.batch; ++batch) {
        const size_t oa = size_t(batch) * size_t(j.a.stride),
                     ob = size_t(batch) * size_t(j.b.stride);
        const size_t oc = size_t(batch) * size_t(j.c.stride),
                     od = size_t(batch) * size_t(j.d.stride);
        for (size_t i = 0; i < m; ++i) {
            for (size_t p = 0; p < k; ++p) {
                const size_t e =
                    j.op.trans_a == CUBLAS_OP_N ? i + p * size_t(j.a.ld) : p + i * size_t(j.a.ld);
                at[i * k + p] = load(j.pa, j.a.type, oa + e);
            }
        }
        for (size_t c = 0; c < n; ++c) {
            for (size_t p = 0; p < k; ++p) {
                const size_t e =
                    j.op.trans_b == CUBLAS_OP_N ? p + c * size_t(j.b.ld) : c + p * size_t(j.b.ld);
                bt[c * k + p] = load(j.pb, j.b.type, ob + e);
            }
        }
        for (size_t c = 0; c < n; ++c) {
            const float* bc = &bt[c * k];
            for (size_t i = 0; i < m; ++i) {
                const float s = dot(&at[i * k], bc, k);
                float v = j.alpha * s;
                if (j.beta != 0.f) v += j.beta * load(j.pc, j.c.type, oc + i + c * size_t(j.c.ld));
                store(j.pd, j.d.type, od + i + c * size_t(j.d.ld), v);
            }
        }
    }
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasLtContext;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusString(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    *d = new cublasLtMatmulDescOpaque{compute, scale};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t bytes) {
    if (!d || !buf || bytes != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v;
    std::memcpy(&v, buf, sizeof v);
    if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_DESC_TRANSA) {
        d->trans_a = cublasOperation_t(v);
    } else if (attr == CUBLASLT_MATMUL_DESC_TRANSB) {
        d->trans_b = cublasOperation_t(v);
    } else {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    if (!l) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
    if (!l || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && bytes == sizeof(int32_t)) {
        std::memcpy(&l->batch, buf, bytes);
    } else if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && bytes == sizeof(int64_t)) {
        std::memcpy(&l->stride, buf, bytes);
    } else {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    if (!p) return CUBLAS_STATUS_INVALID_VALUE;
    *p = new cublasLtMatmulPreferenceOpaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t bytes) {
    if (!p || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(uint64_t)) {
        std::memcpy(&p->max_workspace, buf, bytes);
        return CUBLAS_STATUS_SUCCESS;
    }
    const int slot = attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
    if (slot < 0 || slot > 3 || bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&p->align[slot], buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results,
                                              int* returned) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!op || !a || !b || !c || !d || !pref || requested < 1 || !results || !returned) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *returned = 0;
    if (!consistent(*op, *a, *b, *c, *d)) return CUBLAS_STATUS_INVALID_VALUE;
    for (uint32_t al : pref->align) {
        if (al == 0 || (al & (al - 1)) != 0) return CUBLAS_STATUS_INVALID_VALUE;
    }
    cublasLtMatmulHeuristicResult_t r{};
    r.algo.data[0] = k_algo_magic;
    for (int i = 0; i < 4; ++i) r.algo.data[1 + i] = pref->align[i];
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.f;
    results[0] = r;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    using namespace cbl_emu;
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!op || !alpha || !beta || !a_layout || !b_layout || !c_layout || !d_layout || !algo ||
        algo->data[0] != k_algo_magic ||
        !consistent(*op, *a_layout, *b_layout, *c_layout, *d_layout)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    // The algorithm was chosen for pointers at least this aligned; less is a misaligned access.
    const void* ptrs[4] = {a, b, c, d};
    const cublasLtMatrixLayoutOpaque* lays[4] = {a_layout, b_layout, c_layout, d_layout};
    for (int i = 0; i < 4; ++i) {
        if (!ptrs[i] || alignment_of(ptrs[i], *lays[i]) < int(algo->data[1 + i])) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        if (!is_device_range(ptrs[i], span_bytes(*lays[i]))) return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (workspace_bytes && !is_device_range(workspace, workspace_bytes)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    matmul_job job{*op, *a_layout, *b_layout, *c_layout, *d_layout, a, b, c, d, 0.f, 0.f};
    std::memcpy(&job.alpha, alpha, sizeof(float));  // host pointer mode: read at the call
    std::memcpy(&job.beta, beta, sizeof(float));
    const cudaError_t e = enqueue(stream, [job] {
        if (!is_device_range(job.pa, span_bytes(job.a)) ||
            !is_device_range(job.pb, span_bytes(job.b)) ||
            !is_device_range(job.pd, span_bytes(job.d)) ||
            (job.beta != 0.f && !is_device_range(job.pc, span_bytes(job.c)))) {
            fail(cudaErrorIllegalAddress, "emulator: a queued cublasLtMatmul on freed memory");
            return;
        }
        run_matmul(job);
        check_guards("cublasLtMatmul");
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
