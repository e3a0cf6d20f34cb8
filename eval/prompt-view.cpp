#include "prompt-view.h"

#include <utility>

namespace cacheblend::eval {

prompt_view::prompt_view(prompt_text text)
    : text_(std::make_unique<const prompt_text>(std::move(text))) {
    for (const std::string& c : text_->chunks) {
        chunks_.push_back(c.data());
        lens_.push_back(c.size());
    }
    cbl_x_prompt_init(&prompt_);
    prompt_.format = CBL_X_PROMPT_CUSTOM;
    prompt_.system = text_->system.c_str();
    prompt_.preamble = text_->preamble.c_str();
    prompt_.chunks = chunks_.data();
    prompt_.lens = lens_.data();
    prompt_.n_chunks = chunks_.size();
    prompt_.question = text_->question.c_str();
}

}  // namespace cacheblend::eval
