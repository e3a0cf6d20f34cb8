// Swappable file I/O for the KV store (docs/ARCHITECTURE.md, 'KV store'): the store never calls the
// OS directly, so tests can fail any write, fsync, rename or read (tests/util/faulty-io.h). Every
// call returns 0 or an errno value and never throws (except std::bad_alloc); EINTR and short
// transfers are the implementation's business, not the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/util/error.h"

namespace cacheblend {

struct file_stat {
    uint64_t size = 0;
    uint64_t dev = 0;
    uint64_t ino = 0;
    int64_t mtime_ns = 0;  // since the Unix epoch
    uint32_t mode = 0;     // permission bits only (st_mode & 07777)
    uint32_t uid = 0;      // owner
    bool is_dir = false;
    bool is_reg = false;
    bool is_link = false;  // only lstat() reports a symbolic link
};

class file_io {
public:
    virtual ~file_io() = default;

    // open(2): flags are the POSIX O_* flags (O_CLOEXEC is always added). *out_fd only on success.
    virtual int open(const std::string& path, int flags, uint32_t mode, int* out_fd) = 0;
    virtual int close(int fd) = 0;
    // Writes all n bytes at off, or fails (a partial write may have happened).
    virtual int pwrite(int fd, const void* buf, size_t n, uint64_t off) = 0;
    // Reads up to n bytes at off; *out_n < n only at end of file.
    virtual int pread(int fd, void* buf, size_t n, uint64_t off, size_t* out_n) = 0;
    virtual int fsync(int fd) = 0;
    virtual int fdatasync(int fd) = 0;
    virtual int fstat(int fd, file_stat* out) = 0;

    virtual int rename(const std::string& from, const std::string& to) = 0;
    virtual int unlink(const std::string& path) = 0;
    virtual int mkdir(const std::string& path, uint32_t mode) = 0;  // EEXIST is reported
    virtual int fsync_dir(const std::string& path) = 0;  // makes renames/creates in it durable
    virtual int stat(const std::string& path, file_stat* out) = 0;
    virtual int lstat(const std::string& path, file_stat* out) = 0;  // a symlink is not followed
    virtual int list_dir(const std::string& path, std::vector<std::string>* names) = 0;  // no . ..
};

// The process-wide POSIX implementation.
std::shared_ptr<file_io> posix_file_io();

// "EIO", "ENOSPC", ... (strerror text for codes without a short name).
std::string errno_name(int err);

// Throws error(s, "<what> <path>: <ERRNO>") when err != 0.
void check_io(int err, status s, const char* what, const std::string& path);

// RAII descriptor closed through its file_io (close errors ignored: callers that care about
// durability fsync before letting go).
class io_fd {
public:
    io_fd() = default;
    io_fd(file_io* io, int fd) : io_(io), fd_(fd) {}
    io_fd(io_fd&& o) noexcept : io_(o.io_), fd_(o.fd_) { o.fd_ = -1; }
    io_fd& operator=(io_fd&& o) noexcept;
    io_fd(const io_fd&) = delete;
    io_fd& operator=(const io_fd&) = delete;
    ~io_fd() { reset(); }

    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    int close();  // returns close()'s error, descriptor released either way
    void reset();

private:
    file_io* io_ = nullptr;
    int fd_ = -1;
};

// Heap buffer aligned for O_DIRECT (4096 bytes).
struct aligned_free {
    void operator()(uint8_t* p) const;
};
using aligned_buffer = std::unique_ptr<uint8_t[], aligned_free>;
aligned_buffer make_aligned_buffer(size_t n, size_t alignment = 4096);

}  // namespace cacheblend
