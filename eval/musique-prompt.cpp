#include "musique-prompt.h"

#include <algorithm>
#include <stdexcept>

#include "core/tokenizer/unicode.h"
#include "core/util/text.h"
#include "eval-metrics.h"

namespace cacheblend::eval {
namespace {

// The musique texts of CacheBlend's example/blend_musique.py, verbatim ("words.." included).
const char k_instruction[] =
    "You will be asked a question after reading several passages. Please directly answer the "
    "question based on the given passages. Do NOT repeat the question. The answer should be "
    "within 5 words..";
const char k_preamble[] = "Passages:\n";
const char k_query[] =
    "\n\nAnswer the question directly based on the given passages. Do NOT repeat the question. "
    "The answer should be within 5 words. \nQuestion:";

}  // namespace

std::string normalize_question(const std::string& question) {
    std::string q = question;
    if (q.empty() || q.back() != '?') q += '?';
    const size_t n = std::min(q.size(), unicode::utf8_seq_len(static_cast<uint8_t>(q[0])));
    return to_lower(std::string_view(q).substr(0, n)) + q.substr(n);
}

prompt_text musique_prompt(const std::vector<passage>& passages, const std::string& question) {
    if (is_blank(question)) throw std::invalid_argument("musique prompt: the question is empty");
    prompt_text t;
    t.system = k_instruction;
    t.preamble = k_preamble;
    t.chunks.reserve(passages.size());
    for (size_t i = 0; i < passages.size(); ++i) {
        if (is_blank(passages[i].text)) {
            throw std::invalid_argument("musique prompt: passage " + std::to_string(i) +
                                        " has no text");
        }
        t.chunks.push_back(passages[i].title + "\n\n" + passages[i].text + "\n\n");
    }
    t.question = k_query + normalize_question(question) + "\nAnswer:";
    return t;
}

}  // namespace cacheblend::eval
