#include "kernels/cpu/thread-pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using cacheblend::thread_pool;

TEST(ThreadPool, SizeClampsToOne) {
    EXPECT_EQ(thread_pool(0).size(), 1);
    EXPECT_EQ(thread_pool(-3).size(), 1);
    EXPECT_EQ(thread_pool(1).size(), 1);
    EXPECT_EQ(thread_pool(3).size(), 3);
}

TEST(ThreadPool, RunCallsEveryThreadOnceCallerIsZero) {
    for (int n : {1, 2, 3, 5}) {
        thread_pool pool(n);
        const auto caller = std::this_thread::get_id();
        std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
        std::mutex mu;
        std::set<std::thread::id> ids;
        std::atomic<bool> zero_on_caller{false};
        pool.run([&](int ith, int nth) {
            EXPECT_EQ(nth, n);
            ASSERT_GE(ith, 0);
            ASSERT_LT(ith, n);
            calls[static_cast<size_t>(ith)].fetch_add(1);
            if (ith == 0 && std::this_thread::get_id() == caller) zero_on_caller = true;
            std::lock_guard<std::mutex> lock(mu);
            ids.insert(std::this_thread::get_id());
        });
        for (int i = 0; i < n; ++i) EXPECT_EQ(calls[static_cast<size_t>(i)].load(), 1) << i;
        EXPECT_TRUE(zero_on_caller.load());
        EXPECT_EQ(static_cast<int>(ids.size()), n);
    }
}

TEST(ThreadPool, ManyRunsSeeEachOthersWrites) {
    // Plain (non-atomic) writes in one run must be visible to every thread in the next.
    thread_pool pool(3);
    std::vector<int64_t> data(3, 0);
    for (int it = 0; it < 5000; ++it) {
        pool.run([&](int ith, int nth) {
            int64_t sum = 0;
            for (int j = 0; j < nth; ++j) sum += data[static_cast<size_t>(j)];
            EXPECT_EQ(sum, 3 * static_cast<int64_t>(it));
        });
        pool.run([&](int ith, int) { data[static_cast<size_t>(ith)] += 1; });
    }
    EXPECT_EQ(data[0] + data[1] + data[2], 15000);
}

TEST(ThreadPool, WakesSleepingWorkers) {
    thread_pool pool(2);
    std::atomic<int> count{0};
    for (int it = 0; it < 4; ++it) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // past the spin budget
        pool.run([&](int, int) { count.fetch_add(1); });
    }
    EXPECT_EQ(count.load(), 8);
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
    for (int n_threads : {1, 2, 3}) {
        thread_pool pool(n_threads);
        for (int64_t n : {0, 1, 2, 5, 7, 100, 1001}) {
            for (int64_t grain : {1, 3, 64}) {
                std::vector<std::atomic<int>> hit(static_cast<size_t>(n));
                std::atomic<int> calls{0};
                pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
                    calls.fetch_add(1);
                    EXPECT_LT(b, e);
                    EXPECT_GE(e - b, std::min(grain, n));  // ranges hold at least `grain`
                    for (int64_t i = b; i < e; ++i) hit[static_cast<size_t>(i)].fetch_add(1);
                });
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hit[static_cast<size_t>(i)].load(), 1);
                EXPECT_LE(calls.load(), n_threads);
            }
        }
    }
}

TEST(ThreadPool, ExceptionFromWorkerReachesCaller) {
    thread_pool pool(3);
    EXPECT_THROW(pool.run([](int ith, int) {
        if (ith == 2) throw std::runtime_error("worker failed");
    }),
                 std::runtime_error);
    EXPECT_THROW(pool.run([](int ith, int) {
        if (ith == 0) throw std::logic_error("caller failed");
    }),
                 std::logic_error);
    // Still usable afterwards, and the old error does not resurface.
    std::atomic<int> count{0};
    pool.run([&](int, int) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 3);
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
    thread_pool pool(2);
    std::atomic<int> inside{0}, max_inside{0};
    auto body = [&] {
        for (int i = 0; i < 500; ++i) {
            pool.run([&](int ith, int) {
                if (ith != 0) return;
                const int now = inside.fetch_add(1) + 1;
                int prev = max_inside.load();
                while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
                }
                inside.fetch_sub(1);
            });
        }
    };
    std::thread a(body), b(body);
    a.join();
    b.join();
    EXPECT_EQ(max_inside.load(), 1);
}

TEST(ThreadPool, DestroyWhileWorkersSleep) {
    auto pool = std::make_unique<thread_pool>(4);
    pool->run([](int, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pool.reset();
    SUCCEED();
}
