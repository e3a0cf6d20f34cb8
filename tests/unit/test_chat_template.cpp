// Chat templates: detection from template text and the exact strings llama.cpp's
// llm_chat_apply_template renders (expected outputs from llama.cpp's test-chat-template.cpp for
// the same conversation).
#include "core/prompt/chat-template.h"
#include "core/util/error.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

const std::vector<chat_message> k_conversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

// SmolLM2-135M-Instruct's tokenizer.chat_template.
const char* k_smollm2_template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

const char* k_llama3_template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' "
    "}}";

const char* k_mistral_v02_template =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";

}  // namespace

TEST(ChatTemplate, Detect) {
    EXPECT_EQ(detect_chat_format(k_smollm2_template), chat_format::chatml);
    EXPECT_EQ(detect_chat_format(k_llama3_template), chat_format::llama3);
    EXPECT_EQ(detect_chat_format(k_mistral_v02_template), chat_format::mistral);
    EXPECT_EQ(detect_chat_format("chatml"), chat_format::chatml);
    EXPECT_EQ(detect_chat_format("llama3"), chat_format::llama3);
    EXPECT_EQ(detect_chat_format("llama2"), chat_format::mistral);
    EXPECT_EQ(detect_chat_format("mistral-v7"), chat_format::mistral_v7);
    EXPECT_EQ(detect_chat_format("{{ '[SYSTEM_PROMPT]' }}[INST]"), chat_format::mistral_v7);
    EXPECT_EQ(detect_chat_format("' [INST] ' + system_message"), chat_format::mistral_v1);
    EXPECT_EQ(detect_chat_format("[AVAILABLE_TOOLS][INST]"), chat_format::mistral_v3);
    EXPECT_EQ(detect_chat_format("[AVAILABLE_TOOLS]\"[INST]\""), chat_format::mistral_v3_tekken);
    EXPECT_EQ(detect_chat_format("[INST] <<SYS>> content.strip()"), chat_format::llama2_sys_strip);
    EXPECT_EQ(detect_chat_format("bos_token + '[INST] <<SYS>>"), chat_format::llama2_sys_bos);
    EXPECT_EQ(detect_chat_format("[INST] <<SYS>>"), chat_format::llama2_sys);
    // llama.cpp sends these to formats we do not render: phi4, smolvlm, phi3, gemma.
    EXPECT_EQ(detect_chat_format("<|im_start|><|im_sep|>"), chat_format::unknown);
    EXPECT_EQ(detect_chat_format("<|im_start|><end_of_utterance>"), chat_format::unknown);
    EXPECT_EQ(detect_chat_format("<|user|><|assistant|><|end|>"), chat_format::unknown);
    EXPECT_EQ(detect_chat_format("<start_of_turn><|start_header_id|><|end_header_id|>"),
              chat_format::unknown);
    EXPECT_EQ(detect_chat_format("<|start_header_id|>"), chat_format::unknown);  // needs both
    EXPECT_EQ(detect_chat_format(""), chat_format::unknown);
    EXPECT_EQ(detect_chat_format("{{ messages }}"), chat_format::unknown);

    EXPECT_STREQ(chat_format_name(chat_format::chatml), "chatml");
    EXPECT_STREQ(chat_format_name(chat_format::llama3), "llama3");
    EXPECT_STREQ(chat_format_name(chat_format::mistral), "mistral");
    EXPECT_STREQ(chat_format_name(chat_format::mistral_v3_tekken), "mistral-v3-tekken");
    EXPECT_STREQ(chat_format_name(chat_format::unknown), "unknown");
}

TEST(ChatTemplate, ChatML) {
    EXPECT_EQ(render_chat(chat_format::chatml, k_conversation, true),
              "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"
              "<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are "
              "you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n"
              "<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
    // No default system prompt (llama.cpp's non-Jinja path), no generation prompt when not asked.
    EXPECT_EQ(render_chat(chat_format::chatml, {{"user", "Hi"}}, false),
              "<|im_start|>user\nHi<|im_end|>\n");
    EXPECT_EQ(render_chat(chat_format::chatml, {}, true), "<|im_start|>assistant\n");
    EXPECT_EQ(render_chat(chat_format::chatml, {{"user", "Hi"}}, true, "<s>"),
              "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3) {
    EXPECT_EQ(render_chat(chat_format::llama3, k_conversation, true),
              "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant"
              "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_EQ(render_chat(chat_format::llama3, {{"user", " Hi\n"}}, false),
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, MistralAndLlama2) {
    // Mistral-7B-Instruct-v0.2 (llama.cpp "llama2"): the system message joins the first turn.
    EXPECT_EQ(render_chat(chat_format::mistral, k_conversation, true),
              "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you "
              "[/INST]   I am an assistant   </s>[INST] Another question [/INST]");
    EXPECT_EQ(render_chat(chat_format::llama2_sys_bos, k_conversation, true),
              "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there"
              "</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another "
              "question [/INST]");
    EXPECT_EQ(render_chat(chat_format::llama2_sys_strip, k_conversation, true),
              "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there"
              "</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question "
              "[/INST]");
    EXPECT_EQ(render_chat(chat_format::llama2_sys, k_conversation, true),
              "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there"
              "</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question "
              "[/INST]");
    EXPECT_EQ(render_chat(chat_format::mistral_v1, k_conversation, true),
              " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are "
              "you [/INST]    I am an assistant   </s> [INST] Another question [/INST]");
    EXPECT_EQ(render_chat(chat_format::mistral_v3, k_conversation, true),
              "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are "
              "you[/INST] I am an assistant</s>[INST] Another question[/INST]");
    EXPECT_EQ(render_chat(chat_format::mistral_v3_tekken, k_conversation, true),
              "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you"
              "[/INST]   I am an assistant   </s>[INST]Another question[/INST]");
    EXPECT_EQ(render_chat(chat_format::mistral_v7, k_conversation, true),
              "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi "
              "there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another "
              "question[/INST]");
    EXPECT_EQ(render_chat(chat_format::mistral_v7_tekken, k_conversation, true),
              "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi "
              "there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another "
              "question[/INST]");
    // The [INST] prompts already end where the assistant speaks.
    EXPECT_EQ(render_chat(chat_format::mistral, {{"user", "Hi"}}, true),
              render_chat(chat_format::mistral, {{"user", "Hi"}}, false));
}

TEST(ChatTemplate, UnknownThrows) {
    try {
        render_chat(chat_format::unknown, k_conversation, true);
        FAIL() << "no error";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::unsupported);
    }
}
