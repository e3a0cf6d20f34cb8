// Loading a tokenizer from GGUF metadata (tokenizer.ggml.*), as llama.cpp's llama_vocab::load
// does: model and pre-tokenizer names, the vocabulary texts, scores and attributes, BPE merges
// and byte symbols, SentencePiece byte fallback, then the caches encode and decode read (special
// tokens longest first, every token's rendered piece). Special token ids are set by
// tokenizer-special.cpp.

#include "core/tokenizer/tokenizer-impl.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

#include "core/model/gguf.h"

namespace cacheblend {

using namespace tokenizer_detail;

void tokenizer::impl::load(const gguf_file& f) {
    auto model_opt = f.get_string("tokenizer.ggml.model");
    if (!model_opt) throw error(status::format, "tokenizer: missing tokenizer.ggml.model");
    model = *model_opt;
    pre = f.get_string("tokenizer.ggml.pre").value_or("");

    std::optional<std::vector<std::string_view>> merge_list;
    if (model == "gpt2") {
        type = vocab_type::bpe;
        merge_list = f.get_string_array_view("tokenizer.ggml.merges");
        if (!merge_list) throw error(status::format, "tokenizer: missing tokenizer.ggml.merges");
        bos = 11;
        eos = 11;
    } else if (model == "llama") {
        type = vocab_type::spm;
        bos = 1;
        eos = 2;
        unk = 0;
    } else {
        throw error(status::unsupported,
                    fmt("tokenizer: unsupported tokenizer.ggml.model '%s'", model.c_str()));
    }

    if (type == vocab_type::bpe) {
        // llama.cpp's pre-tokenizer names (llama_vocab::impl::load) for the regex lists we have.
        using pk = unicode::pre_kind;
        add_space_prefix = false;
        escape_whitespaces = false;
        clean_spaces = true;
        const std::string& p = pre;
        if (p.empty() || p == "default") {
            pre_kind = pk::default_bpe;
        } else if (p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3" ||
                   p == "falcon-h1" || p == "pixtral" || p == "midm-2.0" || p == "lfm2" ||
                   p == "jina-v5-nano") {
            pre_kind = pk::llama3;
            ignore_merges = true;
            add_bos = true;
        } else if (p == "dbrx" || p == "smaug-bpe") {
            pre_kind = pk::llama3;
        } else if (p == "chatglm-bpe" || p == "glm4") {
            pre_kind = pk::llama3;
            bos = k_null;
        } else if (p == "deepseek-coder") {
            pre_kind = pk::deepseek_coder;
            clean_spaces = false;
        } else if (p == "falcon") {
            pre_kind = pk::falcon;
        } else if (p == "mpt" || p == "olmo" || p == "jais" || p == "gpt-2" || p == "phi-2" ||
                   p == "jina-es" || p == "jina-de" || p == "gigachat" || p == "jina-v2-es" ||
                   p == "jina-v2-de" || p == "a.x-4.0" || p == "mellum" || p == "modern-bert" ||
                   p == "exaone4") {
            pre_kind = pk::gpt2;
        } else if (p == "jina-v1-en" || p == "jina-v2-code" || p == "roberta-bpe") {
            pre_kind = pk::gpt2;
            add_sep = true;
        } else if (p == "trillion" || p == "granite-docling") {
            pre_kind = pk::gpt2;
            clean_spaces = false;
        } else if (p == "starcoder" || p == "refact" || p == "codeshell" || p == "exaone" ||
                   p == "minerva-7b" || p == "mellum2") {
            pre_kind = pk::digits_gpt2;
        } else if (p == "smollm" || p == "command-r") {
            pre_kind = pk::digits_gpt2;
            clean_spaces = false;
        } else if (p == "qwen2" || p == "deepseek-r1-qwen" || p == "kormo" || p == "f2llmv2") {
            pre_kind = pk::qwen2;
            clean_spaces = false;
        } else if (p == "stablelm2" || p == "megrez") {
            pre_kind = pk::qwen2;
        } else {
            throw error(status::unsupported,
                        fmt("tokenizer: unsupported pre-tokenizer '%s'", p.c_str()));
        }
    } else {
        add_space_prefix = true;
        clean_spaces = false;
        add_bos = true;
        add_eos = false;
    }
    if (auto v = f.get_bool("tokenizer.ggml.add_space_prefix")) add_space_prefix = *v;

    auto tokens = f.get_string_array_view("tokenizer.ggml.tokens");
    if (!tokens) throw error(status::format, "tokenizer: missing tokenizer.ggml.tokens");
    const size_t n = tokens->size();
    if (n == 0 || n > size_t(INT32_MAX / 2)) {
        throw error(status::format, fmt("tokenizer: bad vocabulary size %zu", n));
    }

    scores.assign(n, 0.0f);
    if (auto info = f.array_info("tokenizer.ggml.scores")) {
        std::vector<float> fs;
        if (info->elem_type == gguf_value_type::f32 || info->elem_type == gguf_value_type::f64) {
            fs = *f.get_float_array("tokenizer.ggml.scores");
        } else {  // llama.cpp also accepts INT32 scores
            const auto is = *f.get_int_array("tokenizer.ggml.scores");
            fs.assign(is.begin(), is.end());
        }
        if (fs.size() < n) {
            throw error(status::format, "tokenizer: tokenizer.ggml.scores shorter than tokens");
        }
        std::copy(fs.begin(), fs.begin() + n, scores.begin());
    }

    attrs.assign(n, attr_normal);
    if (auto types = f.get_int_array("tokenizer.ggml.token_type")) {
        if (types->size() < n) {
            throw error(status::format, "tokenizer: tokenizer.ggml.token_type shorter than tokens");
        }
        for (size_t i = 0; i < n; ++i) {
            switch ((*types)[i]) {
                case 1: attrs[i] = attr_normal; break;
                case 2: attrs[i] = attr_unknown; break;
                case 3: attrs[i] = attr_control; break;
                case 4: attrs[i] = attr_user_defined; break;
                case 5: attrs[i] = attr_unused; break;
                case 6: attrs[i] = attr_byte; break;
                default: attrs[i] = attr_undefined; break;
            }
        }
    }

    text_off.resize(n + 1);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += (*tokens)[i].empty() ? 24 : (*tokens)[i].size();
    if (total >= UINT32_MAX) throw error(status::format, "tokenizer: vocabulary text too large");
    arena.reserve(total);
    for (size_t i = 0; i < n; ++i) {
        text_off[i] = uint32_t(arena.size());
        if ((*tokens)[i].empty()) {
            arena += "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp renames them
        } else {
            arena.append((*tokens)[i].data(), (*tokens)[i].size());
        }
    }
    text_off[n] = uint32_t(arena.size());
    for (size_t i = 0; i < n; ++i) {
        auto res = token_to_id.emplace(text(token_id(i)), token_id(i));
        if (!res.second) {
            throw error(status::format, fmt("tokenizer: duplicate token '%.*s' (ids %d and %zu)",
                                            int(text(token_id(i)).size()), text(token_id(i)).data(),
                                            res.first->second, i));
        }
    }
    index.build(arena, text_off);

    if (type == vocab_type::bpe) {
        std::unordered_map<std::string, token_id> virt;
        token_id next_virtual = token_id(n);
        auto intern = [&](std::string_view s) -> token_id {
            const token_id id = lookup(s);
            if (id != k_null) return id;
            auto it = virt.emplace(std::string(s), next_virtual);
            if (it.second) ++next_virtual;
            return it.first->second;
        };
        merges.init(merge_list->size());
        std::string joined;
        for (size_t i = 0; i < merge_list->size(); ++i) {
            std::string_view m = (*merge_list)[i];
            const size_t sp = m.find(' ', 1);
            if (sp == std::string_view::npos) continue;  // llama.cpp maps it to ("", "")
            std::string_view l = m.substr(0, sp), r = m.substr(sp + 1);
            joined.assign(l.data(), l.size());
            joined.append(r.data(), r.size());
            merges.insert(intern(l), intern(r), {int32_t(i), intern(joined)});
        }
        for (int b = 0; b < 256; ++b) {
            byte_symbol[b] = intern(unicode::byte_to_utf8(uint8_t(b)));
            const char c = char(b);
            single_byte_token[b] = lookup(std::string_view(&c, 1));
        }
    } else {
        static const char* hex = "0123456789ABCDEF";
        for (int b = 0; b < 256; ++b) {
            const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            token_id id = lookup(std::string_view(buf, 6));
            if (id == k_null) {
                const char c = char(b);
                id = lookup(std::string_view(&c, 1));
            }
            spm_byte_token[b] = id;
        }
        // Every U+2581 inside a token (not at its start) follows another U+2581.
        spm_word_split = true;
        const std::string_view esc(k_escaped_space);
        for (size_t i = 0; i < n && spm_word_split; ++i) {
            const std::string_view t = text(token_id(i));
            for (size_t p = t.find(esc, 1); p != std::string_view::npos; p = t.find(esc, p + 1)) {
                if (p < 3 || t.compare(p - 3, 3, esc) != 0) {
                    spm_word_split = false;
                    break;
                }
            }
        }
    }

    load_special_ids(f);
    for (auto& id : spm_byte_token) {
        if (id == k_null) id = unk;  // llama.cpp would throw; unk (or nothing) is kinder
    }
    detect_special_tokens();
    build_caches(f);
    std::unordered_map<std::string_view, token_id>().swap(token_to_id);
}

void tokenizer::impl::build_caches(const gguf_file& f) {
    const int32_t n = n_vocab();
    for (token_id id = 0; id < n; ++id) {
        if (attrs[id] & (attr_control | attr_user_defined | attr_unknown)) {
            special_tokens.push_back(id);
        }
    }
    // std::sort (not stable) with llama.cpp's comparator and input order: the same order for
    // tokens of equal length.
    std::sort(special_tokens.begin(), special_tokens.end(),
              [&](token_id a, token_id b) { return text(a).size() > text(b).size(); });

    piece_off.resize(size_t(n) + 1);
    for (token_id id = 0; id < n; ++id) {
        piece_off[id] = uint32_t(piece_arena.size());
        piece_arena += make_piece(id);
    }
    piece_off[n] = uint32_t(piece_arena.size());

    // Per-model attributes that llama.cpp sets by name (after the caches above).
    std::string name = f.get_string("general.name").value_or("");
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return char(std::tolower(static_cast<unsigned char>(c))); });
    const std::string arch = f.get_string("general.architecture").value_or("");
    auto set_attr = [&](const char* s, uint32_t bit, bool on) {
        const token_id id = lookup(s);
        if (id == k_null) return;
        attrs[id] = on ? (attrs[id] | bit) : (attrs[id] & ~bit);
    };
    if (contains(pre, "jina-v2-de") || contains(pre, "jina-v2-es") ||
        contains(pre, "jina-v2-code") || contains(arch, "nomic-bert-moe") ||
        contains(arch, "jina-bert-v3")) {
        set_attr("<mask>", attr_lstrip, true);
    } else if (contains(name, "phi-3") || contains(name, "phi3")) {
        for (token_id id : special_tokens) attrs[id] |= attr_rstrip;
        set_attr("</s>", attr_rstrip, true);
        for (const char* s : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(s, attr_rstrip, false);
    } else if (contains(name, "modern-bert")) {
        set_attr("[MASK]", attr_lstrip, true);
    }
}

