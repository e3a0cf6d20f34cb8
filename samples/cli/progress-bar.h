// Progress on stderr for long human-mode work (bench runs, eval). On a terminal: a one-line bar,
// redrawn in place. Elsewhere (a log file, CI, `2> file`) the bar stays silent, so redirected
// output stays clean, unless the caller asks for log lines: then each log_line() prints one plain
// line with the elapsed time and an ETA, e.g.
//   eval: record 3/30 (full, reuse, blend), elapsed 1m23s, ETA 12m40s
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace cacheblend::cli {

// What a progress_bar does when stderr is not a terminal.
enum class when_redirected {
    silent,     // nothing
    log_lines,  // log_line() prints its line
};

class progress_bar {
public:
    // enabled=false (e.g. under --json) turns the terminal bar off; log lines follow `redirected`
    // alone, since they never mix with stdout.
    progress_bar(std::string label, int64_t total, bool enabled = true,
                 when_redirected redirected = when_redirected::silent);
    ~progress_bar();
    progress_bar(const progress_bar&) = delete;
    progress_bar& operator=(const progress_bar&) = delete;

    void set_label(std::string label);
    void set_total(int64_t total);  // the work grew (or shrank); the clock keeps running
    void update(int64_t done);
    // When stderr is redirected and log lines were asked for: "<text>, elapsed E, ETA T" (the
    // ETA from the rate of update() so far; left out before any progress). Otherwise nothing:
    // the terminal bar shows the same.
    void log_line(const std::string& text);
    void finish();  // erases the bar so later output starts on a clean line

    // "45s", "1m23s", "2h05m": a short, fixed-format duration for progress lines.
    static std::string format_duration(double seconds);

private:
    void draw();
    std::string timing() const;  // "elapsed 1m23s, ETA 4m10s"

    std::string label_;
    int64_t total_;
    int64_t done_ = 0;
    bool active_;
    bool lines_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace cacheblend::cli
