// The CacheBlend paper's musique prompt (reference §1.10, example/blend_musique.py) as plain
// texts: its instruction as the system message, "Passages:\n" as the preamble, each passage
// "title\n\ntext\n\n" as a chunk, and the question normalized as the paper's code does. An
// evaluation layout, so it lives in the eval library, not in the runtime library; the runtime
// takes the texts literally (CBL_X_PROMPT_CUSTOM, see prompt-view.h).
#pragma once

#include <string>
#include <vector>

namespace cacheblend::eval {

struct passage {
    std::string title;
    std::string text;
};

// The exact texts of one request, before the model's chat template and tokenization.
struct prompt_text {
    std::string system;               // system message
    std::string preamble;             // plain text after the user opening, before the chunks
    std::vector<std::string> chunks;  // one passage each, already formatted
    std::string question;             // plain text after the chunks
};

// The reference's normalize_question: appends "?" when missing and lowercases the first letter.
std::string normalize_question(const std::string& question);

// The musique layout above: the query is "\n\nAnswer the question directly ... \nQuestion:" +
// normalize_question(q) + "\nAnswer:". Throws std::invalid_argument for a blank question or a
// passage whose text is blank (the runtime rejected those when it built this layout itself).
prompt_text musique_prompt(const std::vector<passage>& passages, const std::string& question);

}  // namespace cacheblend::eval
