// One writer at a time per data directory, across threads and processes (docs/data-dir.md): ingest,
// remove, precompute and repair hold an advisory flock(2) on DIR/write.lock; searches and asks
// never take it (SQLite's WAL gives them consistent reads meanwhile). flock locks belong to the
// open file description, so two corpora over the same folder in one process exclude each other
// too, and the kernel drops the lock when its holder dies: a SIGKILLed ingest never leaves the
// folder locked. The holder writes "pid N" into the file so a waiter can say whom it waits for.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace cacheblend {

class writer_lock {
public:
    // Called while another holder keeps the lock: `holder` describes it ("pid 1234" or "another
    // writer"); `first` is true on the first call. Return false to give up (status::aborted).
    using wait_fn = std::function<bool(const std::string& holder, bool first)>;

    // Blocks until the lock is held, polling every 50-200 ms and calling `wait` (optional)
    // between polls. Throws status::io_write when the lock file cannot be opened (e.g. a symlink
    // or a FIFO sits at its path) and status::aborted when `wait` returns false.
    static std::unique_ptr<writer_lock> acquire(const std::string& dir, const wait_fn& wait = {});
    // nullptr when another holder has it (never blocks). Throws as acquire() does otherwise.
    static std::unique_ptr<writer_lock> try_acquire(const std::string& dir);

    ~writer_lock();  // releases
    writer_lock(const writer_lock&) = delete;
    writer_lock& operator=(const writer_lock&) = delete;

private:
    explicit writer_lock(int fd) : fd_(fd) {}
    int fd_;
};

std::string writer_lock_path(const std::string& dir);

}  // namespace cacheblend
