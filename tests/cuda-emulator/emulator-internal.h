// What the CUDA emulator's parts share (runtime.cpp, fibers.cpp, cublaslt.cpp): one lock over
// the emulated device, stream queues, the device allocations and the sticky error.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace cbl_emu {

// Every API call holds it; queued work runs under it on the thread that waits for it.
std::recursive_mutex& device_mutex();

// A failure of work on the device (a kernel's deadlock, a write past an allocation, a copy into
// freed memory): sticky, as on a GPU, every later call returns it; `what` is what
// cudaGetErrorString says of it.
void fail(cudaError_t e, const std::string& what);
cudaError_t sticky_error();

// Sets this host thread's last error (cudaGetLastError) and returns e.
cudaError_t note(cudaError_t e);

// Queues op on s (nullptr: the legacy default stream); cudaErrorInvalidResourceHandle for a
// stream that does not exist.
cudaError_t enqueue(cudaStream_t s, std::function<void()> op);

// Whether [p, p + bytes) lies inside one live device allocation.
bool is_device_range(const void* p, size_t bytes);

// CBL_CUDA_EMULATOR_ORDER=reverse: the adversarial schedule (runtime.cpp says what it runs first).
bool reverse_order();

// Checks the guard bytes around every live device allocation; a damaged one fails the device,
// blaming `after` (the kernel or cuBLASLt call that just ran).
void check_guards(const char* after);

}  // namespace cbl_emu
