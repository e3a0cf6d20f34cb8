// The CUDA emulator's kernel launches: a grid runs block by block on the host thread that waits
// for its stream, each block's threads as fibers (own stacks, switched by a few instructions of
// x86-64 assembly at barriers and shuffles only). A block whose live threads all wait, but not at
// the same barrier, or wait for a lane that has exited, is a launch failure naming the kernel.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_emulator.h"
#include "emulator-internal.h"

#if !defined(__x86_64__)
#error "the CUDA emulator switches fibers with x86-64 assembly"
#endif

// cbl_emu_switch(save, to): saves the callee-saved registers and the stack pointer into *save,
// then resumes the context whose stack pointer is `to`.
extern "C" void cbl_emu_switch(void** save, void* to);
asm(R"(
    .text
    .globl cbl_emu_switch
    .hidden cbl_emu_switch
    .type cbl_emu_switch, @function
cbl_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cbl_emu_switch, .-cbl_emu_switch
)");

namespace cbl_emu {
namespace {

constexpr size_t k_stack_bytes = 256 * 1024;  // the kernels' locals are small; deep host math
constexpr size_t k_guard_bytes = 4096;        // an overflow faults instead of corrupting

enum class fiber_state { ready, waiting, done };

struct barrier {
    int arrived = 0;
    uint64_t generation = 0;  // completed rounds (the shuffle slots alternate with it)
    std::vector<int> waiters;
};

struct fiber {
    void* sp = nullptr;
    fiber_state state = fiber_state::ready;
};

// One block's run: fibers that can run wait in `ready` (a ring of thread indices); a barrier
// holds its waiters until the last arrives and puts them back in arrival order. A fiber that
// waits or exits switches straight to the next ready one; the scheduler's own context is
// resumed only when none is left: the block finished, failed, or deadlocked.
struct block_run {
    const std::function<void()>* body = nullptr;
    thread_coords coords;
    int threads = 0;
    int live = 0;
    int current = 0;
    void* scheduler_sp = nullptr;
    std::vector<fiber> fibers;
    std::vector<int> ready;  // ring buffer of thread indices, capacity threads
    size_t head = 0, count = 0;
    barrier block_barrier;
    std::vector<barrier> warp_barriers;
    std::vector<uint64_t> lanes;  // two shuffle slots per thread
    std::string error;

    void push(int i) {
        ready[(head + count) % ready.size()] = i;
        ++count;
    }
    int pop() {
        const int i = ready[head];
        head = (head + 1) % ready.size();
        --count;
        return i;
    }
};

thread_local block_run* t_run = nullptr;
thread_local thread_coords t_coords;

// Stacks are kept per host thread and reused by every block it runs.
struct stack_pool {
    std::vector<unsigned char*> stacks;
    ~stack_pool() {
        for (unsigned char* s : stacks) munmap(s, k_stack_bytes + k_guard_bytes);
    }
    unsigned char* top(size_t i) {
        while (stacks.size() <= i) {
            void* m = mmap(nullptr, k_stack_bytes + k_guard_bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) return nullptr;
            mprotect(m, k_guard_bytes, PROT_NONE);
            stacks.push_back(static_cast<unsigned char*>(m));
        }
        return stacks[i] + k_guard_bytes + k_stack_bytes;
    }
};
thread_local stack_pool t_stacks;

void set_coords(block_run& r, int i) {
    const unsigned bx = r.coords.block_dim.x, by = r.coords.block_dim.y;
    r.current = i;
    t_coords.thread_idx = dim3(unsigned(i) % bx, (unsigned(i) / bx) % by, unsigned(i) / (bx * by));
}

// Leaves the running fiber (its context saved into *save) for the next ready one, or for the
// scheduler when none is ready or the block has failed.
void switch_away(void** save) {
    block_run& r = *t_run;
    if (r.count == 0 || !r.error.empty()) {
        cbl_emu_switch(save, r.scheduler_sp);
        return;
    }
    const int next = r.pop();
    set_coords(r, next);
    cbl_emu_switch(save, r.fibers[size_t(next)].sp);
}

void release(block_run& r, barrier& b) {
    for (int w : b.waiters) {
        r.fibers[size_t(w)].state = fiber_state::ready;
        r.push(w);
    }
    b.waiters.clear();
    b.arrived = 0;
    ++b.generation;
}

// Waits until `b` has `expected` arrivals (the last to arrive goes on at once).
void arrive_and_wait(barrier& b, int expected) {
    block_run& r = *t_run;
    if (++b.arrived >= expected) {
        release(r, b);
        return;
    }
    const int self = r.current;
    r.fibers[size_t(self)].state = fiber_state::waiting;
    b.waiters.push_back(self);
    switch_away(&r.fibers[size_t(self)].sp);
    set_coords(r, self);  // resumed: by a fiber or the scheduler that picked this one
}

// Never returns, so under AddressSanitizer its frame's redzones would stay poisoned at the top of
// the stack the next block's fiber starts on: it is not instrumented (the kernel it calls returns
// normally and cleans up after itself).
extern "C" [[noreturn]] __attribute__((no_sanitize("address"))) void cbl_emu_fiber_main() {
    block_run& r = *t_run;
    try {
        (*r.body)();
    } catch (...) {
        if (r.error.empty()) r.error = "a thread threw a C++ exception";
    }
    r.fibers[size_t(r.current)].state = fiber_state::done;
    // An exited thread no longer holds back __syncthreads (as on the hardware).
    if (--r.live > 0 && r.block_barrier.arrived > 0 && r.block_barrier.arrived >= r.live) {
        release(r, r.block_barrier);
    }
    void* unused;
    switch_away(&unused);
    __builtin_unreachable();
}

void* initial_sp(unsigned char* top) {
    auto* sp = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15));
    *--sp = 0;  // cbl_emu_fiber_main's return address: it never returns; keeps the ABI alignment
    *--sp = reinterpret_cast<uint64_t>(&cbl_emu_fiber_main);
    for (int i = 0; i < 6; ++i) *--sp = 0;  // rbp, rbx, r12-r15
    return sp;
}

