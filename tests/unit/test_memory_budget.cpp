// The runtime's session memory budget (core/engine/memory-budget.h).
#include "core/engine/memory-budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/util/error.h"

using cacheblend::memory_budget;

TEST(MemoryBudget, ReservationsAddUpAndAreGivenBack) {
    auto b = std::make_shared<memory_budget>(1000);
    {
        memory_budget::reservation r1 = memory_budget::claim(b);
        memory_budget::reservation r2 = memory_budget::claim(b);
        r1.resize(600, "one");
        r2.resize(400, "two");
        EXPECT_EQ(b->used(), 1000u);
        EXPECT_EQ(b->holders(), 2);
        r1.resize(100, "one, smaller");  // shrinking always succeeds
        EXPECT_EQ(b->used(), 500u);
    }
    EXPECT_EQ(b->used(), 0u);
    EXPECT_EQ(b->holders(), 0);
}

TEST(MemoryBudget, GrowingPastTheLimitFailsClearlyAndKeepsTheClaim) {
    auto b = std::make_shared<memory_budget>(1000000);
    memory_budget::reservation other = memory_budget::claim(b);
    other.resize(700000, "first");
    memory_budget::reservation r = memory_budget::claim(b);
    r.resize(200000, "second");
    try {
        r.resize(400000, "a prefill of 6000 rows");
        FAIL() << "the budget was passed";
    } catch (const cacheblend::error& e) {
        EXPECT_EQ(e.code(), cacheblend::status::nomem);
        const std::string m = e.what();
        EXPECT_NE(m.find("a prefill of 6000 rows needs 400 KB"), std::string::npos) << m;
        EXPECT_NE(m.find("1 other session(s) hold 700 KB of the runtime's 1.0 MB"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("session_memory_bytes"), std::string::npos) << m;
    }
    EXPECT_EQ(r.bytes(), 200000u);
    EXPECT_EQ(b->used(), 900000u);
    r.resize(300000, "exactly to the limit");
    EXPECT_EQ(b->used(), 1000000u);
}

TEST(MemoryBudget, MovedReservationsReleaseOnce) {
    auto b = std::make_shared<memory_budget>(100);
    memory_budget::reservation a = memory_budget::claim(b);
    a.resize(60, "a");
    memory_budget::reservation c = std::move(a);
    EXPECT_EQ(b->used(), 60u);
    memory_budget::reservation d = memory_budget::claim(b);
    d.resize(40, "d");
    d = std::move(c);  // d's 40 are given back, c's 60 move into d
    EXPECT_EQ(b->used(), 60u);
    EXPECT_EQ(b->holders(), 1);
}

TEST(MemoryBudget, ZeroMeansHalfOfPhysicalMemory) {
    memory_budget b(0);
    EXPECT_EQ(b.limit(), memory_budget::default_limit());
    EXPECT_GT(b.limit(), 64ull << 20);
}
