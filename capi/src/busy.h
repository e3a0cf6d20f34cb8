// One call at a time per session (STYLE.md §5): a scope holds the session's busy flag, so a
// second concurrent call, or a callback calling back into its own session, finds it taken.
#pragma once

#include <string>

#include "capi/src/guard.h"
#include "capi/src/handles.h"

namespace cacheblend::capi {

class busy_scope {
public:
    explicit busy_scope(cbl_session* s) : s_(s), ok_(!s->busy.exchange(true)) {}
    ~busy_scope() {
        if (ok_) s_->busy.store(false);
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
