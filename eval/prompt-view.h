// A prompt_text (musique-prompt.h) as the runtime library's literal layout, CBL_X_PROMPT_CUSTOM of
// cacheblend_experimental.h: the eval library reaches the runtime through its public C API only.
#pragma once

#include <memory>
#include <vector>

#include "cacheblend_experimental.h"
#include "musique-prompt.h"

namespace cacheblend::eval {

// Owns the texts and the pointer arrays that get() points into. The texts sit on the heap and
// moves keep every buffer (a moved short std::string would not keep its characters in place), so
// the pointers stay valid; copies would dangle and are deleted.
class prompt_view {
public:
    prompt_view() : prompt_view(prompt_text{}) {}
    explicit prompt_view(prompt_text text);
    prompt_view(const prompt_view&) = delete;
    prompt_view& operator=(const prompt_view&) = delete;
    prompt_view(prompt_view&&) = default;
    prompt_view& operator=(prompt_view&&) = default;

    const cbl_x_prompt* get() const { return &prompt_; }
    const prompt_text& text() const { return *text_; }

private:
    std::unique_ptr<const prompt_text> text_;
    std::vector<const char*> chunks_;
    std::vector<size_t> lens_;
    cbl_x_prompt prompt_{};
};

}  // namespace cacheblend::eval
