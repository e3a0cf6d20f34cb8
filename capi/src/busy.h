// One call at a time per session (docs/ARCHITECTURE.md, 'Threading and ownership'): a scope holds
// the session's busy bit, so a second concurrent call, or a callback calling back into its own
// session, finds it taken.
#pragma once

#include <string>

#include "capi/src/guard.h"
#include "capi/src/handles.h"

namespace cacheblend::capi {

// The running call's scope also finishes a cbl_session_free made during the call (from its own
// callback or another thread): the free only marks the handle, and the call deletes it on the
// way out, so nothing touches freed memory. One atomic word holds both bits so that exactly one
// side, the call or the free, sees the other's bit and deletes.
class busy_scope {
public:
    explicit busy_scope(cbl_session* s)
        : s_(s), ok_((s->state.fetch_or(cbl_session::k_busy) & cbl_session::k_busy) == 0) {}
    ~busy_scope() {
        if (ok_ && (s_->state.fetch_and(~cbl_session::k_busy) & cbl_session::k_freed)) delete s_;
    }
    busy_scope(const busy_scope&) = delete;
    busy_scope& operator=(const busy_scope&) = delete;
    bool ok() const { return ok_; }

private:
    cbl_session* s_;
    bool ok_;
};

inline cbl_status busy_error(const char* fn) {
    return set_error(
        CBL_MISUSE, std::string(fn) + ": the session is serving another call (one call at a time "
                                      "per session; callbacks must not call into their session)");
}

}  // namespace cacheblend::capi
