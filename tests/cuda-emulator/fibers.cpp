// The CUDA emulator's kernel launches: a grid runs block by block on the host thread that waits
// for its stream (under ThreadSanitizer, on two worker threads: block_workers), each block's
// threads as fibers (own stacks, switched by a few instructions of x86-64 assembly at barriers
// and shuffles only). A block whose live threads all wait, but not at the same barrier, or wait
// for a lane that has exited, is a launch failure naming the kernel.
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emulator.h"
#include "emulator-internal.h"

#if !defined(__x86_64__)
#error "the CUDA emulator switches fibers with x86-64 assembly"
#endif

// Under ThreadSanitizer (CBL_SANITIZE=thread) every emulated thread is a fiber TSan knows, and
// switching between them implies no ordering: only __syncthreads orders a block's threads (a
// round's arrivals happen before its departures; shuffles exchange values and order no memory),
// and a block's start and end order it after the host's work and before the next block's on the
// same host thread. So two threads of a block touching the same memory, one of them writing,
// with no barrier between them, are reported as a data race however the emulator happened to
// schedule them: the missing __syncthreads the GPU would race on. This file itself is not
// instrumented (CMakeLists.txt defines CBL_EMU_TSAN for it instead): its bookkeeping is the
// emulator's, not the kernels'. A grid's blocks run on two host threads there (block_workers),
// so races between blocks on different ones are reported as well.
#if defined(CBL_EMU_TSAN) && CBL_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#else
#undef CBL_EMU_TSAN
#define CBL_EMU_TSAN 0
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
    uint64_t generation = 0;  // completed rounds
    std::vector<int> waiters;  // capacity reserved per grid: no allocation while threads run
    unsigned mask = 0;         // a warp's shuffle round: the lanes it names
    // ThreadSanitizer's order of a round (hb_release/hb_acquire): round g's arrivals release at
    // sync[g % 2], its departures acquire there. Two addresses, because the last to arrive runs
    // on into the next round while the others have yet to depart this one; round g + 2 cannot
    // begin before every thread has departed round g.
    char sync[2] = {0, 0};

    void reset() {
        arrived = 0;
        generation = 0;
        waiters.clear();
        mask = 0;
    }
};

// A lane's part in a shuffle round: its value, where its result goes, the lane it reads.
struct shuffle_slot {
    uint64_t value = 0;
    void* out = nullptr;
    size_t bytes = 0;
    int src = 0;  // thread index
};

struct fiber {
    void* sp = nullptr;
    fiber_state state = fiber_state::ready;
    void* tsan = nullptr;  // its ThreadSanitizer fiber (CBL_EMU_TSAN)
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
    void* scheduler_tsan = nullptr;  // the host thread's own ThreadSanitizer fiber
    // ThreadSanitizer's order of a block (hb_release/hb_acquire addresses): the host's work
    // before the block's threads start; the threads' exits before the host goes on. Two, so a
    // thread that exits orders nothing before a thread of its block that starts after it.
    char start_sync = 0, end_sync = 0;
    std::vector<fiber> fibers;
    std::vector<int> ready;  // ring buffer of thread indices, capacity threads
    size_t head = 0, count = 0;
    barrier block_barrier;
    std::vector<barrier> warp_barriers;
    std::vector<unsigned> warp_live;  // per warp: lanes that exist and have not exited
    std::vector<shuffle_slot> lanes;  // per thread
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

// Happens-before for ThreadSanitizer (no-ops otherwise): `release` at an address orders what the
// running fiber did before it before whatever a later `acquire` of that address does.
void hb_release(const void* at) {
#if CBL_EMU_TSAN
    __tsan_release(const_cast<void*>(at));
#else
    (void)at;
#endif
}
void hb_acquire(const void* at) {
#if CBL_EMU_TSAN
    __tsan_acquire(const_cast<void*>(at));
#else
    (void)at;
#endif
}

// Thread i's ThreadSanitizer fiber on this host thread, kept for every block it runs (blocks are
// ordered by their start and end, so one fiber per thread index loses nothing); nullptr outside
// ThreadSanitizer.
void* tsan_fiber(size_t i) {
#if CBL_EMU_TSAN
    thread_local std::vector<void*> fibers;
    while (fibers.size() <= i) fibers.push_back(__tsan_create_fiber(0));
    return fibers[i];
#else
    (void)i;
    return nullptr;
#endif
}

// Resumes the context at stack pointer `to` (ThreadSanitizer's fiber `to_tsan`), saving the
// running one's into *save. The switch itself orders nothing.
void switch_to(void** save, void* to, void* to_tsan) {
#if CBL_EMU_TSAN
    __tsan_switch_to_fiber(to_tsan, __tsan_switch_to_fiber_no_sync);
#else
    (void)to_tsan;
#endif
    cbl_emu_switch(save, to);
}

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
        switch_to(save, r.scheduler_sp, r.scheduler_tsan);
        return;
    }
    const int next = r.pop();
    set_coords(r, next);
    const fiber& f = r.fibers[size_t(next)];
    switch_to(save, f.sp, f.tsan);
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

