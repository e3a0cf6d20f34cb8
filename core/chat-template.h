// Native chat template rendering for the formats we support: ChatML (SmolLM2, Qwen2), Llama-3 and
// Mistral/Llama-2 [INST]. The format is detected from the GGUF's tokenizer.chat_template text the
// way llama.cpp's non-Jinja path does.
#pragma once

#include <string>
#include <vector>

namespace cacheblend {

struct chat_message {
    std::string role;     // "system", "user", "assistant"
    std::string content;
};

enum class chat_format { chatml, llama3, mistral, unknown };

chat_format detect_chat_format(const std::string& template_text);
const char* chat_format_name(chat_format f);

// Renders messages; add_generation_prompt appends the assistant opening. Throws
// cacheblend::error(status::unsupported) for chat_format::unknown.
std::string render_chat(chat_format f, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::string& bos_text = "");

}  // namespace cacheblend
