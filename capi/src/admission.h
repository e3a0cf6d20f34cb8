// A runtime session's compute call waits for its turn at the runtime's request gate
// (runtime/request-gate.h): CBL_BUSY when the queue is full, CBL_ABORTED when the session is
// cancelled while it waits. Sessions made by cbl_session_create_with have no runtime and no gate.
#pragma once

#include "capi/src/handles.h"
#include "runtime/request-gate.h"

namespace cacheblend::capi {

// Call after the session's busy_scope (the call owns the session) and hold the returned pass for
// the whole call; s->queue_ms gets the wait (the stats' queue_ms).
inline request_gate::pass admit(cbl_session* s) {
    s->queue_ms = 0;
    if (!s->rt) return request_gate::pass();
    // A cancel made while no call ran is stale ("without a running call it does nothing").
    s->s->clear_cancel();
    rag_session* rs = s->s.get();
    return s->rt->requests().enter([rs] { return rs->cancelled(); }, &s->queue_ms);
}

}  // namespace cacheblend::capi