// Copies a shuffled value (at most 8 bytes) with fixed-size moves in this uninstrumented file, so
// ThreadSanitizer sees no access: a shuffle exchanges registers and orders no memory (CUDA:
// the shuffle intrinsics imply no memory barrier), so it must neither race nor synchronize.
void copy_value(void* to, const void* from, size_t bytes) {
    auto* d = static_cast<unsigned char*>(to);
    const auto* s = static_cast<const unsigned char*>(from);
    if (bytes == 8) {
        uint64_t v;
        __builtin_memcpy(&v, s, 8);
        __builtin_memcpy(d, &v, 8);
    } else if (bytes == 4) {
        uint32_t v;
        __builtin_memcpy(&v, s, 4);
        __builtin_memcpy(d, &v, 4);
    } else {
        for (size_t i = 0; i < bytes && i < 8; ++i)
            static_cast<volatile unsigned char*>(d)[i] = s[i];
    }
}

// Completes a warp's shuffle round: every participant (the waiters, and `last` unless it is -1)
// gets its source lane's value, which must be a participant too (not exited, named in the mask).
void deliver(block_run& r, barrier& b, int last) {
    unsigned in_round = 0;
    for (int w : b.waiters) in_round |= 1u << (w & 31);
    if (last >= 0) in_round |= 1u << (last & 31);
    auto give = [&](int t) {
        const shuffle_slot& me = r.lanes[size_t(t)];
        if (!(in_round >> (me.src & 31) & 1u)) {
            r.error = "a shuffle reads lane " + std::to_string(me.src & 31) +
                      ", which has exited or is not in the mask";
            return;
        }
        copy_value(me.out, &r.lanes[size_t(me.src)].value, me.bytes);
    };
    for (int w : b.waiters) give(w);
    if (last >= 0) give(last);
}

// Waits until `b` has `expected` arrivals (the last to arrive goes on at once). A warp barrier
// delivers its shuffle round before it releases the lanes. Only __syncthreads orders memory:
// what a thread did before arriving happens before every thread's departure.
void arrive_and_wait(barrier& b, int expected, bool shuffle = false) {
    block_run& r = *t_run;
    const char* sync = &b.sync[b.generation % 2];
    if (!shuffle) hb_release(sync);
    if (++b.arrived >= expected) {
        if (shuffle) deliver(r, b, r.current);
        if (!shuffle) hb_acquire(sync);
        release(r, b);
        return;
    }
    const int self = r.current;
    r.fibers[size_t(self)].state = fiber_state::waiting;
    b.waiters.push_back(self);
    switch_away(&r.fibers[size_t(self)].sp);
    set_coords(r, self);  // resumed: by a fiber or the scheduler that picked this one
    if (!shuffle) hb_acquire(sync);
}

