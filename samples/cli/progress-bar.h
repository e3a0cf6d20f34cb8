// A one-line progress bar on stderr for long human-mode work (bench runs). It draws only when
// stderr is a terminal, so redirected logs and --json runs stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace cacheblend::cli {

class progress_bar {
public:
    // enabled=false (e.g. under --json) turns every call into a no-op.
    progress_bar(std::string label, int64_t total, bool enabled = true);
    ~progress_bar();
    progress_bar(const progress_bar&) = delete;
    progress_bar& operator=(const progress_bar&) = delete;

    void set_label(std::string label);
    void update(int64_t done);
    void finish();  // erases the bar so later output starts on a clean line

private:
    void draw();

    std::string label_;
    int64_t total_;
    int64_t done_ = 0;
    bool active_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace cacheblend::cli
