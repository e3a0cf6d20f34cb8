#include "sigint.h"

namespace cacheblend::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) { g_interrupted = 1; }

}  // namespace

sigint_guard::sigint_guard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    installed_ = sigaction(SIGINT, &sa, &old_) == 0;
}

sigint_guard::~sigint_guard() {
    if (installed_) sigaction(SIGINT, &old_, nullptr);
}

bool sigint_received() { return g_interrupted != 0; }

}  // namespace cacheblend::cli
