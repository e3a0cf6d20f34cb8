// The shared tier on Redis through hiredis (core/kvstore/kv-remote.h). A small pool of
// connections, each set up with the connect timeout, the read/write timeout, AUTH and SELECT; a
// connection that saw any error is closed, never reused (hiredis leaves it unusable). After a
// failure the server is skipped for retry_ms ("circuit breaker"), so a down or slow server costs
// a request one timeout at most.
#include <cerrno>
#include <chrono>
#include <mutex>

#include "core/kvstore/kv-remote.h"
#include "core/util/error.h"

#if CBL_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace cacheblend {

#if CBL_HAVE_HIREDIS
namespace {

using clock_type = std::chrono::steady_clock;
constexpr size_t k_max_idle = 4;  // sessions rarely overlap more than this on one machine

timeval to_timeval(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

struct reply_free {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

struct context_free {
    void operator()(redisContext* c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_free>;

class redis_remote final : public kv_remote {
public:
    explicit redis_remote(kv_remote_config c) : c_(std::move(c)) {}

    bool get(const std::string& name, std::string* out) override {
        const char* argv[] = {"GET", name.data()};
        const size_t lens[] = {3, name.size()};
        reply_ptr r = run(2, argv, lens, "GET");
        if (r->type == REDIS_REPLY_NIL) return false;
        if (r->type != REDIS_REPLY_STRING) fail_reply(r.get(), "GET");
        out->assign(r->str, r->len);
        return true;
    }

    void set_all(const std::vector<std::pair<std::string, std::string>>& values) override {
        if (values.empty()) return;
        std::vector<const char*> argv{"MSET"};
        std::vector<size_t> lens{4};
        for (const auto& [k, v] : values) {
            argv.push_back(k.data());
            lens.push_back(k.size());
            argv.push_back(v.data());
            lens.push_back(v.size());
        }
        reply_ptr r = run(static_cast<int>(argv.size()), argv.data(), lens.data(), "MSET");
        if (r->type != REDIS_REPLY_STATUS) fail_reply(r.get(), "MSET");
    }

    void del(const std::vector<std::string>& names) override {
        if (names.empty()) return;
        std::vector<const char*> argv{"DEL"};
        std::vector<size_t> lens{3};
        for (const auto& n : names) {
            argv.push_back(n.data());
            lens.push_back(n.size());
        }
        reply_ptr r = run(static_cast<int>(argv.size()), argv.data(), lens.data(), "DEL");
        if (r->type != REDIS_REPLY_INTEGER) fail_reply(r.get(), "DEL");
    }

    const kv_remote_config& config() const override { return c_; }

private:
    // One command on a pooled connection; the connection goes back to the pool only when the
    // command got a reply (a server error reply, e.g. OOM, leaves the connection usable).
    reply_ptr run(int argc, const char** argv, const size_t* lens, const char* what) {
        context_ptr ctx = acquire();
        void* raw = redisCommandArgv(ctx.get(), argc, argv, lens);
        if (!raw) fail(fmt("%s: %s", what, io_error(ctx.get()).c_str()));
        reply_ptr r(static_cast<redisReply*>(raw));
        release(std::move(ctx));
        return r;
    }

    context_ptr acquire() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (clock_type::now() < down_until_) {
                throw error(status::io, c_.describe() + " unavailable (" + last_error_ +
                                            "); skipped for " + fmt("%d ms", c_.retry_ms));
            }
            if (!idle_.empty()) {
                context_ptr c = std::move(idle_.back());
                idle_.pop_back();
                return c;
            }
        }
        return connect();
    }

    void release(context_ptr c) {
        std::lock_guard<std::mutex> lk(mu_);
        if (idle_.size() < k_max_idle) idle_.push_back(std::move(c));
    }

    context_ptr connect() {
        context_ptr c(
            redisConnectWithTimeout(c_.host.c_str(), c_.port, to_timeval(c_.connect_timeout_ms)));
        if (!c) fail("connect: out of memory");
        if (c->err) fail(std::string("connect: ") + c->errstr);
        if (redisSetTimeout(c.get(), to_timeval(c_.io_timeout_ms)) != REDIS_OK)
            fail(std::string("set timeout: ") + c->errstr);
        if (!c_.password.empty()) {
            std::vector<const char*> argv{"AUTH"};
            std::vector<size_t> lens{4};
            if (!c_.user.empty()) {
                argv.push_back(c_.user.data());
                lens.push_back(c_.user.size());
            }
            argv.push_back(c_.password.data());
            lens.push_back(c_.password.size());
            command_ok(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data(), "AUTH");
        }
        if (c_.db != 0) {
            const std::string db = std::to_string(c_.db);
            const char* argv[] = {"SELECT", db.c_str()};
            const size_t lens[] = {6, db.size()};
            command_ok(c.get(), 2, argv, lens, "SELECT");
        }
        return c;
    }

    void command_ok(redisContext* c, int argc, const char** argv, const size_t* lens,
                    const char* what) {
        reply_ptr r(static_cast<redisReply*>(redisCommandArgv(c, argc, argv, lens)));
        if (!r) fail(fmt("%s: %s", what, io_error(c).c_str()));
        if (r->type == REDIS_REPLY_ERROR) fail_reply(r.get(), what);
    }

    // hiredis reports a read timeout as EAGAIN's text: say what it means.
    std::string io_error(const redisContext* c) const {
        if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
            return fmt("no reply within %d ms (timeout_ms)", c_.io_timeout_ms);
        return c->errstr[0] ? c->errstr : "no reply";
    }

    [[noreturn]] void fail_reply(const redisReply* r, const char* what) {
        if (r->type == REDIS_REPLY_ERROR) fail(fmt("%s: %.*s", what, (int)r->len, r->str));
        fail(fmt("%s: unexpected reply type %d", what, r->type));
    }

    // Records the failure, skips the server for retry_ms, and throws naming it.
    [[noreturn]] void fail(const std::string& why) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            last_error_ = why;
            down_until_ = clock_type::now() + std::chrono::milliseconds(c_.retry_ms);
            idle_.clear();  // the server may have restarted: old connections are suspect
        }
        throw error(status::io, c_.describe() + ": " + why);
    }

    const kv_remote_config c_;
    std::mutex mu_;
    std::vector<context_ptr> idle_;
    clock_type::time_point down_until_{};
    std::string last_error_;
};

}  // namespace

std::shared_ptr<kv_remote> open_kv_remote(const kv_remote_config& c) {
    return std::make_shared<redis_remote>(c);
}

#else

std::shared_ptr<kv_remote> open_kv_remote(const kv_remote_config& c) {
    throw error(status::unsupported,
                "kv_remote " + c.describe() +
                    ": this build has no Redis support (configure with -DCBL_REDIS=ON and "
                    "libhiredis-dev installed)");
}

#endif

}  // namespace cacheblend
