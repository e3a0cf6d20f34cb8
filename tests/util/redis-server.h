// A real redis-server for the shared KV tier's tests (core/kvstore/kv-tiered.h): started on a
// free loopback port in a private temp folder, no persistence, optionally with a password, and
// stopped (SIGKILL, reaped) when the object goes. Plus a raw client, so tests can see and damage
// what the library stored.
#pragma once

#include <gtest/gtest.h>

#include <sys/types.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace cbltest {

// The redis-server on PATH ("" when there is none).
std::string redis_server_path();

class redis_server {
public:
    // Starts it and waits until it accepts connections; started() tells whether it did (and
    // error() why not).
    explicit redis_server(const std::string& password = "");
    ~redis_server();
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    bool started() const { return pid_ > 0; }
    const std::string& error() const { return error_; }
    int port() const { return port_; }
    // redis://[:password@]127.0.0.1:port/0 (the given password, else the server's own).
    std::string url(const std::string& password) const;
    std::string url() const { return url(password_); }
    // SIGKILL now (as a crash or an OOM kill would); later calls see a closed port.
    void kill();
    // SIGSTOP / SIGCONT: a server that accepts connections and never answers (a slow one).
    void freeze();
    void thaw();

    // Raw commands (AUTH with the server's password); each returns false on any failure.
    bool keys(const std::string& pattern, std::vector<std::string>* out) const;
    bool get(const std::string& name, std::string* out) const;
    bool set(const std::string& name, const std::string& value) const;

private:
    bool start_on(int port);

    std::string password_, dir_, error_;
    int port_ = 0;
    pid_t pid_ = -1;
};

}  // namespace cbltest

// Skips the test when redis-server is not installed, unless CBL_REQUIRE_MODEL=1 (the project's
// test command installs it), in which case the test fails.
#define CBL_REQUIRE_REDIS_SERVER()                                                            \
    if (cbltest::redis_server_path().empty()) {                                               \
        const char* req = std::getenv("CBL_REQUIRE_MODEL");                                   \
        if (req && std::string(req) == "1")                                                   \
            FAIL() << "redis-server not found on PATH (scripts/install-deps.sh installs it)"; \
        GTEST_SKIP() << "redis-server not found on PATH: shared KV tier not tested";          \
    }
