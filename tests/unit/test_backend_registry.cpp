// The backend registry (issue 12, item 4): backends by name, their devices, device strings and
// their errors, the adapter that turns kernel errors into cacheblend::error, and what the C API
// reports (cbl_device_count / cbl_device_name, cbl_runtime_params.device). Runs in every build:
// in a CUDA build on a machine without a GPU (build-cuda/, scripts/test.sh) it checks that there
// are 0 CUDA devices and that "cuda:0" is a clear CBL_DEVICE error.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "core/engine/backend.h"
#include "core/engine/checked-backend.h"
#include "core/util/error.h"
#include "kernels/backend-registry.h"
#include "kernels/cpu/backend-cpu.h"
#include "util/test-util.h"

namespace cb = cacheblend;

namespace {

// The status and message of open_backend(device); status ok when it opened.
std::pair<cb::status, std::string> open_status(const std::string& device) {
    try {
        cb::open_backend(device, 1);
    } catch (const cb::error& e) {
        return {e.code(), e.what()};
    }
    return {cb::status::ok, ""};
}

bool has(const std::vector<std::string>& v, const std::string& s) {
    for (const std::string& x : v) {
        if (x == s) return true;
    }
    return false;
}

int cuda_devices_listed() {
    int n = 0;
    for (const std::string& d : cb::backend_devices()) n += d.rfind("cuda:", 0) == 0;
    return n;
}

// A CPU backend whose matmul fails as a device would, to see the adapter convert the error.
class failing final : public cb::backend {
public:
    explicit failing(cb::kernel_status s) : s_(s), cpu_(cb::make_cpu_backend(1)) {}
    const char* name() const override { return "failing"; }
    int n_threads() const override { return 1; }
    bool host_memory() const override { return true; }
    void* alloc(size_t b) override { return cpu_->alloc(b); }
    void free(void* p) noexcept override { cpu_->free(p); }
    void upload(void* d, const void* s, size_t b) override { cpu_->upload(d, s, b); }
    void download(void* d, const void* s, size_t b) override { cpu_->download(d, s, b); }
    void copy(void* d, const void* s, size_t b) override { cpu_->copy(d, s, b); }
    void synchronize() override {}
    void matmul(const cb::weight_view&, const float*, int64_t, int64_t, float*, int64_t,
                const float*) override {
        throw cb::kernel_error(s_, "failing: matmul");
    }
    void get_rows(const cb::weight_view&, const int32_t*, int64_t, float*, int64_t) override {}
    void rms_norm(const float*, int64_t, int64_t, int64_t, const float*, float, float*,
                  int64_t) override {}
    void rope(float*, int64_t, int64_t, int, int, const int32_t*, const cb::rope_params&) override {
    }
    void store_rows_f16(const float*, int64_t, int64_t, int64_t, const int32_t*, uint16_t*,
                        int64_t) override {}
    void attention(const cb::attention_args&) override {}
    void swiglu(const float*, const float*, int64_t, int64_t, int64_t, float*) override {}
    void add_rows(float*, const float*, int64_t, int64_t, int64_t) override {}
    void relocate_kv(const void*, cb::dtype, const uint16_t*, int64_t, int64_t, const int32_t*, int,
                     int, const cb::rope_params&, uint16_t*, uint16_t*, int64_t) override {}
    void kv_deviation(const float*, int64_t, const uint16_t*, int64_t, int64_t, int64_t,
                      float*) override {}
    void attention_mass(const cb::attention_args&, float*) override {}
    void gather_rows(const void*, size_t, const int32_t*, int64_t, size_t, void*, size_t) override {
    }
    void layer_norm(const float*, int64_t, int64_t, int64_t, const float*, const float*, float,
                    float*, int64_t) override {}
    void gelu_erf(float*, int64_t, int64_t, int64_t) override {}
    void encoder_attention(const cb::encoder_attention_args&) override {}

private:
    cb::kernel_status s_;
    std::unique_ptr<cb::backend> cpu_;
};

}  // namespace

TEST(BackendRegistry, NamesTheBuiltBackends) {
    const std::vector<std::string> names = cb::backend_registry::global().names();
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names[0], "cpu");
#if CBL_WITH_CUDA
    EXPECT_TRUE(has(names, "cuda"));
