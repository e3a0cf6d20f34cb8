// The engine's side of the compute backends (docs/ARCHITECTURE.md, 'Backends'): the interface is
// kernels/backend.h (neutral: no backend included); the engine opens a backend by device name
// from the registry (kernels/backend-registry.h), wrapped so its kernel errors arrive as
// cacheblend::error like every other error of the library.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace cacheblend {

// The backend of `device` ("cpu", "cuda:0"; empty means "cpu") on n_threads host threads.
// Throws error: invalid_arg for a malformed or unknown name, unsupported for a backend this build
// lacks (CBL_CUDA=OFF), device for a device the machine does not have.
std::unique_ptr<backend> open_backend(const std::string& device, int n_threads);
std::unique_ptr<backend> create_cpu_backend(int n_threads);  // open_backend("cpu", n_threads)

// The checks of open_backend without opening anything (for parameters read before a session);
// returns the device's one name ("cpu" for "" and "cpu:0", "cuda:0" for "cuda"), so that two
// spellings of one device compare equal.
std::string check_device(const std::string& device);

// Every device of the built backends on this machine: "cpu" first, then "cuda:0", ...
std::vector<std::string> backend_devices();

}  // namespace cacheblend
