// The CUDA backend's factory. A plain C++ header (no CUDA includes) so host code and tests can
// name it; it is only linked when the library is built with CBL_CUDA=ON (CBL_WITH_CUDA=1).
//
// The backend registry (kernels/backend-registry.cpp) registers it as "cuda"; the engine opens it
// by the device name "cuda:N". It implements every op of kernels/backend.h on device memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace cacheblend {

// CUDA devices visible to this process; 0 when there is none or no usable driver. Never throws.
int cuda_device_count() noexcept;
// Why cuda_device_count() is 0, as the CUDA runtime says it (no driver, a driver older than this
// build's runtime, no device); empty when there are devices. Never throws.
std::string cuda_unavailable_reason() noexcept;

// A backend on CUDA device `device`. Every pointer passed to its ops is device memory from its
// alloc() (rope_params::freq_factors, biases, norms and weight_view::data included). Throws
// kernel_error(kernel_status::device) when the device does not exist or cannot be used.
std::unique_ptr<backend> create_cuda_backend(int device);

// Attention calls of this process that ran as GEMMs (kernels/cuda/attention-gemm.cuh) rather
// than on the row kernel: how tests know which path they checked.
int64_t cuda_attention_gemm_calls() noexcept;
// Row-kernel attention calls that split rows' keys over several blocks (kernels/cuda/attention.cu).
int64_t cuda_attention_split_calls() noexcept;

}  // namespace cacheblend
