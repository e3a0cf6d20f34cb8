// A file_io that forwards to the OS and fails chosen calls (docs/ARCHITECTURE.md, 'Tests and
// tooling'): "the Nth write from now fails with ENOSPC", counted per kind of operation.
// Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/util/file-io.h"

namespace cbltest {

enum class io_op {
    open,
    write,      // pwrite
    read,       // pread
    fsync,      // fsync and fdatasync of files
    fsync_dir,  // fsync of a directory
    rename,
    unlink,
    mkdir,
    count_
};
const char* io_op_name(io_op op);

class faulty_io final : public cacheblend::file_io {
public:
    explicit faulty_io(std::shared_ptr<cacheblend::file_io> base = cacheblend::posix_file_io());

    // Fails call number `n` (0-based, counted from now) of `op` with `err`; sticky keeps failing
    // every later call of that kind too. A failing write first writes half of its buffer, as a
    // device that fills up mid-write does. One rule per kind: a new one replaces the old.
    void fail_nth(io_op op, uint64_t n, int err, bool sticky = false);
    void clear();                   // drop all rules
    uint64_t calls(io_op op) const;  // calls seen so far (failed ones included)
    uint64_t fired() const;          // failures injected so far

    int open(const std::string& path, int flags, uint32_t mode, int* out_fd) override;
    int close(int fd) override { return base_->close(fd); }
    int pwrite(int fd, const void* buf, size_t n, uint64_t off) override;
    int pread(int fd, void* buf, size_t n, uint64_t off, size_t* out_n) override;
    int fsync(int fd) override;
    int fdatasync(int fd) override;
    int fstat(int fd, cacheblend::file_stat* out) override { return base_->fstat(fd, out); }
    int rename(const std::string& from, const std::string& to) override;
    int unlink(const std::string& path) override;
    int mkdir(const std::string& path, uint32_t mode) override;
    int fsync_dir(const std::string& path) override;
    int stat(const std::string& path, cacheblend::file_stat* out) override {
        return base_->stat(path, out);
    }
    int lstat(const std::string& path, cacheblend::file_stat* out) override {
        return base_->lstat(path, out);
    }
    int list_dir(const std::string& path, std::vector<std::string>* names) override {
        return base_->list_dir(path, names);
    }

private:
    struct rule {
        bool armed = false;
        bool sticky = false;
        uint64_t at = 0;
        int err = 0;
    };
    // Counts the call; returns the errno to inject, or 0.
    int tick(io_op op);

    std::shared_ptr<cacheblend::file_io> base_;
    mutable std::mutex mu_;
    std::array<uint64_t, static_cast<size_t>(io_op::count_)> calls_{};
    std::array<rule, static_cast<size_t>(io_op::count_)> rules_{};
    uint64_t fired_ = 0;
};

}  // namespace cbltest