// Never returns, so under AddressSanitizer its frame's redzones would stay poisoned at the top of
// the stack the next block's fiber starts on: it is not instrumented (the kernel it calls returns
// normally and cleans up after itself).
extern "C" [[noreturn]] __attribute__((no_sanitize("address"))) void cbl_emu_fiber_main() {
    block_run& r = *t_run;
    hb_acquire(&r.start_sync);  // after the host's work and the blocks before this one
    try {
        (*r.body)();
    } catch (...) {
        if (r.error.empty()) r.error = "a thread threw a C++ exception";
    }
    const int self = r.current;
    r.fibers[size_t(self)].state = fiber_state::done;
    // An exited thread no longer holds back __syncthreads (as on the hardware), nor a shuffle
    // whose mask names it (a lane reading from it fails in deliver()).
    if (--r.live > 0 && r.block_barrier.arrived > 0 && r.block_barrier.arrived >= r.live) {
        release(r, r.block_barrier);
    }
    unsigned& alive = r.warp_live[size_t(self >> 5)];
    alive &= ~(1u << (self & 31));
    barrier& wb = r.warp_barriers[size_t(self >> 5)];
    if (wb.arrived > 0 && wb.arrived >= __builtin_popcount(wb.mask & alive)) {
        deliver(r, wb, -1);
        release(r, wb);
    }
    // Last, so what the exit itself wrote (a failed delivery's error) is ordered too: before the
    // blocks after this one and the host's next work.
    hb_release(&r.end_sync);
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
    r.block_barrier.reset();
    for (barrier& b : r.warp_barriers) b.reset();
    for (size_t w = 0; w < r.warp_live.size(); ++w) {
        const int n = std::min(32, r.threads - int(w) * 32);
        r.warp_live[w] = n == 32 ? ~0u : (1u << n) - 1;
    }
    r.head = r.count = 0;
    for (int k = 0; k < r.threads; ++k) {
        const int i = reverse ? r.threads - 1 - k : k;
        unsigned char* top = t_stacks.top(size_t(i));
        if (!top) {
            r.error = "no memory for the block's thread stacks";
            return false;
        }
        r.fibers[size_t(i)] = fiber{initial_sp(top), fiber_state::ready, tsan_fiber(size_t(i))};
        r.push(i);
    }
    block_run* outer = t_run;
    const thread_coords outer_coords = t_coords;
    t_run = &r;
    t_coords = r.coords;
#if CBL_EMU_TSAN
    r.scheduler_tsan = __tsan_get_current_fiber();
#endif
    hb_release(&r.start_sync);
    switch_away(&r.scheduler_sp);  // back here when no fiber is ready
    hb_acquire(&r.end_sync);
    t_run = outer;
    t_coords = outer_coords;
#if CBL_EMU_TSAN
    // A failed block leaves threads that never exit (stuck at a barrier, or stopped by an error):
    // order what they did before the host's next work through a synchronizing switch there and
    // back (TSan's context only; their stacks are not resumed), so a failure is not also reported
    // as races with the host.
    if (!r.error.empty() || r.live > 0) {
        for (const fiber& f : r.fibers) {
            if (f.state == fiber_state::done) continue;
            __tsan_switch_to_fiber(f.tsan, 0);
            __tsan_switch_to_fiber(r.scheduler_tsan, 0);
        }
    }
#endif
    if (!r.error.empty()) return false;
    if (r.live > 0) {
        r.error = std::to_string(r.live) + " of " + std::to_string(r.threads) +
                  " threads wait at a barrier or shuffle the others never reach";
        return false;
    }
    return true;
}

// A failed block: its index and why.
struct block_failure {
    uint64_t block = 0;
    std::string why;
};

// Runs blocks first, first + step, ... of the grid (last to first on the reverse schedule) on
// this host thread; false at the first that fails (*failure says which and why).
bool run_blocks(dim3 grid, dim3 block, const std::function<void()>& body, uint64_t first,
                uint64_t step, block_failure* failure) {
    block_run r;
    r.body = &body;
    r.threads = int(block.x * block.y * block.z);
    r.fibers.resize(size_t(r.threads));
    r.ready.resize(size_t(r.threads));
    r.warp_barriers.resize(size_t((r.threads + 31) / 32));
    r.block_barrier.waiters.reserve(size_t(r.threads));
    for (barrier& b : r.warp_barriers) b.waiters.reserve(32);
    r.warp_live.resize(r.warp_barriers.size());
    r.lanes.resize(size_t(r.threads));
    r.coords.block_dim = block;
    r.coords.grid_dim = grid;
    const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
    if (first >= blocks) return true;
    const uint64_t n = (blocks - first + step - 1) / step;  // this thread's blocks
    const bool reverse = reverse_order();
    for (uint64_t k = 0; k < n; ++k) {
        const uint64_t b = first + (reverse ? n - 1 - k : k) * step;
        r.coords.block_idx = dim3(unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
                                  unsigned(b / (uint64_t(grid.x) * grid.y)));
        if (!run_block(r, reverse)) {
            failure->block = b;
            failure->why = "block " + block_name(r.coords.block_idx) + ": " + r.error;
            return false;
        }
    }
    return true;
}

#if CBL_EMU_TSAN
// Under ThreadSanitizer a grid's blocks run on two host threads, block b on worker b % 2, so
// blocks on different workers are as unordered as on a GPU and a race between them (two blocks
// writing one element, a block reading what another writes in the same kernel) is reported too.
// Blocks on one worker are ordered by their start and end (their __shared__ memory, a
// thread_local, is the worker's). The workers live as long as the process (their fiber stacks
// and TSan fibers are reused); the host waits for both, so a grid is still one step of its
// stream. mu_ orders the host's work before a grid and the grid before what follows. The workers
// start a grid's blocks only once both have taken it, meeting on start_mu_, which no one holds
// after their blocks begin: a worker slow to wake could otherwise take the job through a lock
// the other released after its blocks, and that would order them.
class block_workers {
public:
    static constexpr int k_workers = 2;

    // The process's workers, started on first use. Never destroyed (its threads are detached);
    // a child forked after they started has none of their threads, so it starts its own.
    static block_workers& get() {
        static bool at_fork = [] {
            return pthread_atfork(nullptr, nullptr, [] { pool() = nullptr; }) == 0;
        }();
        (void)at_fork;
        if (!pool()) pool() = new block_workers;
        return *pool();
    }

