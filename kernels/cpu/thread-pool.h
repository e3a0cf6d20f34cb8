// Our own fork-join pool (no OpenMP, so TSan sees everything). Workers spin briefly between jobs
// and then sleep: decode issues a few hundred small jobs per token, so waking must be cheap.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace cacheblend {

class thread_pool {
public:
    explicit thread_pool(int n_threads);  // n_threads >= 1; the caller is thread 0
    ~thread_pool();
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    int size() const noexcept;

    // Runs fn(ith, nth) on every thread (caller included) and returns when all have finished.
    // Callers on several threads take turns in arrival order (the caller of each turn is its
    // thread 0). Not re-entrant: fn must not call run() on the same pool.
    void run(const std::function<void(int ith, int nth)>& fn);

    // Splits [0, n) into contiguous ranges of at least `grain` items, one call per range.
    void parallel_for(int64_t n, int64_t grain,
                      const std::function<void(int64_t begin, int64_t end)>& fn);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace cacheblend
