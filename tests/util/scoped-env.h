// Sets (or, with nullptr, unsets) an environment variable for one scope and restores it after.
// For tests that point the library at a temporary cache folder or model (XDG_CACHE_HOME,
// CBL_MODEL); children started meanwhile (the CLI) inherit the change.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace cbltest {

class scoped_env {
public:
    scoped_env(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) {
            ::setenv(name, value, 1);
        } else {
            ::unsetenv(name);
        }
    }
    ~scoped_env() {
        if (old_) {
            ::setenv(name_.c_str(), old_->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    std::string name_;
    std::optional<std::string> old_;
};

}  // namespace cbltest
