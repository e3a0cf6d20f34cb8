// The backend registry: the built-in backends and device-string parsing.
#include "kernels/backend-registry.h"

#include <charconv>

#include "kernels/cpu/backend-cpu.h"
#include "kernels/kernel-error.h"
#if CBL_WITH_CUDA
#include "kernels/cuda/backend-cuda.h"
#define CBL_WITH_CUDA_VALUE 1
#else
#define CBL_WITH_CUDA_VALUE 0
#endif

namespace cacheblend {
namespace {

// Backends some build can have, and the CMake option that builds each: naming one this build
// lacks is "unsupported", not a typo.
struct buildable {
    std::string_view name, option;
};
constexpr buildable k_buildable[] = {{"cpu", "always built"}, {"cuda", "-DCBL_CUDA=ON"}};

std::string quoted(std::string_view device) { return "device '" + std::string(device) + "'"; }

// "name" or "name:N" -> {name, N (0 when absent)}.
device_ref parse(std::string_view device) {
    device_ref r;
    const size_t colon = device.find(':');
    r.backend = std::string(device.substr(0, colon));
    if (colon == std::string_view::npos) return r;
    const std::string_view digits = device.substr(colon + 1);
    const char* end = digits.data() + digits.size();
    const auto [p, ec] = std::from_chars(digits.data(), end, r.index);
    if (digits.empty() || ec != std::errc() || p != end || r.index < 0) {
        throw kernel_error(kernel_status::invalid_arg,
                           quoted(device) + ": expected NAME or NAME:INDEX (\"cpu\", \"cuda:0\")");
    }
    return r;
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

backend_factory cpu_factory() {
    backend_factory f;
    f.name = "cpu";
    f.device_count = [] { return 1; };
    f.create = [](int, int n_threads) { return make_cpu_backend(n_threads); };
    f.single_device = true;
    return f;
}

#if CBL_WITH_CUDA
backend_factory cuda_factory() {
    backend_factory f;
    f.name = "cuda";
    f.device_count = [] { return cuda_device_count(); };  // 0 without a driver or GPU
    f.create = [](int index, int) { return create_cuda_backend(index); };
    f.why_none = [] { return cuda_unavailable_reason(); };
    return f;
}
#endif

}  // namespace

backend_registry& backend_registry::global() {
    static backend_registry* r = [] {
        auto* reg = new backend_registry();  // never destroyed: sessions may outlive statics
        reg->add(cpu_factory());
#if CBL_WITH_CUDA
        reg->add(cuda_factory());
#endif
        return reg;
    }();
    return *r;
}

void backend_registry::add(backend_factory f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (backend_factory& old : factories_) {
        if (old.name == f.name) {
            old = std::move(f);
            return;
        }
    }
    factories_.push_back(std::move(f));
}

const backend_factory* backend_registry::find(std::string_view name) const {
    for (const backend_factory& f : factories_) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

std::vector<std::string> backend_registry::names() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const backend_factory& f : factories_) out.push_back(f.name);
    return out;
}

std::vector<std::string> backend_registry::devices() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const backend_factory& f : factories_) {
        const int n = f.device_count();
        if (f.single_device && n > 0) {
            out.push_back(f.name);
            continue;
        }
        for (int i = 0; i < n; ++i) out.push_back(f.name + ":" + std::to_string(i));
    }
    return out;
}

device_ref backend_registry::resolve(std::string_view device) const {
    if (device.empty()) device = "cpu";
    const device_ref r = parse(device);
    std::lock_guard<std::mutex> lock(mu_);
    const backend_factory* f = find(r.backend);
    if (!f) {
        std::vector<std::string> built;
        for (const backend_factory& b : factories_) built.push_back(b.name);
        for (const buildable& known : k_buildable) {
            if (known.name == r.backend) {
                throw kernel_error(kernel_status::unsupported,
                                   quoted(device) + ": this build has no " + r.backend +
                                       " backend (built with: " + joined(built) + "; " +
                                       std::string(known.option) + " adds it)");
            }
        }
        throw kernel_error(kernel_status::invalid_arg,
                           quoted(device) + ": unknown backend '" + r.backend +
                               "' (this build has: " + joined(built) + ")");
    }
    const int n = f->device_count();
    if (r.index >= n) {
        const std::string why = n == 0 && f->why_none ? f->why_none() : std::string();
        throw kernel_error(kernel_status::device,
                           quoted(device) +
                               kernel_fmt(": no such device (%d %s device%s here", n,
                                          r.backend.c_str(), n == 1 ? "" : "s") +
                               (why.empty() ? ")" : ": " + why + ")"));
    }
    return r;
}

std::string backend_registry::canonical(std::string_view device) const {
    const device_ref r = resolve(device);
    std::lock_guard<std::mutex> lock(mu_);
    const backend_factory* f = find(r.backend);
    return f && f->single_device ? r.backend : r.backend + ":" + std::to_string(r.index);
}

std::unique_ptr<backend> backend_registry::create(std::string_view device, int n_threads) const {
    const device_ref r = resolve(device);
    backend_factory f;
    {
        std::lock_guard<std::mutex> lock(mu_);
        f = *find(r.backend);  // a copy: creating a device may take long, and add() may run
    }
    return f.create(r.index, n_threads);
}

backend_build_facts backend_build_info() {
    return {cpu_isa_name_detected(), CBL_WITH_CUDA_VALUE != 0};
}

}  // namespace cacheblend
