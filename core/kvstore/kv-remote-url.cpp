// Parsing of the shared tier's URL (core/kvstore/kv-remote.h).
#include <cerrno>
#include <cstdlib>

#include "core/kvstore/kv-remote.h"
#include "core/util/error.h"

namespace cacheblend {
namespace {

[[noreturn]] void bad_url(const std::string& why) {
    throw error(
        status::invalid_arg,
        "kv_remote: " + why +
            " (expected redis://[user:password@]host:port/db, e.g. redis://127.0.0.1:6379/0)");
}

int parse_int(const std::string& s, int lo, int hi, const char* what) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
        bad_url(std::string("bad ") + what + " '" + s + "'");
    const long v = std::strtol(s.c_str(), nullptr, 10);
    if (v < lo || v > hi) bad_url(fmt("%s %ld out of [%d, %d]", what, v, lo, hi));
    return static_cast<int>(v);
}

// "?a=1&b=2": the timeouts; an unknown option is an error (a typo must not pass silently).
void parse_options(const std::string& q, kv_remote_config* c) {
    size_t at = 0;
    while (at < q.size()) {
        size_t end = q.find('&', at);
        if (end == std::string::npos) end = q.size();
        const std::string kv = q.substr(at, end - at);
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) bad_url("option '" + kv + "' has no value");
        const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
        if (k == "connect_timeout_ms") {
            c->connect_timeout_ms = parse_int(v, 1, 600000, "connect_timeout_ms");
        } else if (k == "timeout_ms") {
            c->io_timeout_ms = parse_int(v, 1, 600000, "timeout_ms");
        } else if (k == "retry_ms") {
            c->retry_ms = parse_int(v, 0, 3600000, "retry_ms");
        } else {
            bad_url("unknown option '" + k + "'");
        }
        at = end + 1;
    }
}

}  // namespace

std::string kv_remote_config::describe() const {
    return fmt("redis://%s%s:%d/%d", user.empty() ? "" : (user + "@").c_str(), host.c_str(), port,
               db);
}

kv_remote_config parse_kv_remote_url(const std::string& url) {
    const std::string scheme = "redis://";
    if (url.compare(0, scheme.size(), scheme) != 0)
        bad_url("the URL does not start with redis://");  // never echo it: a password
    kv_remote_config c;
    std::string rest = url.substr(scheme.size());
    if (const size_t q = rest.find('?'); q != std::string::npos) {
        parse_options(rest.substr(q + 1), &c);
        rest.resize(q);
    }
    // The password may hold '@' and ':': the user info ends at the last '@'.
    if (const size_t at = rest.rfind('@'); at != std::string::npos) {
        const std::string info = rest.substr(0, at);
        rest = rest.substr(at + 1);
        const size_t colon = info.find(':');
        if (colon == std::string::npos) bad_url("user info without ':password'");
        c.user = info.substr(0, colon);
        c.password = info.substr(colon + 1);
        if (c.password.empty()) bad_url("empty password");
    }
    std::string hostport = rest;
    if (const size_t slash = rest.find('/'); slash != std::string::npos) {
        hostport = rest.substr(0, slash);
        const std::string db = rest.substr(slash + 1);
        if (!db.empty()) c.db = parse_int(db, 0, 1 << 20, "db");
    }
    if (const size_t colon = hostport.rfind(':'); colon != std::string::npos) {
        c.port = parse_int(hostport.substr(colon + 1), 1, 65535, "port");
        hostport.resize(colon);
    }
    if (hostport.empty()) bad_url("no host");
    c.host = hostport;
    return c;
}

}  // namespace cacheblend
