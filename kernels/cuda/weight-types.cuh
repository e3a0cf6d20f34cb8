// The weight types the CUDA backend reads, as an X-macro list of (dtype, kernels/cuda/math/
// dequant.h traits) pairs: dequant.cu and gemv.cu instantiate their kernels from it, dispatch.cu
// maps dtype -> traits on the host and gemv.cu on the device (a launch of mixed types).
// The kernels read 8 consecutive weights at a time (hd::dequant_run8: one sub-block scale decoded
// per 8 weights, bit-identical to the CPU's dequantization). q8_k is an activation format only.
#pragma once

#include "kernels/cuda/math/dequant.h"
#include "kernels/dtype.h"

#define CBL_CUDA_FOR_EACH_WEIGHT_TYPE(X) \
    X(dtype::f32, hd::deq_f32)           \
    X(dtype::f16, hd::deq_f16)           \
    X(dtype::bf16, hd::deq_bf16)         \
    X(dtype::q4_0, hd::deq_q4_0)         \
    X(dtype::q4_1, hd::deq_q4_1)         \
    X(dtype::q5_0, hd::deq_q5_0)         \
    X(dtype::q5_1, hd::deq_q5_1)         \
    X(dtype::q8_0, hd::deq_q8_0)         \
    X(dtype::q2_k, hd::deq_q2_k)         \
    X(dtype::q3_k, hd::deq_q3_k)         \
    X(dtype::q4_k, hd::deq_q4_k)         \
    X(dtype::q5_k, hd::deq_q5_k)         \
    X(dtype::q6_k, hd::deq_q6_k)
