// The shared chunk-KV tier (docs/ARCHITECTURE.md, 'KV store'): a key-value server that several
// machines running libcacheblend share, so a chunk one machine computed is reused by the others.
// This is the transport only (named byte values in, byte values out); what the values hold and
// how they are verified is core/kvstore/kv-tiered.h. One implementation: Redis through hiredis
// (core/kvstore/kv-remote-redis.cpp), built when hiredis is found (CMake option CBL_REDIS).
//
// Thread safety: shared by every session of a runtime; calls run in parallel (a small pool of
// connections). Every call is bounded by the connect and read timeouts: a down or slow server is
// an error(status::io) after at most those, never a hang. After a failure the server is skipped
// for retry_ms (calls fail at once, naming the failure), so a request over many chunks pays a
// timeout once, not once per chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cacheblend {

struct kv_remote_config {
    std::string host;
    int port = 6379;
    std::string user;      // empty: the server's default user (AUTH with the password only)
    std::string password;  // empty: no AUTH
    int db = 0;            // SELECT db
    int connect_timeout_ms = 500;
    int io_timeout_ms = 2000;  // each command's reply
    int retry_ms = 5000;       // how long a failed server is skipped
    // redis://host:port/db without the password, for messages.
    std::string describe() const;
};

// Parses "redis://[user:password@]host[:port][/db][?connect_timeout_ms=N&timeout_ms=N&retry_ms=N]"
// (":password@" alone: the default user). Throws error(invalid_arg) naming what is wrong.
kv_remote_config parse_kv_remote_url(const std::string& url);

class kv_remote {
public:
    virtual ~kv_remote() = default;
    // The value of `name` into *out; false when there is none. Throws error(status::io).
    virtual bool get(const std::string& name, std::string* out) = 0;
    // Sets every pair at once (one round trip, atomic on the server). Throws error(status::io).
    virtual void set_all(const std::vector<std::pair<std::string, std::string>>& values) = 0;
    // Deletes the names (absent ones are fine). Throws error(status::io).
    virtual void del(const std::vector<std::string>& names) = 0;
    virtual const kv_remote_config& config() const = 0;
};

// Connects lazily (the first call), so a server that is down when the runtime opens only makes
// requests run on local KV. Throws error(unsupported) when built without hiredis (CBL_REDIS).
std::shared_ptr<kv_remote> open_kv_remote(const kv_remote_config& c);

}  // namespace cacheblend
