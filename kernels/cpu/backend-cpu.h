// The CPU backend's factory, for the backend registry (kernels/backend-registry.cpp) and the
// kernel tests; the engine reaches it through the registry by the device name "cpu".
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace cacheblend {

// Host memory and the ops of kernels/cpu/ops.h on a thread pool of n_threads (at least 1).
std::unique_ptr<backend> make_cpu_backend(int n_threads);

// The instruction set the hardware offers the kernels ("avx2"), for cbl_build_info.
std::string cpu_isa_name_detected();

}  // namespace cacheblend