// llama.cpp's token_to_piece(special = true) for one token.
std::string tokenizer::impl::make_piece(token_id id) const {
    const uint32_t a = attrs[id];
    const std::string_view t = text(id);
    auto byte_piece = [&]() {
        // token_to_byte: the two hex digits of "<0xXX>".
        std::string hex(t.substr(std::min<size_t>(3, t.size()), 2));
        return std::string(1, char(std::strtol(hex.c_str(), nullptr, 16)));
    };
    if (a & (attr_unknown | attr_control | attr_user_defined)) return std::string(t);
    if (a & attr_normal) {
        std::string r(t);
        if (type == vocab_type::spm || escape_whitespaces) {
            replace_all(r, k_escaped_space, " ");
            return r;
        }
        // llama_decode_text: codepoints back to bytes through GPT-2's table.
        std::string out;
        for (size_t i = 0; i < t.size();) {
            uint32_t cpt;
            size_t len = unicode::utf8_decode(t.data() + i, t.size() - i, &cpt);
            if (len == 0) {
                cpt = 0xFFFD;
                len = 1;
            }
            i += len;
            const int b = unicode::cpt_to_byte(cpt);
            if (b >= 0) {
                out.push_back(char(b));
                continue;
            }
            std::string utf8;
            unicode::utf8_append(utf8, cpt);
            out += "[UNK_BYTE_0x";
            for (unsigned char c : utf8) out += fmt("%02x", c);
            out.append(t.data(), t.size());
            out += "]";
        }
        return out;
    }
    if (a & attr_byte) return byte_piece();
    return std::string();
}

}  // namespace cacheblend
