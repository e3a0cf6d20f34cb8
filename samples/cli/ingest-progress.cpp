#include "ingest-progress.h"

#include <cstdio>

namespace cacheblend::cli {
namespace {

using clock_type = std::chrono::steady_clock;

// The file's name with at most two folders before it: enough to recognise, short enough for a bar.
std::string short_path(const std::string& path) {
    size_t cut = path.size();
    for (int slashes = 0; slashes < 3; ++slashes) {
        const size_t s = path.rfind('/', cut == 0 ? 0 : cut - 1);
        if (s == std::string::npos || s == 0) return path;
        cut = s;
    }
    return "..." + path.substr(cut);
}

// "3.1 files/s", or "12.4 s/chunk" when slower than one a second (a 1.5B model's KV).
std::string rate_text(double per_s, const char* unit, const char* one) {
    char buf[48];
    if (per_s < 1) {
        std::snprintf(buf, sizeof(buf), "%.1f s/%s", 1 / per_s, one);
    } else {
        std::snprintf(buf, sizeof(buf), per_s >= 10 ? "%.0f %s/s" : "%.1f %s/s", per_s, unit);
    }
    return buf;
}

}  // namespace

void ingest_progress::start_phase(const std::string& phase, int64_t total) {
    if (bar_) bar_->finish();
    phase_ = phase;
    total_ = total;
    bar_ = std::make_unique<progress_bar>(phase == "kv" ? "precompute KV" : "ingest", total,
                                          terminal_bar_, when_redirected::log_lines);
    phase_start_ = clock_type::now();
    last_line_ = phase_start_;
}

void ingest_progress::on(const cbl_progress& p) {
    const std::string phase = p.phase ? p.phase : "";
    if (phase == "ingest" || phase == "kv") {
        if (phase != phase_) {
            start_phase(phase, p.total);
        } else if (p.total != total_) {
            // Precompute found more to do (files evicted under the budget): same clock.
            total_ = p.total;
            bar_->set_total(p.total);
        }
        const bool files = phase == "ingest";
        const double secs = std::chrono::duration<double>(clock_type::now() - phase_start_).count();
        const std::string rate = p.done > 0 && secs > 0
                                     ? ", " + rate_text(p.done / secs, files ? "files" : "chunks",
                                                        files ? "file" : "chunk")
                                     : "";
        const std::string current = p.current && *p.current ? short_path(p.current) : "";
        bar_->set_label(std::string(files ? "ingest" : "precompute KV") + rate +
                        (current.empty() ? "" : " " + current));
        bar_->update(p.done);
        const auto now = clock_type::now();
        const bool ended = p.done >= p.total;
        if (ended || std::chrono::duration<double>(now - last_line_).count() >= k_line_seconds) {
            bar_->log_line(std::string(files ? "ingest: file " : "ingest: KV of chunk ") +
                           std::to_string(p.done) + "/" + std::to_string(p.total) + rate +
                           (current.empty() ? "" : " (" + current + ")"));
            last_line_ = now;
        }
        return;
    }
    if (!bar_) return;
    // Inside one big file: the bar keeps its count and says what the file is doing.
    if ((phase == "chunk" || phase == "embed") && p.total > 0) {
        const std::string current = p.current && *p.current ? " " + short_path(p.current) : "";
        bar_->set_label(std::string(phase == "chunk" ? "chunking" : "embedding") + " " +
                        std::to_string(p.done * 100 / p.total) + "%" + current);
    } else if (phase == "index") {
        bar_->set_label("rebuilding the vector index");
    }
}

void ingest_progress::finish() {
    if (bar_) bar_->finish();
}

}  // namespace cacheblend::cli
