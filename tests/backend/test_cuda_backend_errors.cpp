// The CUDA backend's host-side contract, which runs without a GPU: asking for a device that is not
// there is a kernel_error with kernel_status::device (never an abort), which the engine's adapter
// (core/engine/checked-backend.h) reports as status::device, and the CUDA runtime being
// linked does not break a machine without a driver. With a GPU it also checks a memory round
// trip and that an unsupported weight type is refused with status::unsupported.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/engine/backend.h"
#include "core/engine/checked-backend.h"
#include "core/util/error.h"
#if CBL_WITH_CUDA
#include "kernels/cuda/backend-cuda.h"
#endif

namespace cb = cacheblend;

#if CBL_WITH_CUDA

namespace {

cb::status status_of(int device, std::string* what = nullptr) {
    try {
        cb::create_cuda_backend(device);
    } catch (const cb::kernel_error& e) {
        EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
        if (what) *what = e.what();
        return cb::to_error(e).code();
    }
    return cb::status::ok;
}

}  // namespace

TEST(CudaBackend, MissingDeviceIsAStatus) {
    const int n = cb::cuda_device_count();
    EXPECT_GE(n, 0);
    EXPECT_EQ(status_of(n), cb::status::device);
    EXPECT_EQ(status_of(-1), cb::status::device);
    if (n == 0) {
        // Without a device the message says why the runtime found none (no driver, or a driver
        // older than the toolkit this was built with), not only that it did not.
        std::string what;
        EXPECT_EQ(status_of(0, &what), cb::status::device);
        EXPECT_NE(what.find("cudaError"), std::string::npos) << what;
        std::printf("no CUDA device here: %s\n", what.c_str());
    }
}

TEST(CudaBackend, RoundTripAndUnsupportedType) {
    if (cb::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    std::unique_ptr<cb::backend> be = cb::checked_backend(cb::create_cuda_backend(0));
    EXPECT_EQ(std::string(be->name()), "cuda:0");
    const std::vector<float> host = {1.f, -2.f, 3.5f, 1e-30f};
    cb::backend_buffer buf(*be, host.size() * sizeof(float));
    be->upload(buf.as<void>(), host.data(), host.size() * sizeof(float));
    std::vector<float> back(host.size());
    be->download(back.data(), buf.as<void>(), back.size() * sizeof(float));
    EXPECT_EQ(back, host);

    cb::weight_view w;
    w.type = cb::dtype::q8_k;  // an activation format, never a weight: not a CUDA weight type
    w.data = buf.as<void>();
    w.rows = 1;
    w.cols = 256;
    w.row_bytes = cb::dtype_row_bytes(w.type, w.cols);
    try {
        be->matmul(w, buf.as<float>(), 1, 256, buf.as<float>(), 1, nullptr);
        ADD_FAILURE() << "q8_k matmul did not throw";
    } catch (const cb::error& e) {
        EXPECT_EQ(e.code(), cb::status::unsupported) << e.what();
    }
}

#else

TEST(CudaBackend, NotBuilt) { GTEST_SKIP() << "built without the CUDA backend (CBL_CUDA=OFF)"; }

#endif
