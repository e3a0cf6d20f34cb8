// The weight types the CUDA backend reads, as X-macro lists of kernels/cuda/math/dequant.h traits:
// dequant.cu and gemv.cu instantiate their kernels from them, dispatch.cu maps dtype -> traits.
// K-quants (q2_k..q6_k) are not here yet: matmul on them throws status::unsupported.
#pragma once

#include "kernels/cuda/math/dequant.h"

#define CBL_CUDA_FOR_EACH_WEIGHT_TYPE(X) \
    X(hd::deq_f32)                       \
    X(hd::deq_f16)                       \
    X(hd::deq_bf16)                      \
    X(hd::deq_q4_0)                      \
    X(hd::deq_q4_1)                      \
    X(hd::deq_q5_0)                      \
    X(hd::deq_q5_1)                      \
    X(hd::deq_q8_0)
