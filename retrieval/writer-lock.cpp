#include "retrieval/writer-lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "core/util/error.h"
#include "core/util/file-io.h"

namespace cacheblend {

std::string writer_lock_path(const std::string& dir) { return dir + "/write.lock"; }

namespace {

// O_NOFOLLOW | O_NONBLOCK and a regular-file check: a planted symlink or FIFO at the lock's
// path is refused instead of followed or waited on.
int open_lock_file(const std::string& path) {
    int fd;
    do {
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        throw error(status::io_write, "data directory lock: cannot open " + path + ": " +
                                          errno_name(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw error(status::io_write, "data directory lock: " + path + " is not a regular file");
    }
    return fd;
}

// 0: locked; EWOULDBLOCK: held by another; else an errno.
int try_flock(int fd) {
    for (;;) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EINTR) return errno;
    }
}

void write_holder(int fd) {
    // Informational only (a waiter's message): failures do not matter.
    const std::string text = fmt("pid %ld\n", static_cast<long>(::getpid()));
    if (::ftruncate(fd, 0) == 0) {
        [[maybe_unused]] const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
    }
}

std::string read_holder(int fd) {
    char buf[64] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
    if (s.rfind("pid ", 0) != 0 || s.size() > 24) return "another writer";
    return s;
}

}  // namespace

std::unique_ptr<writer_lock> writer_lock::try_acquire(const std::string& dir) {
    const std::string path = writer_lock_path(dir);
    const int fd = open_lock_file(path);
    const int err = try_flock(fd);
    if (err == EWOULDBLOCK) {
        ::close(fd);
        return nullptr;
    }
    if (err != 0) {
        ::close(fd);
        throw error(status::io_write, "data directory lock: flock " + path + ": " +
                                          errno_name(err));
    }
    write_holder(fd);
    return std::unique_ptr<writer_lock>(new writer_lock(fd));
}

std::unique_ptr<writer_lock> writer_lock::acquire(const std::string& dir, const wait_fn& wait) {
    const std::string path = writer_lock_path(dir);
    const int fd = open_lock_file(path);
    std::chrono::milliseconds pause(50);
    for (bool first = true;; first = false) {
        const int err = try_flock(fd);
        if (err == 0) break;
        if (err != EWOULDBLOCK) {
            ::close(fd);
            throw error(status::io_write, "data directory lock: flock " + path + ": " +
                                              errno_name(err));
        }
        // Polling (not a blocking flock) keeps the wait cancellable through `wait`.
        if (wait && !wait(read_holder(fd), first)) {
            ::close(fd);
            throw error(status::aborted,
                        "stopped while waiting for another writer of " + dir + " to finish");
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    write_holder(fd);
    return std::unique_ptr<writer_lock>(new writer_lock(fd));
}

writer_lock::~writer_lock() {
    // Closing the last descriptor of the open file description releases the flock.
    ::close(fd_);
}

}  // namespace cacheblend
