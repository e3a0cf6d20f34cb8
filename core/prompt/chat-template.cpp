// Port of llama.cpp's llm_chat_detect_template / llm_chat_apply_template (src/llama-chat.cpp)
// for the ChatML, Llama-3 and [INST] families.

#include "core/prompt/chat-template.h"

#include "core/util/error.h"

namespace cacheblend {

namespace {

struct named_format {
    const char* name;
    chat_format format;
};

const named_format k_names[] = {
    {"chatml", chat_format::chatml},
    {"llama3", chat_format::llama3},
    {"llama2", chat_format::mistral},
    {"llama2-sys", chat_format::llama2_sys},
    {"llama2-sys-bos", chat_format::llama2_sys_bos},
    {"llama2-sys-strip", chat_format::llama2_sys_strip},
    {"mistral-v1", chat_format::mistral_v1},
    {"mistral-v3", chat_format::mistral_v3},
    {"mistral-v3-tekken", chat_format::mistral_v3_tekken},
    {"mistral-v7", chat_format::mistral_v7},
    {"mistral-v7-tekken", chat_format::mistral_v7_tekken},
};

bool c_isspace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && c_isspace(s[b])) ++b;
    while (e > b && c_isspace(s[e - 1])) --e;
    return s.substr(b, e - b);
}

}  // namespace

chat_format detect_chat_format(const std::string& tmpl) {
    for (const auto& n : k_names) {
        if (tmpl == n.name) return n.format;
    }
    auto has = [&](const char* s) { return tmpl.find(s) != std::string::npos; };
    if (has("<|im_start|>")) {
        // llama.cpp: "<|im_sep|>" is phi4 and "<end_of_utterance>" SmolVLM, not ChatML.
        if (has("<|im_sep|>") || has("<end_of_utterance>")) return chat_format::unknown;
        return chat_format::chatml;
    }
    if (tmpl.find("mistral") == 0 || has("[INST]")) {
        if (has("[SYSTEM_PROMPT]")) return chat_format::mistral_v7;
        if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
            if (has(" [INST]")) return chat_format::mistral_v1;
            if (has("\"[INST]\"")) return chat_format::mistral_v3_tekken;
            return chat_format::mistral_v3;
        }
        if (has("content.strip()")) return chat_format::llama2_sys_strip;
        if (has("bos_token + '[INST]")) return chat_format::llama2_sys_bos;
        if (has("<<SYS>>")) return chat_format::llama2_sys;
        return chat_format::mistral;
    }
    // Formats llama.cpp checks before Llama-3 (phi3, chatglm4, falcon3/glmedge, zephyr, monarch,
    // gemma, orion, openchat, vicuna, deepseek, command-r): not ours.
    if ((has("<|assistant|>") && (has("<|end|>") || has("<|user|>"))) ||
        has("[gMASK]<sop>") ||
        (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) ||
        (has("<|user|>") && has("<|endoftext|>")) || has("bos_token + message['role']") ||
        has("<start_of_turn>") || has("'\\n\\nAssistant: ' + eos_token") ||
        has("GPT4 Correct ") || (has("USER: ") && has("ASSISTANT: ")) ||
        (has("### Instruction:") && has("<|EOT|>")) ||
        (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>"))) {
        return chat_format::unknown;
    }
    if (has("<|start_header_id|>") && has("<|end_header_id|>")) return chat_format::llama3;
    return chat_format::unknown;
}

const char* chat_format_name(chat_format f) {
    switch (f) {
        case chat_format::chatml: return "chatml";
        case chat_format::llama3: return "llama3";
        case chat_format::mistral: return "mistral";
        case chat_format::unknown: return "unknown";
        default: break;
    }
    for (const auto& n : k_names) {
        if (n.format == f) return n.name;
    }
    return "unknown";
}

std::string render_chat(chat_format f, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::string& bos_text) {
    std::string ss = bos_text;
    switch (f) {
        case chat_format::chatml:
            for (const auto& m : messages) {
                ss += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
            }
            if (add_generation_prompt) ss += "<|im_start|>assistant\n";
            break;
        case chat_format::llama3:
            for (const auto& m : messages) {
                ss += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
                      "<|eot_id|>";
            }
            if (add_generation_prompt) ss += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            break;
        case chat_format::mistral_v7:
        case chat_format::mistral_v7_tekken: {
            const char* sp = f == chat_format::mistral_v7 ? " " : "";
            for (const auto& m : messages) {
                if (m.role == "system") {
                    ss += std::string("[SYSTEM_PROMPT]") + sp + m.content + "[/SYSTEM_PROMPT]";
                } else if (m.role == "user") {
                    ss += std::string("[INST]") + sp + m.content + "[/INST]";
                } else {
                    ss += sp + m.content + "</s>";
                }
            }
            break;
        }
        case chat_format::mistral_v1:
        case chat_format::mistral_v3:
        case chat_format::mistral_v3_tekken: {
            const std::string leading = f == chat_format::mistral_v1 ? " " : "";
            const std::string trailing = f == chat_format::mistral_v3_tekken ? "" : " ";
            const bool trim_assistant = f == chat_format::mistral_v3;
            bool inside_turn = false;
            for (const auto& m : messages) {
                if (!inside_turn) {
                    ss += leading + "[INST]" + trailing;
                    inside_turn = true;
                }
                if (m.role == "system") {
                    ss += m.content + "\n\n";
                } else if (m.role == "user") {
                    ss += m.content + leading + "[/INST]";
                } else {
                    ss += trailing + (trim_assistant ? trim(m.content) : m.content) + "</s>";
                    inside_turn = false;
                }
            }
            break;
        }
        case chat_format::mistral:
        case chat_format::llama2_sys:
        case chat_format::llama2_sys_bos:
        case chat_format::llama2_sys_strip: {
            const bool system_support = f != chat_format::mistral;
            const bool bos_inside = f == chat_format::llama2_sys_bos;
            const bool strip = f == chat_format::llama2_sys_strip;
            bool inside_turn = true;  // the first [INST] is written here, BOS is the caller's
            ss += "[INST] ";
            for (const auto& m : messages) {
                const std::string content = strip ? trim(m.content) : m.content;
                if (!inside_turn) {
                    inside_turn = true;
                    ss += bos_inside ? "<s>[INST] " : "[INST] ";
                }
                if (m.role == "system") {
                    if (system_support) {
                        ss += "<<SYS>>\n" + content + "\n<</SYS>>\n\n";
                    } else {
                        ss += content + "\n";  // kept, without <<SYS>>, in the first turn
                    }
                } else if (m.role == "user") {
                    ss += content + " [/INST]";
                } else {
                    ss += content + "</s>";
                    inside_turn = false;
                }
            }
            break;
        }
        case chat_format::unknown:
        default:
            throw error(status::unsupported, "chat template: unsupported chat format");
    }
    return ss;
}

}  // namespace cacheblend
