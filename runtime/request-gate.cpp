#include "runtime/request-gate.h"

#include <algorithm>
#include <chrono>

#include "core/util/error.h"

namespace cacheblend {
namespace {

// The gate whose pass this thread holds (nested requests run on the outer one's turn).
thread_local const request_gate* t_holding = nullptr;

}  // namespace

request_gate::request_gate(int32_t max_active, int32_t max_queued)
    : max_active_(std::max(max_active, 1)), max_queued_(std::max(max_queued, 0)) {}

request_gate::pass::pass(request_gate* g) : g_(g), prev_(t_holding) { t_holding = g; }

request_gate::pass::~pass() {
    if (!g_) return;
    t_holding = prev_;
    g_->leave();
}

int32_t request_gate::active() const {
    std::lock_guard<std::mutex> lock(mu_);
    return active_;
}

int32_t request_gate::queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int32_t>(waiting_.size());
}

request_gate::pass request_gate::enter(const std::function<bool()>& cancelled, double* waited_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    if (waited_ms) *waited_ms = 0;
    if (t_holding == this) return pass();
    std::unique_lock<std::mutex> lock(mu_);
    if (active_ < max_active_ && waiting_.empty()) {
        ++active_;
        return pass(this);
    }
    if (static_cast<int32_t>(waiting_.size()) >= max_queued_) {
        throw error(status::busy,
                    fmt("runtime busy: %d requests running and %d waiting (max_active_requests "
                        "%d, max_queued_requests %d); try again later",
                        active_, static_cast<int32_t>(waiting_.size()), max_active_, max_queued_));
    }
    waiter self;
    waiting_.push_back(&self);
    while (!self.admitted) {
        if (cancelled && cancelled()) {
            waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &self));
            throw error(status::aborted, "request cancelled while waiting for a turn");
        }
        cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    if (waited_ms) {
        *waited_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
    }
    return pass(this);
}

void request_gate::leave() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        --active_;
        while (active_ < max_active_ && !waiting_.empty()) {
            waiting_.front()->admitted = true;
            waiting_.pop_front();
            ++active_;
        }
    }
    cv_.notify_all();
}

}  // namespace cacheblend