    // Runs every block of the grid; false with the failure the sequential run would have met
    // first (the lowest failing block, the highest on the reverse schedule).
    bool run(dim3 grid, dim3 block, const std::function<void()>& body, block_failure* failure) {
        std::unique_lock<std::mutex> lk(mu_);
        job_ = job{grid, block, &body};
        failed_.assign(k_workers, false);
        failures_.assign(k_workers, block_failure{});
        done_ = 0;
        {
            std::lock_guard<std::mutex> s(start_mu_);
            started_ = 0;
        }
        ++generation_;
        work_cv_.notify_all();
        done_cv_.wait(lk, [&] { return done_ == k_workers; });
        bool ok = true;
        for (int w = 0; w < k_workers; ++w) {
            const uint64_t b = failures_[size_t(w)].block;
            if (failed_[size_t(w)] &&
                (ok || (reverse_order() ? b > failure->block : b < failure->block))) {
                *failure = failures_[size_t(w)];
                ok = false;
            }
        }
        return ok;
    }

private:
    struct job {
        dim3 grid, block;
        const std::function<void()>* body = nullptr;
    };

    static block_workers*& pool() {
        static block_workers* p = nullptr;
        return p;
    }

    block_workers() {
        for (int w = 0; w < k_workers; ++w) std::thread([this, w] { work(w); }).detach();
    }

    void work(int w) {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lk(mu_);
        for (;;) {
            work_cv_.wait(lk, [&] { return generation_ != seen; });
            seen = generation_;
            const job j = job_;
            lk.unlock();
            {
                std::unique_lock<std::mutex> s(start_mu_);
                if (++started_ == k_workers) start_cv_.notify_all();
                start_cv_.wait(s, [&] { return started_ == k_workers; });
            }
            block_failure f;
            bool ok = false;
            try {
                ok = run_blocks(j.grid, j.block, *j.body, uint64_t(w), k_workers, &f);
            } catch (...) {  // no memory for a block's bookkeeping: fail the grid, not the process
                f.why = "the emulator's worker failed (out of memory?)";
            }
            lk.lock();
            if (!ok) {
                failed_[size_t(w)] = true;
                failures_[size_t(w)] = f;
            }
            if (++done_ == k_workers) done_cv_.notify_all();
        }
    }

    std::mutex mu_, start_mu_;
    std::condition_variable work_cv_, done_cv_, start_cv_;
    job job_;
    uint64_t generation_ = 0;
    int started_ = 0;  // guarded by start_mu_
    int done_ = 0;
    std::vector<bool> failed_;
    std::vector<block_failure> failures_;
};
#endif

std::atomic<uint64_t> g_kernels_run{0};

void run_grid(const char* name, dim3 grid, dim3 block, const std::function<void()>& body) {
    g_kernels_run.fetch_add(1, std::memory_order_relaxed);
    block_failure f;
#if CBL_EMU_TSAN
    const bool ok = block_workers::get().run(grid, block, body, &f);
#else
    const bool ok = run_blocks(grid, block, body, 0, 1, &f);
#endif
    if (!ok) {
        fail(cudaErrorLaunchFailure, std::string("emulator: kernel ") + name + ", " + f.why);
        return;
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

// A shuffle round: every live lane the mask names arrives, then the last to arrive hands each
// its source lane's value (so no slot is reused while a lane has yet to read it). One round at a
// time per warp: lanes of one warp shuffling under different masks at once are not emulated.
void warp_exchange(unsigned mask, const void* in, void* out, size_t bytes, int lane_mask) {
    block_run& r = *t_run;
    const int self = r.current, lane = self & 31, warp = self >> 5;
    int src = lane ^ lane_mask;
    if (src < 0 || src >= 32) src = lane;  // a lane outside the warp's width: its own value
    barrier& b = r.warp_barriers[size_t(warp)];
    if (!(mask >> lane & 1u)) {
        r.error = "a shuffle whose mask leaves out its own lane";
    } else if (b.arrived > 0 && b.mask != mask) {
        r.error = "shuffles under different masks at once in one warp (not emulated)";
    }
    if (!r.error.empty()) {
        switch_away(
            &r.fibers[size_t(self)].sp);  // with an error set: to the scheduler, which stops
    }
    b.mask = mask;
    shuffle_slot& me = r.lanes[size_t(self)];
    copy_value(&me.value, in, bytes);
    me.out = out;
    me.bytes = bytes;
    me.src = warp * 32 + src;
    arrive_and_wait(b, __builtin_popcount(mask & r.warp_live[size_t(warp)]), true);
}

uint64_t kernels_run() { return g_kernels_run.load(std::memory_order_relaxed); }

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
