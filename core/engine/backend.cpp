#include "core/engine/backend.h"

#include "core/engine/checked-backend.h"
#include "kernels/backend-registry.h"

namespace cacheblend {

std::unique_ptr<backend> open_backend(const std::string& device, int n_threads) {
    try {
        return checked_backend(backend_registry::global().create(device, n_threads));
    } catch (const kernel_error& e) {
        throw to_error(e);
    }
}

std::unique_ptr<backend> create_cpu_backend(int n_threads) {
    return open_backend("cpu", n_threads);
}

std::string check_device(const std::string& device) {
    try {
        return backend_registry::global().canonical(device);
    } catch (const kernel_error& e) {
        throw to_error(e);
    }
}

std::vector<std::string> backend_devices() { return backend_registry::global().devices(); }

}  // namespace cacheblend
