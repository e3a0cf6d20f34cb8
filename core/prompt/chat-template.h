// Native chat template rendering for the formats we support: ChatML (SmolLM2, Qwen2), Llama-3 and
// Mistral/Llama-2 [INST]. The format is detected from the GGUF's tokenizer.chat_template text the
// way llama.cpp's non-Jinja path does (llm_chat_detect_template), and rendered exactly as its
// llm_chat_apply_template: no default system prompt is injected.
#pragma once

#include <string>
#include <vector>

namespace cacheblend {

struct chat_message {
    std::string role;     // "system", "user", "assistant"
    std::string content;
};

enum class chat_format {
    chatml,
    llama3,
    mistral,  // "[INST] user [/INST]assistant</s>" (llama.cpp's "llama2", Mistral v0.1/v0.2)
    unknown,
    // The finer [INST] variants llama.cpp tells apart (names as in llama.cpp).
    llama2_sys,         // "llama2-sys": system in <<SYS>>
    llama2_sys_bos,     // "llama2-sys-bos": also "<s>" before each later [INST]
    llama2_sys_strip,   // "llama2-sys-strip": also trims messages
    mistral_v1,         // "mistral-v1"
    mistral_v3,         // "mistral-v3"
    mistral_v3_tekken,  // "mistral-v3-tekken"
    mistral_v7,         // "mistral-v7"
    mistral_v7_tekken,  // "mistral-v7-tekken"
};

// Accepts a template text or a llama.cpp template name ("chatml", "llama3", "mistral-v7", ...).
// Templates llama.cpp maps to a format we do not render give chat_format::unknown.
chat_format detect_chat_format(const std::string& template_text);
const char* chat_format_name(chat_format f);

// Renders messages; add_generation_prompt appends the assistant opening (the [INST] formats
// have none: their prompt already ends with "[/INST]"). bos_text, when not empty, is put in
// front (for callers that tokenize without adding BOS). Throws
// cacheblend::error(status::unsupported) for chat_format::unknown.
std::string render_chat(chat_format f, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::string& bos_text = "");

}  // namespace cacheblend
