#include "core/util/file-io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace cacheblend {

namespace {

void fill_stat(const struct stat& st, file_stat* out) {
    out->size = static_cast<uint64_t>(st.st_size);
    out->dev = static_cast<uint64_t>(st.st_dev);
    out->ino = static_cast<uint64_t>(st.st_ino);
    out->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    out->mode = static_cast<uint32_t>(st.st_mode & 07777);
    out->uid = static_cast<uint32_t>(st.st_uid);
    out->is_link = S_ISLNK(st.st_mode);
    out->is_dir = S_ISDIR(st.st_mode);
    out->is_reg = S_ISREG(st.st_mode);
}

class posix_io final : public file_io {
public:
    int open(const std::string& path, int flags, uint32_t mode, int* out_fd) override {
        for (;;) {
            const int fd = ::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode));
            if (fd >= 0) {
                *out_fd = fd;
                return 0;
            }
            if (errno != EINTR) return errno;
        }
    }

    int close(int fd) override {
        // Linux releases the descriptor even when close() reports EINTR: never retry.
        return ::close(fd) == 0 ? 0 : (errno == EINTR ? 0 : errno);
    }

    int pwrite(int fd, const void* buf, size_t n, uint64_t off) override {
        const char* p = static_cast<const char*>(buf);
        while (n > 0) {
            const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
            if (w < 0) {
                if (errno == EINTR) continue;
                return errno;
            }
            if (w == 0) return ENOSPC;  // no progress: treat as a full device, not a spin
            p += w;
            n -= static_cast<size_t>(w);
            off += static_cast<uint64_t>(w);
        }
        return 0;
    }

    int pread(int fd, void* buf, size_t n, uint64_t off, size_t* out_n) override {
        char* p = static_cast<char*>(buf);
        size_t done = 0;
        while (done < n) {
            const ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(off + done));
            if (r < 0) {
                if (errno == EINTR) continue;
                return errno;
            }
            if (r == 0) break;  // end of file
            done += static_cast<size_t>(r);
        }
        *out_n = done;
        return 0;
    }

    int fsync(int fd) override { return retry([&] { return ::fsync(fd); }); }
    int fdatasync(int fd) override { return retry([&] { return ::fdatasync(fd); }); }

    int fstat(int fd, file_stat* out) override {
        struct stat st;
        if (::fstat(fd, &st) != 0) return errno;
        fill_stat(st, out);
        return 0;
    }

    int rename(const std::string& from, const std::string& to) override {
        return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
    }

    int unlink(const std::string& path) override {
        return ::unlink(path.c_str()) == 0 ? 0 : errno;
    }

    int mkdir(const std::string& path, uint32_t mode) override {
        return ::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0 ? 0 : errno;
    }

    int fsync_dir(const std::string& path) override {
        int fd = -1;
        const int err = open(path, O_RDONLY | O_DIRECTORY, 0, &fd);
        if (err != 0) return err;
        int r = fsync(fd);
        if (r == EINVAL) r = 0;  // some file systems cannot fsync a directory: nothing to flush
        ::close(fd);
        return r;
    }

    int stat(const std::string& path, file_stat* out) override {
        struct stat st;
        if (::stat(path.c_str(), &st) != 0) return errno;
        fill_stat(st, out);
        return 0;
    }

    int lstat(const std::string& path, file_stat* out) override {
        struct stat st;
        if (::lstat(path.c_str(), &st) != 0) return errno;
        fill_stat(st, out);
        return 0;
    }

    int list_dir(const std::string& path, std::vector<std::string>* names) override {
        names->clear();
        DIR* d = ::opendir(path.c_str());
        if (!d) return errno;
        for (;;) {
            errno = 0;
            const struct dirent* e = ::readdir(d);
            if (!e) break;
            if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
            names->emplace_back(e->d_name);
        }
        const int err = errno;
        ::closedir(d);
        return err;
    }

private:
    template <class F>
    static int retry(F f) {
        for (;;) {
            if (f() == 0) return 0;
            if (errno != EINTR) return errno;
        }
    }
};

}  // namespace

std::shared_ptr<file_io> posix_file_io() {
    static const std::shared_ptr<file_io> io = std::make_shared<posix_io>();
    return io;
}

std::string errno_name(int err) {
    switch (err) {
        case EIO: return "EIO";
        case ENOSPC: return "ENOSPC";
        case ENOENT: return "ENOENT";
        case EEXIST: return "EEXIST";
        case EACCES: return "EACCES";
        case EPERM: return "EPERM";
        case EROFS: return "EROFS";
        case EDQUOT: return "EDQUOT";
        case EINVAL: return "EINVAL";
        case EMFILE: return "EMFILE";
        case ENFILE: return "ENFILE";
        case ENOTDIR: return "ENOTDIR";
        case EISDIR: return "EISDIR";
        case EBADF: return "EBADF";
        case ENOMEM: return "ENOMEM";
        case EFBIG: return "EFBIG";
        case ELOOP: return "ELOOP";
        default: return fmt("%s (errno %d)", std::strerror(err), err);
    }
}

void check_io(int err, status s, const char* what, const std::string& path) {
    if (err != 0) throw error(s, fmt("kvstore: %s %s: %s", what, path.c_str(),
                                     errno_name(err).c_str()));
}

io_fd& io_fd::operator=(io_fd&& o) noexcept {
    if (this != &o) {
        reset();
        io_ = o.io_;
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

int io_fd::close() {
    if (fd_ < 0) return 0;
    const int fd = fd_;
    fd_ = -1;
    return io_->close(fd);
}

void io_fd::reset() { close(); }

void aligned_free::operator()(uint8_t* p) const { std::free(p); }

aligned_buffer make_aligned_buffer(size_t n, size_t alignment) {
    void* p = nullptr;
    const size_t rounded = (n + alignment - 1) / alignment * alignment;
    if (posix_memalign(&p, alignment, rounded ? rounded : alignment) != 0) throw std::bad_alloc();
    return aligned_buffer(static_cast<uint8_t*>(p));
}

}  // namespace cacheblend
