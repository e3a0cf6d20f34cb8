// Hang checks for FIFOs (issue 17): code that opens a FIFO for reading without O_NONBLOCK waits
// forever for a writer. returns_soon() runs the code on a thread and, if it is still blocked
// after a deadline, fails and then opens the FIFO's write end itself so the blocked open returns
// and the thread can be joined: the test fails instead of hanging the suite.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>

#include <gtest/gtest.h>

namespace cbltest {

inline ::testing::AssertionResult returns_soon(const std::string& fifo,
                                               const std::function<void()>& fn,
                                               std::chrono::seconds deadline =
                                                   std::chrono::seconds(10)) {
    auto done = std::async(std::launch::async, fn);
    if (done.wait_for(deadline) == std::future_status::ready) {
        done.get();  // rethrows what fn threw
        return ::testing::AssertionSuccess();
    }
    // Unblock it: a writer appears, then leaves (the reader then sees end of file).
    for (int i = 0; i < 100 && done.wait_for(std::chrono::milliseconds(50)) !=
                                   std::future_status::ready; ++i) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) ::close(fd);
    }
    try {
        done.get();
    } catch (...) {
    }
    return ::testing::AssertionFailure() << "blocked on the FIFO " << fifo << " for "
                                         << deadline.count() << " s";
}

}  // namespace cbltest
