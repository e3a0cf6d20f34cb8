#include "util/faulty-io.h"

namespace cbltest {

const char* io_op_name(io_op op) {
    switch (op) {
        case io_op::open: return "open";
        case io_op::write: return "write";
        case io_op::read: return "read";
        case io_op::fsync: return "fsync";
        case io_op::fsync_dir: return "fsync_dir";
        case io_op::rename: return "rename";
        case io_op::unlink: return "unlink";
        case io_op::mkdir: return "mkdir";
        case io_op::count_: break;
    }
    return "?";
}

faulty_io::faulty_io(std::shared_ptr<cacheblend::file_io> base) : base_(std::move(base)) {}

void faulty_io::fail_nth(io_op op, uint64_t n, int err, bool sticky) {
    std::lock_guard<std::mutex> lk(mu_);
    const size_t i = static_cast<size_t>(op);
    rules_[i] = rule{true, sticky, calls_[i] + n, err};
}

void faulty_io::clear() {
    std::lock_guard<std::mutex> lk(mu_);
    rules_.fill(rule{});
}

uint64_t faulty_io::calls(io_op op) const {
    std::lock_guard<std::mutex> lk(mu_);
    return calls_[static_cast<size_t>(op)];
}

uint64_t faulty_io::fired() const {
    std::lock_guard<std::mutex> lk(mu_);
    return fired_;
}

int faulty_io::tick(io_op op) {
    std::lock_guard<std::mutex> lk(mu_);
    const size_t i = static_cast<size_t>(op);
    const uint64_t call = calls_[i]++;
    rule& r = rules_[i];
    if (!r.armed || call < r.at || (call > r.at && !r.sticky)) return 0;
    if (!r.sticky) r.armed = false;
    ++fired_;
    return r.err;
}

int faulty_io::open(const std::string& path, int flags, uint32_t mode, int* out_fd) {
    if (const int e = tick(io_op::open)) return e;
    return base_->open(path, flags, mode, out_fd);
}

int faulty_io::pwrite(int fd, const void* buf, size_t n, uint64_t off) {
    if (const int e = tick(io_op::write)) {
        if (n > 1) base_->pwrite(fd, buf, n / 2, off);  // torn: the first half landed
        return e;
    }
    return base_->pwrite(fd, buf, n, off);
}

int faulty_io::pread(int fd, void* buf, size_t n, uint64_t off, size_t* out_n) {
    if (const int e = tick(io_op::read)) return e;
    return base_->pread(fd, buf, n, off, out_n);
}

int faulty_io::fsync(int fd) {
    if (const int e = tick(io_op::fsync)) return e;
    return base_->fsync(fd);
}

int faulty_io::fdatasync(int fd) {
    if (const int e = tick(io_op::fsync)) return e;
    return base_->fdatasync(fd);
}

int faulty_io::rename(const std::string& from, const std::string& to) {
    if (const int e = tick(io_op::rename)) return e;
    return base_->rename(from, to);
}

int faulty_io::unlink(const std::string& path) {
    if (const int e = tick(io_op::unlink)) return e;
    return base_->unlink(path);
}

int faulty_io::mkdir(const std::string& path, uint32_t mode) {
    if (const int e = tick(io_op::mkdir)) return e;
    return base_->mkdir(path, mode);
}

int faulty_io::fsync_dir(const std::string& path) {
    if (const int e = tick(io_op::fsync_dir)) return e;
    return base_->fsync_dir(path);
}

}  // namespace cbltest
