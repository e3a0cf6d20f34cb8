// The adapter between a backend and the engine: every call forwards to the backend, and a
// kernel_error (kernels/kernel-error.h) it throws becomes the cacheblend::error of the same
// status, so kernels/ needs nothing from core/ (docs/ARCHITECTURE.md, 'Layers').
#pragma once

#include <memory>

#include "core/util/error.h"
#include "kernels/backend.h"
#include "kernels/kernel-error.h"

namespace cacheblend {

error to_error(const kernel_error& e);

// `inner` behind the adapter; its name, threads and memory are the inner backend's.
std::unique_ptr<backend> checked_backend(std::unique_ptr<backend> inner);

}  // namespace cacheblend
