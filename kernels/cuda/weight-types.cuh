// The weight types the CUDA backend reads, as X-macro lists of kernels/cuda/math/dequant.h traits:
// dequant.cu and gemv.cu instantiate their kernels from them, dispatch.cu maps dtype -> traits.
// The kernels read 8 consecutive weights at a time (hd::dequant_run8: one sub-block scale decoded
// per 8 weights, bit-identical to the CPU's dequantization). q8_k is an activation format only.
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
    X(hd::deq_q8_0)                      \
    X(hd::deq_q2_k)                      \
    X(hd::deq_q3_k)                      \
    X(hd::deq_q4_k)                      \
    X(hd::deq_q5_k)                      \
    X(hd::deq_q6_k)