#else
    EXPECT_FALSE(has(names, "cuda"));
#endif
}

TEST(BackendRegistry, CpuIsAlwaysADevice) {
    const std::vector<std::string> devices = cb::backend_devices();
    ASSERT_GE(devices.size(), 1u);
    EXPECT_EQ(devices[0], "cpu");
    for (const char* name : {"", "cpu", "cpu:0"}) {
        std::unique_ptr<cb::backend> be = cb::open_backend(name, 2);
        ASSERT_TRUE(be) << name;
        EXPECT_STREQ(be->name(), "cpu");
        EXPECT_EQ(be->n_threads(), 2);
        EXPECT_TRUE(be->host_memory());
    }
}

TEST(BackendRegistry, UnknownOrMalformedDeviceIsInvalidArg) {
    for (const char* name : {"tpu", "tpu:0", "cpu:x", "cuda:-1", "cuda:", "cpu:1x"}) {
        const auto [s, msg] = open_status(name);
        EXPECT_EQ(s, cb::status::invalid_arg) << name << ": " << msg;
        EXPECT_NE(msg.find(std::string("'") + name + "'"), std::string::npos) << msg;
    }
    // The unknown name is named, and so is what this build has.
    const std::string msg = open_status("tpu:0").second;
    EXPECT_NE(msg.find("unknown backend 'tpu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
}

TEST(BackendRegistry, MissingCpuIndexIsADeviceError) {
    const auto [s, msg] = open_status("cpu:1");
    EXPECT_EQ(s, cb::status::device) << msg;
    EXPECT_NE(msg.find("no such device"), std::string::npos) << msg;
}

TEST(BackendRegistry, CudaDeviceIsWhatTheBuildAndMachineHave) {
    const auto [s, msg] = open_status("cuda:0");
#if CBL_WITH_CUDA
    // The test command says how many GPUs nvidia-smi sees (0 where there is none), so a build
    // that finds a device where there is none, or none where there is one, fails here.
    if (const char* expected = std::getenv("CBL_EXPECT_CUDA_DEVICES"); expected && *expected) {
        EXPECT_EQ(cuda_devices_listed(), std::atoi(expected));
    }
    if (cuda_devices_listed() == 0) {
        // A CUDA build on a machine without a GPU (or driver): 0 devices, a clear device error
        // that says why, in the CUDA runtime's words (no driver, an older driver, no device).
        EXPECT_EQ(s, cb::status::device) << msg;
        EXPECT_NE(msg.find("'cuda:0'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("0 cuda devices here: "), std::string::npos) << msg;
        EXPECT_EQ(open_status("cuda").first, cb::status::device);
    } else {
        EXPECT_EQ(s, cb::status::ok) << msg;
    }
#else
    EXPECT_EQ(s, cb::status::unsupported) << msg;
    EXPECT_NE(msg.find("no cuda backend"), std::string::npos) << msg;
    EXPECT_EQ(cuda_devices_listed(), 0);
#endif
}

TEST(BackendRegistry, AddedBackendListsItsDevicesAndIsReplacedByName) {
    cb::backend_registry r;
    cb::backend_factory f;
    f.name = "fake";
    f.device_count = [] { return 2; };
    f.create = [](int, int n) { return cb::make_cpu_backend(n); };
    r.add(f);
    EXPECT_EQ(r.devices(), (std::vector<std::string>{"fake:0", "fake:1"}));
    EXPECT_EQ(r.resolve("fake:1").index, 1);
    EXPECT_EQ(r.resolve("fake").index, 0);
    // One name per device, so two spellings of it compare equal (a runtime's sessions share its
    // backend and weights when they name its device).
    EXPECT_EQ(r.canonical("fake"), "fake:0");
    EXPECT_EQ(r.canonical("fake:1"), "fake:1");
    EXPECT_EQ(cb::check_device(""), "cpu");
    EXPECT_EQ(cb::check_device("cpu:0"), "cpu");
    f.why_none = [] { return std::string("the fake driver is unplugged"); };
    f.device_count = [] { return 0; };
    r.add(f);
    EXPECT_EQ(r.names(), std::vector<std::string>{"fake"});
    EXPECT_TRUE(r.devices().empty());
    try {
        r.create("fake:0", 1);
        ADD_FAILURE() << "a backend without devices opened";
    } catch (const cb::kernel_error& e) {
        EXPECT_EQ(e.code(), cb::kernel_status::device) << e.what();
        // The backend's reason for having none is part of the error.
        EXPECT_NE(std::string(e.what()).find("0 fake devices here: the fake driver is unplugged"),
                  std::string::npos)
            << e.what();
    }
}

TEST(BackendRegistry, AdapterTurnsKernelErrorsIntoStatuses) {
    const std::pair<cb::kernel_status, int32_t> cases[] = {
        {cb::kernel_status::unsupported, CBL_UNSUPPORTED},
        {cb::kernel_status::device, CBL_DEVICE},
        {cb::kernel_status::device_oom, CBL_DEVICE_OOM},
        {cb::kernel_status::invalid_arg, CBL_INVALID_ARG},
        {cb::kernel_status::internal, CBL_INTERNAL},
    };
    for (const auto& [ks, want] : cases) {
        std::unique_ptr<cb::backend> be = cb::checked_backend(std::make_unique<failing>(ks));
        cb::weight_view w;
        try {
            be->matmul(w, nullptr, 0, 0, nullptr, 0, nullptr);
            ADD_FAILURE() << "no error";
        } catch (const cb::error& e) {
            EXPECT_EQ(static_cast<int32_t>(e.code()), want) << e.what();
            EXPECT_STREQ(e.what(), "failing: matmul");
        }
    }
}

TEST(BackendRegistry, CApiReportsTheDevices) {
    const std::vector<std::string> devices = cb::backend_devices();
    ASSERT_EQ(cbl_device_count(), static_cast<int32_t>(devices.size()));
    for (int32_t i = 0; i < cbl_device_count(); ++i) {
        ASSERT_NE(cbl_device_name(i), nullptr);
        EXPECT_EQ(cbl_device_name(i), devices[static_cast<size_t>(i)]);
    }
    EXPECT_STREQ(cbl_device_name(0), "cpu");
    EXPECT_EQ(cbl_device_name(cbl_device_count()), nullptr);
    EXPECT_EQ(cbl_device_name(-1), nullptr);
    const std::string info = cbl_build_info();
#if CBL_WITH_CUDA
    EXPECT_NE(info.find(" cuda=1"), std::string::npos) << info;
#else
    EXPECT_NE(info.find(" cuda=0"), std::string::npos) << info;
    EXPECT_EQ(cbl_device_count(), 1);
#endif
}

TEST(BackendRegistry, RuntimeDeviceIsCheckedBeforeAnythingLoads) {
    // No model is needed: the device is checked first, so these fail fast with the registry's
    // status and a message that names the function and the device.
    auto status_of = [](const char* device) {
        cbl_runtime_params p;
        cbl_runtime_params_init(&p);
        p.model_path = "/nonexistent/model.gguf";
        p.data_dir = "/nonexistent/data";
        p.device = device;
        cbl_runtime* rt = nullptr;
        const cbl_status s = cbl_runtime_open(&p, &rt);
        EXPECT_EQ(rt, nullptr);
        return s;
    };
    EXPECT_EQ(status_of("tpu:0"), CBL_INVALID_ARG);
    EXPECT_NE(std::string(cbl_last_error()).find("cbl_runtime_open: device 'tpu:0'"),
              std::string::npos)
        << cbl_last_error();
    const cbl_status cuda = status_of("cuda:0");
#if CBL_WITH_CUDA
    if (cuda_devices_listed() == 0) EXPECT_EQ(cuda, CBL_DEVICE) << cbl_last_error();
#else
    EXPECT_EQ(cuda, CBL_UNSUPPORTED) << cbl_last_error();
#endif
    EXPECT_NE(std::string(cbl_last_error()).find("'cuda:0'"), std::string::npos)
        << cbl_last_error();
    // "cpu" passes the check; the missing model is what fails then.
    EXPECT_EQ(status_of("cpu") & 0xff, CBL_IO) << cbl_last_error();
}
