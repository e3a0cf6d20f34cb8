#include "core/engine/memory-budget.h"

#include <unistd.h>

#include <string>
#include <utility>

#include "core/util/error.h"

namespace cacheblend {
namespace {

// "1.5 GB", "235 MB", "17 B": decimal units, as the CLI prints sizes.
std::string byte_size_text(uint64_t bytes) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        ++u;
    }
    return u == 0 ? fmt("%llu B", static_cast<unsigned long long>(bytes))
                  : fmt(v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

}  // namespace

memory_budget::memory_budget(uint64_t limit_bytes)
    : limit_(limit_bytes ? limit_bytes : default_limit()) {}

uint64_t memory_budget::default_limit() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 4ull << 30;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

uint64_t memory_budget::used() const {
    std::lock_guard<std::mutex> lock(mu_);
    return used_;
}

int32_t memory_budget::holders() const {
    std::lock_guard<std::mutex> lock(mu_);
    return holders_;
}

memory_budget::reservation memory_budget::claim(const std::shared_ptr<memory_budget>& self) {
    reservation r;
    r.budget_ = self;
    return r;
}

void memory_budget::change(uint64_t from, uint64_t to, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t others = used_ - from;
    if (to > from && to > limit_ - std::min(limit_, others)) {
        throw error(status::nomem,
                    fmt("session memory budget: %s needs %s, but %d other session(s) hold %s of "
                        "the runtime's %s (cbl_runtime_params.session_memory_bytes): free a "
                        "session, lower n_ctx, or raise the budget",
                        what, byte_size_text(to).c_str(), holders_ - (from > 0 ? 1 : 0),
                        byte_size_text(others).c_str(), byte_size_text(limit_).c_str()));
    }
    used_ = others + to;
    holders_ += (to > 0 ? 1 : 0) - (from > 0 ? 1 : 0);
}

memory_budget::reservation::~reservation() {
    if (budget_ && bytes_) budget_->change(bytes_, 0, "release");
}

memory_budget::reservation::reservation(reservation&& o) noexcept
    : budget_(std::move(o.budget_)), bytes_(std::exchange(o.bytes_, 0)) {}

memory_budget::reservation& memory_budget::reservation::operator=(reservation&& o) noexcept {
    if (this != &o) {
        if (budget_ && bytes_) budget_->change(bytes_, 0, "release");
        budget_ = std::move(o.budget_);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

void memory_budget::reservation::resize(uint64_t bytes, const char* what) {
    if (budget_) budget_->change(bytes_, bytes, what);
    bytes_ = bytes;
}

}  // namespace cacheblend
