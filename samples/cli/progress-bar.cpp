#include "progress-bar.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cacheblend::cli {

progress_bar::progress_bar(std::string label, int64_t total, bool enabled,
                           when_redirected redirected)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      active_(false),
      lines_(false),
      start_(std::chrono::steady_clock::now()) {
    const bool tty = isatty(STDERR_FILENO) == 1;
    active_ = enabled && tty;
    lines_ = !tty && redirected == when_redirected::log_lines;
    if (active_) draw();
}

progress_bar::~progress_bar() { finish(); }

void progress_bar::set_label(std::string label) {
    label_ = std::move(label);
    if (active_) draw();
}

void progress_bar::set_total(int64_t total) {
    total_ = std::max<int64_t>(total, 1);
    done_ = std::min(done_, total_);
}

void progress_bar::update(int64_t done) {
    done_ = std::clamp<int64_t>(done, 0, total_);
    if (!active_) return;
    // Redraw at most ~20 times a second; a bar must not cost measurable time in a benchmark.
    const auto now = std::chrono::steady_clock::now();
    if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
    draw();
}

std::string progress_bar::format_duration(double seconds) {
    if (!(seconds >= 0)) seconds = 0;  // NaN too
    const auto s = static_cast<long long>(std::llround(std::min(seconds, 1e9)));
    char buf[48];
    if (s < 60) {
        std::snprintf(buf, sizeof(buf), "%llds", s);
    } else if (s < 3600) {
        std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
    } else {
        std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, s / 60 % 60);
    }
    return buf;
}

std::string progress_bar::timing() const {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string t = "elapsed " + format_duration(elapsed);
    if (done_ > 0 && done_ < total_) {
        const double eta =
            elapsed * static_cast<double>(total_ - done_) / static_cast<double>(done_);
        t += ", ETA " + format_duration(eta);
    }
    return t;
}

void progress_bar::log_line(const std::string& text) {
    if (!lines_) return;
    std::fprintf(stderr, "%s, %s\n", text.c_str(), timing().c_str());
    std::fflush(stderr);
}

void progress_bar::draw() {
    constexpr int width = 30;
    const int fill = static_cast<int>(width * done_ / total_);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.append(static_cast<size_t>(width - fill), '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld %s", label_.c_str(), bar.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_),
                 timing().c_str());
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
    lines_ = false;
}

}  // namespace cacheblend::cli
