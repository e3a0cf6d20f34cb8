#include "kernels/cpu/thread-pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CBL_CPU_RELAX() _mm_pause()
#else
#define CBL_CPU_RELAX() std::this_thread::yield()
#endif

namespace cacheblend {

namespace {

// How long an idle worker spins for the next job before it sleeps. Decode issues a job every
// ~10-30 us, so a worker that spins through such gaps never pays for a futex wake-up.
constexpr auto k_spin_budget = std::chrono::microseconds(2000);

}  // namespace

struct thread_pool::impl {
    int n_threads = 1;
    bool spin = true;  // false when there are more threads than cores: spinning would only steal
    std::vector<std::thread> workers;

    // Job hand-off. The caller publishes `job` and then bumps `generation` (release); a worker
    // that observes the new generation (acquire) may read `job`. Both share one cache line, so
    // a hand-off costs one line transfer to each worker and one back (n_done).
    alignas(64) std::atomic<uint64_t> generation{0};
    const std::function<void(int, int)>* job = nullptr;
    alignas(64) std::atomic<int> n_done{0};  // workers finished with the current generation
    alignas(64) std::atomic<int> n_sleeping{0};
    std::atomic<bool> stop{false};

    std::mutex sleep_mutex;
    std::condition_variable sleep_cv;

    // run() from several outside threads (the sessions of one runtime share a pool) takes
    // turns in arrival order: a ticket lock, so a long prefill's stream of jobs cannot keep
    // another request's decode step waiting (a plain mutex lets the releasing thread barge back).
    std::mutex turn_mutex;
    std::condition_variable turn_cv;
    uint64_t next_ticket = 0, serving = 0;

    void take_turn() {
        std::unique_lock<std::mutex> lock(turn_mutex);
        const uint64_t ticket = next_ticket++;
        turn_cv.wait(lock, [&] { return serving == ticket; });
    }
    void end_turn() {
        {
            std::lock_guard<std::mutex> lock(turn_mutex);
            ++serving;
        }
        turn_cv.notify_all();
    }

    std::mutex error_mutex;
    std::exception_ptr error;

    void record_error(std::exception_ptr e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::move(e);
    }

    void run_job(int ith) {
        try {
            (*job)(ith, n_threads);
        } catch (...) {
            record_error(std::current_exception());
        }
    }

    // Waits until generation != seen (returns it) or stop is set (returns seen).
    uint64_t wait_for_job(uint64_t seen) {
        if (spin) {
            const auto start = std::chrono::steady_clock::now();
            for (uint32_t spins = 1;; ++spins) {
                const uint64_t g = generation.load(std::memory_order_acquire);
                if (g != seen || stop.load(std::memory_order_acquire)) return g;
                CBL_CPU_RELAX();
                if ((spins & 63) == 0) {
                    // Let a descheduled peer (or the caller) run when cores are oversubscribed.
                    std::this_thread::yield();
                    if (std::chrono::steady_clock::now() - start > k_spin_budget) break;
                }
            }
        }
        // Sleep. n_sleeping is raised before generation is re-checked (both seq_cst), and the
        // caller bumps generation before it reads n_sleeping (seq_cst), so one of us sees the
        // other: either we see the new job here or the caller notifies under the mutex.
        std::unique_lock<std::mutex> lock(sleep_mutex);
        n_sleeping.fetch_add(1, std::memory_order_seq_cst);
        sleep_cv.wait(lock, [&] {
            return generation.load(std::memory_order_seq_cst) != seen ||
                   stop.load(std::memory_order_seq_cst);
        });
        n_sleeping.fetch_sub(1, std::memory_order_relaxed);
        return generation.load(std::memory_order_acquire);
    }

    void worker_main(int ith) {
        uint64_t seen = 0;
        for (;;) {
            const uint64_t g = wait_for_job(seen);
            if (stop.load(std::memory_order_acquire)) return;
            seen = g;
            run_job(ith);
            n_done.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    void wake_sleepers() {
        if (n_sleeping.load(std::memory_order_seq_cst) > 0) {
            // Taking the mutex orders us after a worker's predicate check, so it cannot miss us.
            { std::lock_guard<std::mutex> lock(sleep_mutex); }
            sleep_cv.notify_all();
        }
    }
};

thread_pool::thread_pool(int n_threads) : impl_(std::make_unique<impl>()) {
    impl_->n_threads = std::max(1, n_threads);
    const unsigned hw = std::thread::hardware_concurrency();
    impl_->spin = hw == 0 || static_cast<unsigned>(impl_->n_threads) <= hw;
    impl_->workers.reserve(static_cast<size_t>(impl_->n_threads - 1));
    try {
        for (int i = 1; i < impl_->n_threads; ++i) {
            impl_->workers.emplace_back([this, i] { impl_->worker_main(i); });
        }
    } catch (...) {
        // Could not start every thread: run with what we have rather than fail.
        impl_->n_threads = static_cast<int>(impl_->workers.size()) + 1;
    }
}

thread_pool::~thread_pool() {
    impl_->stop.store(true, std::memory_order_seq_cst);
    {
        std::lock_guard<std::mutex> lock(impl_->sleep_mutex);
    }
    impl_->sleep_cv.notify_all();
    for (auto& t : impl_->workers) t.join();
}

int thread_pool::size() const noexcept { return impl_->n_threads; }

void thread_pool::run(const std::function<void(int ith, int nth)>& fn) {
    impl& s = *impl_;
    if (s.n_threads == 1) {
        fn(0, 1);
        return;
    }
    s.take_turn();
    struct turn_end {
        impl& s;
        ~turn_end() { s.end_turn(); }
    } turn{s};
    const int n_workers = s.n_threads - 1;
    s.job = &fn;
    s.n_done.store(0, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_seq_cst);
    s.wake_sleepers();

    s.run_job(0);

    // Workers usually finish within a microsecond or two of us; spin that long, then yield: on
    // a machine shared with other processes a worker may be waiting for this very core.
    for (uint32_t spins = 0; s.n_done.load(std::memory_order_acquire) != n_workers; ++spins) {
        if (s.spin && spins < 64) {
            CBL_CPU_RELAX();
        } else {
            std::this_thread::yield();
        }
    }
    s.job = nullptr;

    std::exception_ptr e;
    {
        std::lock_guard<std::mutex> lock(s.error_mutex);
        std::swap(e, s.error);
    }
    if (e) std::rethrow_exception(e);
}

void thread_pool::parallel_for(int64_t n, int64_t grain,
                               const std::function<void(int64_t begin, int64_t end)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    // Every range gets at least `grain` items, so a small n stays on the caller.
    const int64_t n_chunks = std::min<int64_t>(std::max<int64_t>(n / grain, 1), impl_->n_threads);
    if (n_chunks <= 1) {
        fn(0, n);
        return;
    }
    run([&](int ith, int) {
        if (ith >= n_chunks) return;
        const int64_t begin = n * ith / n_chunks;
        const int64_t end = n * (ith + 1) / n_chunks;
        if (begin < end) fn(begin, end);
    });
}

}  // namespace cacheblend
