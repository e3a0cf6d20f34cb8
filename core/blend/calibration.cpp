#include "core/blend/calibration.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <sstream>

#include "core/util/error.h"

namespace cacheblend {
namespace {

const char k_file[] = "calibration";
const char k_magic[] = "cacheblend-calibration 1";
constexpr size_t k_max_bytes = 1 << 20;

bool valid_metric(const std::string& m) {
    if (m.empty() || m.size() > 32) return false;
    for (char c : m) {
        if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
    }
    return true;
}

// All records of the file; an absent file is none.
std::vector<calibration> read_all(const std::string& path, file_io& io) {
    int fd = -1;
    const int err = io.open(path, O_RDONLY, 0, &fd);
    if (err == ENOENT) return {};
    check_io(err, status::io_read, "open", path);
    io_fd guard(&io, fd);
    file_stat st;
    check_io(io.fstat(fd, &st), status::io_read, "stat", path);
    if (st.size > k_max_bytes) {
        throw error(status::format, fmt("calibration file %s is too large", path.c_str()));
    }
    std::string text(static_cast<size_t>(st.size), '\0');
    size_t n = 0;
    if (!text.empty()) check_io(io.pread(fd, &text[0], text.size(), 0, &n), status::io_read, "read", path);
    text.resize(n);

    std::vector<calibration> out;
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != k_magic) {
        throw error(status::format, fmt("%s is not a calibration file of this version", path.c_str()));
    }
    int line_no = 1;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        std::istringstream ls(line);
        std::string fp_hex, format, metric, policy, rest;
        calibration c;
        int met = -1;
        ls >> fp_hex >> format >> c.ratio >> met >> metric >> c.target >> c.value >> c.records;
        const bool fields_ok = !ls.fail();
        // The optional ninth field: the selection policy (absent: hkvd).
        const bool policy_ok = !(ls >> policy) || parse_select_policy(policy, &c.select);
        char* end = nullptr;
        errno = 0;
        c.model_fingerprint = std::strtoull(fp_hex.c_str(), &end, 16);
        const bool ok = fields_ok && policy_ok && !(ls >> rest) && fp_hex.size() == 16 && end &&
                        *end == '\0' &&
                        errno == 0 && parse_kv_format(format, &c.format) &&
                        (met == 0 || met == 1) && valid_metric(metric) && c.ratio >= 0.f &&
                        c.ratio <= 1.f && std::isfinite(c.target) && std::isfinite(c.value) &&
                        c.records >= 0;
        if (!ok) throw error(status::corrupt, fmt("%s line %d is malformed", path.c_str(), line_no));
        c.met = met == 1;
        c.metric = metric;
        out.push_back(c);
    }
    return out;
}

}  // namespace

std::optional<calibration> read_calibration(const std::string& store_dir, uint64_t model_fp,
                                            kv_format format, const std::shared_ptr<file_io>& io) {
    for (const calibration& c : read_all(store_dir + "/" + k_file, *io)) {
        if (c.model_fingerprint == model_fp && c.format == format) return c;
    }
    return std::nullopt;
}

void write_calibration(const std::string& store_dir, const calibration& c,
                       const std::shared_ptr<file_io>& io) {
    if (!valid_metric(c.metric) || !(c.ratio >= 0.f && c.ratio <= 1.f) ||
        !std::isfinite(c.target) || !std::isfinite(c.value) || c.records < 0) {
        throw error(status::invalid_arg, "calibration: metric must be [a-z_]+, ratio in [0, 1], "
                                         "target and value finite");
    }
    const std::string path = store_dir + "/" + k_file;
    std::vector<calibration> all;
    try {
        all = read_all(path, *io);
    } catch (const error& e) {
        if (e.code() != status::corrupt && e.code() != status::format) throw;
        all.clear();  // a damaged file is replaced by a good one, never merged with
    }
    bool replaced = false;
    for (calibration& o : all) {
        if (o.model_fingerprint == c.model_fingerprint && o.format == c.format) {
            o = c;
            replaced = true;
        }
    }
    if (!replaced) all.push_back(c);

    std::string text = std::string(k_magic) + "\n";
    for (const calibration& o : all) {
        char line[256];
        std::snprintf(line, sizeof(line), "%016llx %s %.9g %d %s %.17g %.17g %d",
                      static_cast<unsigned long long>(o.model_fingerprint), kv_format_name(o.format),
                      static_cast<double>(o.ratio), o.met ? 1 : 0, o.metric.c_str(), o.target,
                      o.value, o.records);
        text += line;
        if (o.select != select_policy::hkvd) text += std::string(" ") + select_policy_name(o.select);
        text += "\n";
    }
    const std::string tmp = fmt("%s.tmp.%ld", path.c_str(), static_cast<long>(::getpid()));
    int fd = -1;
    check_io(io->open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600, &fd), status::io_write, "create", tmp);
    io_fd guard(io.get(), fd);
    int err = io->pwrite(fd, text.data(), text.size(), 0);
    if (!err) err = io->fsync(fd);
    if (!err) err = guard.close();
    if (!err) err = io->rename(tmp, path);
    if (err) {
        guard.reset();
        io->unlink(tmp);
        check_io(err, status::io_write, "write", path);
    }
    check_io(io->fsync_dir(store_dir), status::io_write, "fsync", store_dir);
}

}  // namespace cacheblend
