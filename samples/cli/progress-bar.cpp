#include "progress-bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace cacheblend::cli {

progress_bar::progress_bar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      active_(enabled && isatty(STDERR_FILENO) == 1) {
    if (active_) draw();
}

progress_bar::~progress_bar() { finish(); }

void progress_bar::set_label(std::string label) {
    label_ = std::move(label);
    if (active_) draw();
}

void progress_bar::update(int64_t done) {
    done_ = std::clamp<int64_t>(done, 0, total_);
    if (!active_) return;
    // Redraw at most ~20 times a second; a bar must not cost measurable time in a benchmark.
    const auto now = std::chrono::steady_clock::now();
    if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
    draw();
}

void progress_bar::draw() {
    constexpr int width = 30;
    const int fill = static_cast<int>(width * done_ / total_);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.append(static_cast<size_t>(width - fill), '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld", label_.c_str(), bar.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_));
    std::fflush(stderr);
    drawn_ = true;
    last_draw_ = std::chrono::steady_clock::now();
}

void progress_bar::finish() {
    if (active_ && drawn_) {
        std::fputs("\r\033[K", stderr);
        std::fflush(stderr);
    }
    drawn_ = false;
    active_ = false;
}

}  // namespace cacheblend::cli
