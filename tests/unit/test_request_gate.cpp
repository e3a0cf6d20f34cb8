// The runtime's admission gate (runtime/request-gate.h): slots, arrival order, a full queue,
// cancel while waiting, and a nested request on the holder's thread.
#include "runtime/request-gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/util/error.h"

using cacheblend::request_gate;
using cacheblend::status;

namespace {

// Polls until pred holds (at most 10 s): waiters reach the gate on their own threads.
template <class F>
bool eventually(F pred) {
    for (int i = 0; i < 1000; ++i) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred();
}

status status_of_enter(request_gate& g, const std::function<bool()>& cancelled = nullptr) {
    try {
        request_gate::pass p = g.enter(cancelled);
        return status::ok;
    } catch (const cacheblend::error& e) {
        return e.code();
    }
}

}  // namespace

TEST(RequestGate, AdmitsUpToMaxActiveAtOnce) {
    request_gate g(2, 0);
    std::optional<request_gate::pass> a, b;
    std::thread([&] { a.emplace(g.enter(nullptr)); }).join();
    std::thread([&] { b.emplace(g.enter(nullptr)); }).join();
    EXPECT_EQ(g.active(), 2);
    // Both slots taken and no room to wait: refused at once, with the numbers in the message.
    std::thread([&] {
        try {
            request_gate::pass p = g.enter(nullptr);
            ADD_FAILURE() << "a third request went in";
        } catch (const cacheblend::error& e) {
            EXPECT_EQ(e.code(), status::busy);
            EXPECT_NE(std::string(e.what()).find("2 requests running and 0 waiting"),
                      std::string::npos)
                << e.what();
        }
    }).join();
    // Passes are released on their own threads in real use; here, the test's thread.
    a.reset();
    EXPECT_EQ(g.active(), 1);
    EXPECT_EQ(status_of_enter(g), status::ok);
}

TEST(RequestGate, WaitersGoInInArrivalOrder) {
    request_gate g(1, 8);
    std::optional<request_gate::pass> first(g.enter(nullptr));
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i) {
        // Start each waiter only after the previous one queued, so arrival order is i.
        ts.emplace_back([&, i] {
            request_gate::pass p = g.enter(nullptr);
            std::lock_guard<std::mutex> lock(mu);
            order.push_back(i);
        });
        ASSERT_TRUE(eventually([&] { return g.queued() == i + 1; }));
    }
    first.reset();
    for (auto& t : ts) t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(g.active(), 0);
    EXPECT_EQ(g.queued(), 0);
}

TEST(RequestGate, AFullQueueRefusesWithBusy) {
    request_gate g(1, 1);
    std::optional<request_gate::pass> running(g.enter(nullptr));
    std::thread waiter([&] { EXPECT_EQ(status_of_enter(g), status::ok); });
    ASSERT_TRUE(eventually([&] { return g.queued() == 1; }));
    std::thread([&] { EXPECT_EQ(status_of_enter(g), status::busy); }).join();
    running.reset();
    waiter.join();
}

TEST(RequestGate, CancelWhileWaitingAbortsAndFreesTheQueuePlace) {
    request_gate g(1, 1);
    std::optional<request_gate::pass> running(g.enter(nullptr));
    std::atomic<bool> cancel{false};
    std::thread waiter(
        [&] { EXPECT_EQ(status_of_enter(g, [&] { return cancel.load(); }), status::aborted); });
    ASSERT_TRUE(eventually([&] { return g.queued() == 1; }));
    cancel = true;
    waiter.join();
    EXPECT_EQ(g.queued(), 0);
    // The place is free again: another request may wait, and goes in once the slot frees.
    std::thread second([&] { EXPECT_EQ(status_of_enter(g), status::ok); });
    ASSERT_TRUE(eventually([&] { return g.queued() == 1; }));
    running.reset();
    second.join();
}

TEST(RequestGate, ANestedRequestOnTheHoldersThreadGoesInOnItsTurn) {
    request_gate g(1, 0);
    request_gate::pass outer = g.enter(nullptr);
    // A token callback that asks another session of the same runtime: it must not wait for
    // the slot its own thread holds.
    EXPECT_EQ(status_of_enter(g), status::ok);
    EXPECT_EQ(g.active(), 1);
    // Another thread still finds the gate full.
    std::thread([&] { EXPECT_EQ(status_of_enter(g), status::busy); }).join();
}

TEST(RequestGate, ReportsHowLongARequestWaited) {
    request_gate g(1, 1);
    std::optional<request_gate::pass> running(g.enter(nullptr));
    double waited = -1;
    std::thread waiter([&] { request_gate::pass p = g.enter(nullptr, &waited); });
    ASSERT_TRUE(eventually([&] { return g.queued() == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    running.reset();
    waiter.join();
    EXPECT_GE(waited, 40.0);
    double immediate = -1;
    request_gate::pass p = g.enter(nullptr, &immediate);
    EXPECT_EQ(immediate, 0.0);
}

// A freed slot goes to the first waiter at once: a request arriving before that waiter's thread
// has woken finds the slot taken and room in the queue, not a "full" queue (a bug once refused
// it with "0 requests running and 1 waiting").
TEST(RequestGate, AFreedSlotIsHandedToTheFirstWaiter) {
    request_gate g(1, 1);
    std::optional<request_gate::pass> a(g.enter(nullptr));
    std::atomic<bool> release_b{false};
    std::thread b([&] {
        request_gate::pass p = g.enter(nullptr);
        while (!release_b) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    ASSERT_TRUE(eventually([&] { return g.queued() == 1; }));
    a.reset();
    EXPECT_EQ(g.active(), 1) << "the slot went to b";
    EXPECT_EQ(g.queued(), 0);
    std::atomic<int> c_status{-1};
    std::thread c([&] { c_status = static_cast<int>(status_of_enter(g)); });
    ASSERT_TRUE(eventually([&] { return g.queued() == 1 || c_status.load() >= 0; }));
    EXPECT_EQ(c_status.load(), -1) << "c was refused or went in past b";
    release_b = true;
    b.join();
    c.join();
    EXPECT_EQ(c_status.load(), static_cast<int>(status::ok));
}
