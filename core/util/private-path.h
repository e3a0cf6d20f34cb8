// Refusing data another local user could have written (issue 17): a data directory, catalog,
// vector index or KV store that is not owned by the effective user, or that its group or others
// may write, could hold text or KV planted by someone else, which search and ask would then
// serve as ours. We never chmod a user's existing folder behind their back: the error names the
// path and the command that fixes it. Folders and files we create are 0700/0600 already.
#pragma once

#include <string>

#include "core/util/file-io.h"

namespace cacheblend {

// "" when st is owned by the effective user and not writable by group or others; else why
// ("is writable by other users (mode 0777)", "is owned by uid 65534, not by uid 1000").
std::string private_path_problem(const file_stat& st);

// Throws error(status::io) "<what> <path> <problem>: run `chmod go-w <path>` ..." when
// private_path_problem(st) is not empty.
void require_private(const std::string& what, const std::string& path, const file_stat& st);

// stat()s (follow_link) or lstat()s path and applies require_private. A missing path is fine
// (it will be created private); any other stat failure is an error naming the path.
void require_private_path(const std::string& what, const std::string& path, bool follow_link);

}  // namespace cacheblend
