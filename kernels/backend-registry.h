// Backends by name, and their devices (docs/ARCHITECTURE.md, 'Backends'). The global registry
// holds "cpu" always and "cuda" in a CUDA build (CBL_CUDA=ON); a device string names a backend and
// one of its devices: "cpu" (also "cpu:0"), "cuda:0", "cuda" (= "cuda:0"). Errors are
// kernel_error: an unknown or malformed name is invalid_arg, a backend this build lacks is
// unsupported, a device index the machine does not have is device.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"

namespace cacheblend {

struct backend_factory {
    std::string name;  // "cpu", "cuda"
    // Devices this machine has for it; must not throw (0 when the driver or device is missing).
    std::function<int()> device_count;
    // A backend on device `index` (0 <= index < device_count()); n_threads: host threads.
    std::function<std::unique_ptr<backend>(int index, int n_threads)> create;
    // One device named like the backend ("cpu") instead of "name:0", "name:1", ...
    bool single_device = false;
    // Why device_count() is 0 ("no CUDA driver", a driver older than the build's runtime), for
    // the error that names a missing device; may be empty, must not throw.
    std::function<std::string()> why_none;
};

// A parsed device string.
struct device_ref {
    std::string backend;  // "cpu", "cuda"
    int index = 0;
};

class backend_registry {
public:
    // The process's registry with the backends this build has.
    static backend_registry& global();

    // Adds a backend, replacing one of the same name.
    void add(backend_factory f);
    std::vector<std::string> names() const;
    // Every device of every backend, in registration order: "cpu", "cuda:0", "cuda:1", ...
    std::vector<std::string> devices() const;
    // Parses `device` and checks that its backend is built and the device exists (empty: "cpu").
    device_ref resolve(std::string_view device) const;
    // resolve()'s device as the backend names it: "cpu" for "" and "cpu:0", "cuda:0" for "cuda".
    std::string canonical(std::string_view device) const;
    std::unique_ptr<backend> create(std::string_view device, int n_threads) const;

private:
    const backend_factory* find(std::string_view name) const;  // with mu_ held

    mutable std::mutex mu_;
    std::vector<backend_factory> factories_;
};

// What the built backends report for cbl_build_info: the CPU kernels' instruction set ("avx2")
// and whether the CUDA backend is built.
struct backend_build_facts {
    std::string cpu_isa;
    bool cuda = false;
};
backend_build_facts backend_build_info();

}  // namespace cacheblend
