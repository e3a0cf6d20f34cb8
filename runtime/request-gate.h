// Admission of a runtime's requests (issue 14): at most max_active run at once, up to max_queued
// more wait for a turn in arrival order, and a request beyond that is refused at once with
// status::busy, so a flood of requests becomes clear errors for the callers (an HTTP front end
// answers 503) instead of unbounded latency and memory. Running requests share the runtime's one
// thread pool, which takes their kernels in turn, so a long prefill does not starve another
// request's decode steps; the gate bounds how many interleave.
//
// Thread safety: enter() from any thread; a pass is released on the thread that holds it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace cacheblend {

class request_gate {
public:
    // max_active >= 1; max_queued >= 0 (0: refuse whenever all slots are taken).
    request_gate(int32_t max_active, int32_t max_queued);

    // A running request's slot, given back when destroyed.
    class pass {
    public:
        pass() = default;
        explicit pass(request_gate* g);
        ~pass();
        pass(pass&& o) noexcept : g_(o.g_), prev_(o.prev_) { o.g_ = nullptr; }
        pass& operator=(pass&&) = delete;
        pass(const pass&) = delete;
        pass& operator=(const pass&) = delete;

    private:
        request_gate* g_ = nullptr;
        const request_gate* prev_ = nullptr;  // the thread's pass before this one (nesting)
    };

    // Returns once a slot is free and every earlier waiter has gone in. A thread that already
    // holds a pass of this gate (a token callback starting a request on another session of the
    // same runtime) goes in at once on that turn: waiting there would wait for itself. Throws
    // error(status::busy) when max_queued requests already wait, error(status::aborted) when
    // cancelled() turns true while waiting (polled every 20 ms). *waited_ms: the time queued.
    pass enter(const std::function<bool()>& cancelled, double* waited_ms = nullptr);

    int32_t max_active() const { return max_active_; }
    int32_t max_queued() const { return max_queued_; }
    int32_t active() const;
    int32_t queued() const;

private:
    void leave();

    const int32_t max_active_, max_queued_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    struct waiter {
        bool admitted = false;  // set by leave(), which hands its slot over
    };
    int32_t active_ = 0;
    // In arrival order. A slot that frees goes straight to the first waiter (leave() counts it
    // active at once), so a request arriving meanwhile never sees a "free" slot that a waiter
    // is about to take, nor a full queue that is draining.
    std::deque<waiter*> waiting_;
};

}  // namespace cacheblend
