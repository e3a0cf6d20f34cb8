// Ctrl-C as a request to stop cleanly: while a sigint_guard lives, the first SIGINT only sets a
// flag that long commands poll (generate's token callback, ingest's progress callback) so they
// can still print what they did; a second one kills the process (SA_RESETHAND restores the
// default action).
#pragma once

#include <csignal>

namespace cacheblend::cli {

class sigint_guard {
public:
    sigint_guard();
    ~sigint_guard();
    sigint_guard(const sigint_guard&) = delete;
    sigint_guard& operator=(const sigint_guard&) = delete;

private:
    struct sigaction old_ {};
    bool installed_ = false;
};

// Whether SIGINT came since the innermost live sigint_guard was made.
bool sigint_received();

}  // namespace cacheblend::cli
