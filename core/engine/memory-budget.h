// The memory that a runtime's sessions may hold at once: each session's working KV cache and its
// forward engine's scratch are reserved against one budget before they are allocated, so many
// concurrent requests end in a clear status::nomem instead of the kernel's OOM killer (issue 14).
// The chunk KV store has a budget of its own (on disk); this one is about RAM (or device memory).
//
// Thread safety: reserve and release from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

namespace cacheblend {

class memory_budget {
public:
    // limit_bytes 0: half of the machine's physical memory (default_limit()).
    explicit memory_budget(uint64_t limit_bytes);

    // A claim on the budget, given back when the reservation is destroyed.
    class reservation {
    public:
        reservation() = default;
        ~reservation();
        reservation(reservation&& o) noexcept;
        reservation& operator=(reservation&& o) noexcept;
        reservation(const reservation&) = delete;
        reservation& operator=(const reservation&) = delete;

        // Grows or shrinks the claim to `bytes`; growing past the budget throws
        // error(status::nomem) naming `what` and leaves the claim as it was.
        void resize(uint64_t bytes, const char* what);
        uint64_t bytes() const { return bytes_; }

    private:
        friend class memory_budget;
        std::shared_ptr<memory_budget> budget_;
        uint64_t bytes_ = 0;
    };

    // An empty claim on this budget (resize() it). `self` must own this object.
    static reservation claim(const std::shared_ptr<memory_budget>& self);

    uint64_t limit() const { return limit_; }
    uint64_t used() const;
    int32_t holders() const;  // reservations holding any bytes

    // Half of physical memory; 4 GiB when the system does not say.
    static uint64_t default_limit();

private:
    void change(uint64_t from, uint64_t to, const char* what);

    const uint64_t limit_;
    mutable std::mutex mu_;
    uint64_t used_ = 0;
    int32_t holders_ = 0;
};

}  // namespace cacheblend
