#include "core/prompt/rag-prompt.h"

#include <algorithm>

#include "core/util/error.h"

namespace cacheblend {
namespace {

// Stands in for the user content while the template is rendered. Plain ASCII without white
// space, so no template trims or rewrites it, and unlikely in any system text.
const char k_sentinel[] = "@@CBL_USER_CONTENT_7f3a@@";

const char k_default_system[] =
    "Answer the question using only the passages the user gives. Be brief and factual. If the "
    "passages do not contain the answer, say so.";

void append(std::vector<token_id>& out, const std::vector<token_id>& ids) {
    out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace

rag_prompt_text default_rag_prompt(const std::vector<std::string>& passages,
                                   const std::string& question) {
    rag_prompt_text t;
    t.system = k_default_system;
    t.preamble = "Passages:\n\n";
    t.chunks.reserve(passages.size());
    for (const std::string& p : passages) {
        size_t end = p.size();
        while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t' || p[end - 1] == '\n' ||
                           p[end - 1] == '\r')) {
            --end;
        }
        t.chunks.push_back(p.substr(0, end) + "\n\n");
    }
    t.question = "Question: " + question + "\nAnswer:";
    return t;
}

chat_frame split_chat_template(chat_format f, const std::string& system) {
    std::vector<chat_message> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", k_sentinel});
    const std::string text = render_chat(f, msgs, true);
    const size_t at = text.find(k_sentinel);
    if (at == std::string::npos || text.find(k_sentinel, at + 1) != std::string::npos) {
        throw error(status::internal, fmt("rag prompt: cannot split the %s chat template",
                                          chat_format_name(f)));
    }
    return {text.substr(0, at), text.substr(at + sizeof(k_sentinel) - 1)};
}

chat_format rag_chat_format(const model& m) {
    const chat_format f = m.chat();
    if (f != chat_format::unknown) return f;
    if (m.file().has("tokenizer.chat_template")) {
        throw error(status::unsupported,
                    "the model's chat template is not a supported format (chatml, llama3, "
                    "mistral)");
    }
    return chat_format::chatml;
}

blend_request build_blend_request(const tokenizer& vocab, chat_format f,
                                  const rag_prompt_text& text) {
    const chat_frame frame = split_chat_template(f, text.system);
    blend_request r;
    // The template text carries no BOS; add it as llama.cpp's add_special would, but never an
    // EOS (a prompt that ends in EOS would stop generation before it starts).
    if (vocab.add_bos() && vocab.bos() >= 0) r.preamble.push_back(vocab.bos());
    append(r.preamble, vocab.encode(frame.head, false, true));
    append(r.preamble, vocab.encode(text.preamble, false, false));
    r.chunks.reserve(text.chunks.size());
    for (size_t i = 0; i < text.chunks.size(); ++i) {
        r.chunks.push_back(vocab.encode(text.chunks[i], false, false));
        if (r.chunks.back().empty()) {
            throw error(status::invalid_arg, fmt("rag prompt: passage %zu has no tokens", i + 1));
        }
    }
    r.question = vocab.encode(text.question, false, false);
    append(r.question, vocab.encode(frame.tail, false, true));
    if (r.question.empty()) throw error(status::invalid_arg, "rag prompt: the question is empty");
    return r;
}

blend_request build_blend_request(const model& m, const rag_prompt_text& text) {
    return build_blend_request(m.vocab(), rag_chat_format(m), text);
}

int64_t request_tokens(const blend_request& r) {
    int64_t n = static_cast<int64_t>(r.preamble.size() + r.question.size());
    for (const auto& c : r.chunks) n += static_cast<int64_t>(c.size());
    return n;
}

std::vector<token_id> request_prompt(const blend_request& r) {
    std::vector<token_id> out;
    out.reserve(static_cast<size_t>(request_tokens(r)));
    out.insert(out.end(), r.preamble.begin(), r.preamble.end());
    for (const auto& c : r.chunks) out.insert(out.end(), c.begin(), c.end());
    out.insert(out.end(), r.question.begin(), r.question.end());
    return out;
}

}  // namespace cacheblend