std::string block_name(const dim3& b) {
    return "(" + std::to_string(b.x) + "," + std::to_string(b.y) + "," + std::to_string(b.z) + ")";
}

// Runs one block to completion; false (and r.error) when it fails.
bool run_block(block_run& r, bool reverse) {
    r.live = r.threads;
    r.block_barrier = barrier{};
    for (barrier& b : r.warp_barriers) b = barrier{};
    r.head = r.count = 0;
    for (int k = 0; k < r.threads; ++k) {
        const int i = reverse ? r.threads - 1 - k : k;
        unsigned char* top = t_stacks.top(size_t(i));
        if (!top) {
            r.error = "no memory for the block's thread stacks";
            return false;
        }
        r.fibers[size_t(i)] = fiber{initial_sp(top), fiber_state::ready};
        r.push(i);
    }
    block_run* outer = t_run;
    const thread_coords outer_coords = t_coords;
    t_run = &r;
    t_coords = r.coords;
    switch_away(&r.scheduler_sp);  // back here when no fiber is ready
    t_run = outer;
    t_coords = outer_coords;
    if (!r.error.empty()) return false;
    if (r.live > 0) {
        r.error = std::to_string(r.live) + " of " + std::to_string(r.threads) +
                  " threads wait at a barrier or shuffle the others never reach";
        return false;
    }
    return true;
}

void run_grid(const char* name, dim3 grid, dim3 block, const std::function<void()>& body) {
    block_run r;
    r.body = &body;
    r.threads = int(block.x * block.y * block.z);
    r.fibers.resize(size_t(r.threads));
    r.ready.resize(size_t(r.threads));
    r.warp_barriers.resize(size_t((r.threads + 31) / 32));
    r.lanes.resize(2 * size_t(r.threads));
    r.coords.block_dim = block;
    r.coords.grid_dim = grid;
    const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
    const bool reverse = reverse_order();
    for (uint64_t k = 0; k < blocks; ++k) {
        const uint64_t b = reverse ? blocks - 1 - k : k;
        r.coords.block_idx = dim3(unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
                                  unsigned(b / (uint64_t(grid.x) * grid.y)));
        if (!run_block(r, reverse)) {
            fail(cudaErrorLaunchFailure, std::string("emulator: kernel ") + name + ", block " +
                                             block_name(r.coords.block_idx) + ": " + r.error);
            return;
        }
    }
    check_guards((std::string("kernel ") + name).c_str());
}

bool valid_config(dim3 g, dim3 b) {
    const unsigned long long threads = 1ull * b.x * b.y * b.z;
    return b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 &&
           threads <= 1024 && g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 0x7fffffffu &&
           g.y <= 65535 && g.z <= 65535;
}

}  // namespace

const thread_coords& coords() { return t_coords; }

void sync_threads() {
    block_run& r = *t_run;
    arrive_and_wait(r.block_barrier, r.live);
}

void warp_exchange(unsigned mask, const void* in, void* out, size_t bytes, int lane_mask) {
    block_run& r = *t_run;
    const int self = r.current, lane = self & 31, warp = self >> 5;
    const int src = lane ^ lane_mask;
    const int warp_size = std::min(32, r.threads - warp * 32);
    if (!(mask >> lane & 1u) || src < 0 || src >= 32 || !(mask >> src & 1u) ||
        (warp_size < 32 && (mask >> warp_size) != 0)) {
        r.error =
            "a shuffle whose mask leaves out its own or its source lane, or names a lane "
            "the block does not have";
        switch_away(
            &r.fibers[size_t(self)].sp);  // with an error set: to the scheduler, which stops
    }
    const int expected = __builtin_popcount(mask);
    // Two slot sets used in turn: one barrier per shuffle suffices, since a lane can only write
    // the set it reads from after every lane has passed the barrier of the shuffle in between.
    barrier& b = r.warp_barriers[size_t(warp)];
    uint64_t* slots = &r.lanes[size_t(b.generation & 1) * size_t(r.threads)];
    std::memcpy(&slots[self], in, bytes);
    arrive_and_wait(b, expected);  // every lane wrote
    std::memcpy(out, &slots[warp * 32 + src], bytes);
}

void launch(const char* name, dim3 grid, dim3 block, cudaStream_t stream,
            std::function<void()> body) {
    std::lock_guard<std::recursive_mutex> lock(device_mutex());
    if (sticky_error() != cudaSuccess) {
        note(sticky_error());
        return;
    }
    if (!valid_config(grid, block)) {
        note(cudaErrorInvalidConfiguration);
        return;
    }
    note(enqueue(stream, [name, grid, block, body = std::move(body)] {
        run_grid(name, grid, block, body);
    }));
}

}  // namespace cbl_emu
