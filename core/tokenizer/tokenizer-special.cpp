// Special tokens, as llama.cpp treats them: their ids from GGUF (bos, eos, eot, fim, ...), the
// auto-detection of end-of-generation and FIM tokens by text (in llama.cpp's hash-map order, so
// the same tokens win), and the partition of raw text around special tokens before encoding.

#include "core/tokenizer/tokenizer-impl.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "core/model/gguf.h"

namespace cacheblend {

using namespace tokenizer_detail;

void tokenizer::impl::load_special_ids(const gguf_file& f) {
    const std::pair<const char*, token_id*> keys[] = {
        {"tokenizer.ggml.bos_token_id", &bos},
        {"tokenizer.ggml.eos_token_id", &eos},
        {"tokenizer.ggml.eot_token_id", &eot},
        {"tokenizer.ggml.eom_token_id", &eom},
        {"tokenizer.ggml.unknown_token_id", &unk},
        {"tokenizer.ggml.seperator_token_id", &sep},  // sic, as llama.cpp spells it
        {"tokenizer.ggml.padding_token_id", &pad},
        {"tokenizer.ggml.mask_token_id", &mask},
        {"tokenizer.ggml.fim_pre_token_id", &fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &fim_sep},
        {"tokenizer.ggml.prefix_token_id", &fim_pre},  // deprecated spellings
        {"tokenizer.ggml.suffix_token_id", &fim_suf},
        {"tokenizer.ggml.middle_token_id", &fim_mid},
    };
    const int64_t nv = n_vocab();
    for (const auto& k : keys) {
        token_id& id = *k.second;
        if (id >= 0 && id >= nv) id = k_null;  // default out of range: disabled
        auto v = f.get_int(k.first);
        if (!v) continue;
        if (*v >= 0 && *v < nv) id = token_id(*v);  // a bad id keeps the default
    }
    if (auto v = f.get_bool("tokenizer.ggml.add_bos_token")) add_bos = *v;
    if (auto v = f.get_bool("tokenizer.ggml.add_eos_token")) add_eos = *v;
    if (auto v = f.get_bool("tokenizer.ggml.add_sep_token")) add_sep = *v;
    if (add_bos && bos == k_null) {
        throw error(status::format, "tokenizer: add_bos_token is set but there is no BOS token");
    }
    if (add_eos && eos == k_null) {
        throw error(status::format, "tokenizer: add_eos_token is set but there is no EOS token");
    }
}

void tokenizer::impl::detect_special_tokens() {
    // Auto-detection by text, in token_to_id iteration order like llama.cpp (first match wins).
    auto make_control = [&](token_id id) { attrs[id] |= attr_control; };
    auto any_of = [](std::string_view s, std::initializer_list<const char*> list) {
        for (const char* x : list) {
            if (s == x) return true;
        }
        return false;
    };
    for (const auto& t : token_to_id) {
        const std::string_view s = t.first;
        const token_id id = t.second;
        if (eot == k_null &&
            any_of(s, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                       "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                       "<\xEF\xBD\x9C"
                       "end\xE2\x96\x81"
                       "of\xE2\x96\x81"
                       "sentence\xEF\xBD\x9C>",
                       "<end_of_utterance>"})) {
            eot = id;
            make_control(id);
        }
        if (eom == k_null && s == "<|eom_id|>") {
            eom = id;
            make_control(id);
        }
        if (fim_pre == k_null &&
            any_of(s, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                       "<\xEF\xBD\x9C"
                       "fim\xE2\x96\x81"
                       "begin\xEF\xBD\x9C>",
                       "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"})) {
            fim_pre = id;
            make_control(id);
        }
        if (fim_suf == k_null &&
            any_of(s, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                       "<\xEF\xBD\x9C"
                       "fim\xE2\x96\x81"
                       "hole\xEF\xBD\x9C>",
                       "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"})) {
            fim_suf = id;
            make_control(id);
        }
        if (fim_mid == k_null &&
            any_of(s, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                       "<\xEF\xBD\x9C"
                       "fim\xE2\x96\x81"
                       "end\xEF\xBD\x9C>",
                       "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"})) {
            fim_mid = id;
            make_control(id);
        }
        if (fim_pad == k_null &&
            any_of(s, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"})) {
            fim_pad = id;
            make_control(id);
        }
        if (fim_rep == k_null &&
            any_of(s, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"})) {
            fim_rep = id;
            make_control(id);
        }
        if (fim_sep == k_null && s == "<|file_sep|>") {
            fim_sep = id;
            make_control(id);
        }
    }

    // Control tokens whose text says "unused".
    for (const auto& t : token_to_id) {
        uint32_t& a = attrs[t.second];
        if ((a & attr_control) && !(a & attr_unused) && contains(t.first, "unused")) {
            a |= attr_unused;
        }
    }

    std::vector<token_id> eog;
    auto add_eog = [&](token_id id) {
        if (id != k_null && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
    };
    add_eog(fim_pad);
    add_eog(fim_rep);
    add_eog(fim_sep);
    for (const auto& t : token_to_id) {
        if (any_of(t.first, {"<|eot_id|>",
                             "<|im_end|>",
                             "<|end|>",
                             "<|return|>",
                             "<|call|>",
                             "<|flush|>",
                             "<|calls|>",
                             "<end_of_turn>",
                             "<|endoftext|>",
                             "</s>",
                             "<|eom_id|>",
                             "<EOT>",
                             "_<EOT>",
                             "[EOT]",
                             "[EOS]",
                             "<|end_of_text|>",
                             "<end_of_utterance>",
                             "<eos>",
                             "<turn|>",
                             "<|tool_response>",
                             "<\xEF\xBD\x9C"
                             "end\xE2\x96\x81"
                             "of\xE2\x96\x81"
                             "sentence\xEF\xBD\x9C>",
                             "[e~["})) {
            add_eog(t.second);
            make_control(t.second);
        }
    }
    // gpt-oss: always render these.
    for (const char* s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
        const token_id id = lookup(s);
        if (id != k_null) attrs[id] = attr_user_defined;
    }
    add_eog(eos);
    add_eog(eot);
    add_eog(eom);

    // o200k_harmony / solar-open: "<|end|>" is not EOG when "<|return|>" and "<|call|>" (or
    // "<|calls|>" and "<|flush|>") are.
    {
        bool has_return = false, has_call = false, has_end = false, has_flush = false;
        token_id end_id = k_null;
        for (token_id id : eog) {
            const std::string_view s = text(id);
            if (s == "<|return|>") {
                has_return = true;
            } else if (s == "<|call|>" || s == "<|calls|>") {
                has_call = true;
            } else if (s == "<|flush|>") {
                has_flush = true;
            } else if (s == "<|end|>") {
                has_end = true;
                end_id = id;
            }
        }
        if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
            eog.erase(std::find(eog.begin(), eog.end(), end_id));
            attrs[end_id] = attr_user_defined;
        }
    }
    // gemma4 / paddleocr: "</s>" is not EOG next to "<|tool_response>".
    {
        bool has_tool_response = false;
        token_id s_id = k_null;
        for (token_id id : eog) {
            if (text(id) == "<|tool_response>") has_tool_response = true;
            if (text(id) == "</s>") s_id = id;
        }
        if (has_tool_response && s_id != k_null) {
            eog.erase(std::find(eog.begin(), eog.end(), s_id));
            attrs[s_id] = attr_normal;
        }
    }
    std::sort(eog.begin(), eog.end());
    eog_ids = eog;
    is_eog.assign(attrs.size(), 0);
    for (token_id id : eog_ids) is_eog[id] = 1;
}

