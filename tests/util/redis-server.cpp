#include "util/redis-server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/test-util.h"

#if CBL_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace cbltest {
namespace {

// A port the kernel just gave out and took back: free unless another process races us for it
// (start_on then fails and the constructor tries another).
int pick_free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
        port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
}

bool accepts(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
}

#if CBL_HAVE_HIREDIS
// One command on a fresh connection (tests are not about speed).
redisReply* command(int port, const std::string& password, const std::vector<std::string>& args) {
    redisContext* c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return nullptr;
    }
    if (!password.empty()) {
        auto* r =
            static_cast<redisReply*>(redisCommand(c, "AUTH %b", password.data(), password.size()));
        const bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return nullptr;
        }
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    redisFree(c);
    return r;
}
#endif

}  // namespace

std::string redis_server_path() {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t at = 0;
    while (at <= dirs.size()) {
        size_t end = dirs.find(':', at);
        if (end == std::string::npos) end = dirs.size();
        const std::string p = dirs.substr(at, end - at) + "/redis-server";
        if (::access(p.c_str(), X_OK) == 0) return p;
        at = end + 1;
    }
    return "";
}

redis_server::redis_server(const std::string& password) : password_(password) {
    dir_ = make_temp_dir("cbl-redis");
    for (int attempt = 0; attempt < 5 && !started(); ++attempt) {
        const int port = pick_free_port();
        if (port > 0 && start_on(port)) port_ = port;
    }
}

bool redis_server::start_on(int port) {
    const std::string bin = redis_server_path();
    if (bin.empty()) {
        error_ = "redis-server not found on PATH";
        return false;
    }
    std::vector<std::string> args = {bin,
                                     "--port",
                                     std::to_string(port),
                                     "--bind",
                                     "127.0.0.1",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--daemonize",
                                     "no",
                                     "--loglevel",
                                     "warning",
                                     "--logfile",
                                     dir_ + "/redis.log"};
    if (!password_.empty()) {
        args.push_back("--requirepass");
        args.push_back(password_);
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        error_ = std::string("fork: ") + std::strerror(errno);
        return false;
    }
    if (pid == 0) {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(bin.c_str(), argv.data());
        ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
        if (accepts(port)) {
            pid_ = pid;
            return true;
        }
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) == pid) break;  // exited: port taken, bad flag
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    error_ = "redis-server did not start on port " + std::to_string(port) + " (see " + dir_ +
             "/redis.log)";
    return false;
}

redis_server::~redis_server() {
    kill();
    if (!dir_.empty()) {
        const std::string cmd = "rm -rf '" + dir_ + "'";
        if (std::system(cmd.c_str()) != 0)
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
    }
}

void redis_server::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

void redis_server::freeze() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void redis_server::thaw() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string redis_server::url(const std::string& password) const {
    return "redis://" + (password.empty() ? std::string() : ":" + password + "@") +
           "127.0.0.1:" + std::to_string(port_) + "/0";
}

#if CBL_HAVE_HIREDIS
bool redis_server::keys(const std::string& pattern, std::vector<std::string>* out) const {
    redisReply* r = command(port_, password_, {"KEYS", pattern});
    const bool ok = r && r->type == REDIS_REPLY_ARRAY;
    if (ok) {
        out->clear();
        for (size_t i = 0; i < r->elements; ++i)
            out->emplace_back(r->element[i]->str, r->element[i]->len);
    }
    if (r) freeReplyObject(r);
    return ok;
}

bool redis_server::get(const std::string& name, std::string* out) const {
    redisReply* r = command(port_, password_, {"GET", name});
    const bool ok = r && r->type == REDIS_REPLY_STRING;
    if (ok) out->assign(r->str, r->len);
    if (r) freeReplyObject(r);
    return ok;
}

bool redis_server::set(const std::string& name, const std::string& value) const {
    redisReply* r = command(port_, password_, {"SET", name, value});
    const bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}
#else
bool redis_server::keys(const std::string&, std::vector<std::string>*) const { return false; }
bool redis_server::get(const std::string&, std::string*) const { return false; }
bool redis_server::set(const std::string&, const std::string&) const { return false; }
#endif

}  // namespace cbltest
