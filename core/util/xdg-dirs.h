// Where libcacheblend keeps files by default, following the XDG base directory spec: one place,
// so the model cache, the embedder, the data directory and the CLI's KV store agree (they were
// computed in four places and could drift).
//   cache: ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend   (models, the CLI's default KV store)
//   data:  ${XDG_DATA_HOME:-$HOME/.local/share}/cacheblend   (the default data directory)
// Without HOME (a service with an empty environment) both fall back to /tmp/cacheblend; the
// folders there are refused like any other when another user could write them (private-path.h).
#pragma once

#include <string>

namespace cacheblend {

std::string xdg_cache_dir();  // .../cacheblend, no trailing slash
std::string xdg_data_dir();   // .../cacheblend, no trailing slash

}  // namespace cacheblend