// llama.cpp's tokenizer_st_partition: each special token, longest first, carves its
// occurrences out of the remaining raw-text fragments.
void tokenizer::impl::partition(std::string_view raw, bool parse_special,
                                std::vector<fragment>& frags) const {
    frags.clear();
    if (raw.empty()) return;
    frags.push_back({k_null, 0, uint32_t(raw.size())});
    std::vector<fragment> next;
    for (token_id id : special_tokens) {
        const uint32_t a = attrs[id];
        if (!parse_special && (a & (attr_control | attr_unknown))) continue;
        const std::string_view tok = text(id);
        bool any = false;
        for (const fragment& fr : frags) {
            if (fr.token == k_null &&
                raw.substr(fr.off, fr.len).find(tok) != std::string_view::npos) {
                any = true;
                break;
            }
        }
        if (!any) continue;
        next.clear();
        for (const fragment& fr : frags) {
            if (fr.token != k_null) {
                next.push_back(fr);
                continue;
            }
            size_t base = fr.off;
            size_t len = fr.len;
            while (true) {
                const size_t match = raw.substr(0, base + len).find(tok, base);
                if (match == std::string_view::npos) {
                    if (len > 0) next.push_back({k_null, uint32_t(base), uint32_t(len)});
                    break;
                }
                if (match > base) {
                    size_t left = match - base;
                    if (a & attr_lstrip) {
                        while (left > 0 && c_isspace(raw[base + left - 1])) --left;
                    }
                    if (left > 0) next.push_back({k_null, uint32_t(base), uint32_t(left)});
                }
                next.push_back({id, 0, 0});
                if (match + tok.size() < base + len) {
                    size_t roff = match + tok.size();
                    size_t rlen = base + len - roff;
                    if (a & attr_rstrip) {
                        while (rlen > 0 && c_isspace(raw[roff])) {
                            ++roff;
                            --rlen;
                        }
                    }
                    base = roff;
                    len = rlen;
                } else {
                    break;
                }
            }
        }
        frags.swap(next);
    }
}

}  // namespace cacheblend
