#include "core/util/private-path.h"

#include <unistd.h>

#include <cerrno>

#include "core/util/error.h"

namespace cacheblend {

std::string private_path_problem(const file_stat& st) {
    const uint32_t me = static_cast<uint32_t>(::geteuid());
    if (st.uid != me) return fmt("is owned by uid %u, not by this user (uid %u)", st.uid, me);
    // A symlink's own mode bits are meaningless (always 0777 on Linux): only its owner counts.
    if (!st.is_link && (st.mode & 022) != 0)
        return fmt("is writable by other users (mode %04o)", st.mode);
    return "";
}

void require_private(const std::string& what, const std::string& path, const file_stat& st) {
    const std::string why = private_path_problem(st);
    if (why.empty()) return;
    const std::string q = "'" + path + "'";
    const std::string fix = st.uid != static_cast<uint32_t>(::geteuid())
                                ? fmt("use one of your own, or `chown %u %s`",
                                      static_cast<unsigned>(::geteuid()), q.c_str())
                                : fmt("run `chmod go-w %s`", q.c_str());
    throw error(status::io, fmt("%s %s %s; refusing to use data others could have written (%s)",
                                what.c_str(), path.c_str(), why.c_str(), fix.c_str()));
}

void require_private_path(const std::string& what, const std::string& path, bool follow_link) {
    file_stat st;
    const std::shared_ptr<file_io> io = posix_file_io();
    const int err = follow_link ? io->stat(path, &st) : io->lstat(path, &st);
    if (err == ENOENT) return;
    if (err != 0)
        throw error(status::io, fmt("%s %s: cannot stat: %s", what.c_str(), path.c_str(),
                                    errno_name(err).c_str()));
    require_private(what, path, st);
}

}  // namespace cacheblend
