// Prompt assembly for blended RAG requests (docs/ARCHITECTURE.md, 'Blended prefill'): system text,
// a plain preamble, passages and a question become a blend_request [P][C1]..[Ck][Q] inside the
// model's chat template. The template is rendered once around a sentinel user message and split
// there, so P is [system turn + user opening + preamble] and Q is [question + user closing +
// assistant opening]. Every piece is tokenized on its own: a chunk's tokens never depend on its
// neighbours (its KV key stays the same wherever it appears), and only template text may produce
// special tokens.
#pragma once

#include <string>
#include <vector>

#include "core/blend/blend.h"
#include "core/model/model.h"
#include "core/prompt/chat-template.h"
#include "core/tokenizer/tokenizer.h"

namespace cacheblend {

// The exact texts of one request, before tokenization.
struct rag_prompt_text {
    std::string system;               // system message; empty: none
    std::string preamble;             // plain text after the user opening, before the chunks
    std::vector<std::string> chunks;  // one passage each, already formatted
    std::string question;             // plain text after the chunks, before the template tail
};

// The `blend` subcommand's format: a short instruction, "Passages:\n\n", each passage with its
// trailing whitespace trimmed and "\n\n" appended, then "Question: " + q + "\nAnswer:".
// (Dataset layouts such as the paper's musique prompt live in the eval library, eval/.)
rag_prompt_text default_rag_prompt(const std::vector<std::string>& passages,
                                   const std::string& question);

// The template around a request: head = everything before the user content (system turn and the
// user opening), tail = everything after it (user closing and assistant opening).
struct chat_frame {
    std::string head;
    std::string tail;
};
// Throws cacheblend::error(status::unsupported) for chat_format::unknown.
chat_frame split_chat_template(chat_format f, const std::string& system);

// The model's chat format for RAG prompts: its own when supported, ChatML when the GGUF has no
// template (llama.cpp's fallback); throws status::unsupported for a template we cannot render.
chat_format rag_chat_format(const model& m);

// P = [BOS when the vocabulary adds one] + head (special tokens parsed) + preamble (plain);
// each chunk = its text (plain, no BOS/EOS); Q = question (plain) + tail (special tokens parsed).
// Throws status::invalid_arg when a chunk or the question has no tokens.
blend_request build_blend_request(const tokenizer& vocab, chat_format f,
                                  const rag_prompt_text& text);
blend_request build_blend_request(const model& m, const rag_prompt_text& text);

// Total prompt tokens of a request (P + chunks + Q).
int64_t request_tokens(const blend_request& r);
// The request's prompt in order: P, the chunks, Q.
std::vector<token_id> request_prompt(const blend_request& r);

}  // namespace cacheblend
