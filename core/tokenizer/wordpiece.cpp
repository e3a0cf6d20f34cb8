#include "core/tokenizer/wordpiece.h"

#include <algorithm>
#include <unordered_map>

#include "core/model/gguf.h"
#include "core/tokenizer/unicode.h"
#include "core/tokenizer/wordpiece-data.h"
#include "core/util/error.h"

namespace cacheblend {

namespace {

namespace wd = wordpiece_data;

constexpr uint32_t k_replacement = 0xFFFD;

// HF tokenizers' is_chinese_char (normalizers/bert.rs), ranges as written there.
bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_whitespace(uint32_t c) {
    return c == '\t' || c == '\n' || c == '\r' ||
           (unicode::cpt_flags(c) & unicode::flag_whitespace) != 0;
}

// Cc, Cf, Co, Cs except the whitespace controls. Unassigned codepoints are kept (the reference
// reads them as [UNK] words).
bool is_control(uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    return (unicode::cpt_flags(c) & unicode::flag_control) != 0;
}

bool is_punctuation(uint32_t c) {
    if (c < 0x80) {
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126);
    }
    return (unicode::cpt_flags(c) & unicode::flag_punctuation) != 0;
}

bool is_mn(uint32_t c) {
    if (c < 0x300) return false;
    const wd::cpt_range* end = wd::k_mn_ranges + wd::k_n_mn_ranges;
    const wd::cpt_range* it = std::upper_bound(
        wd::k_mn_ranges, end, c, [](uint32_t v, const wd::cpt_range& r) { return v < r.first; });
    return it != wd::k_mn_ranges && c <= (it - 1)->last;
}

int ccc(uint32_t c) {
    if (c < 0x300) return 0;
    const uint32_t* end = wd::k_ccc_ranges + wd::k_n_ccc_ranges;
    const uint32_t* it = std::upper_bound(wd::k_ccc_ranges, end, (c << 8) | 0xFF);
    return it == wd::k_ccc_ranges ? 0 : int(*(it - 1) & 0xFF);
}

// Canonical decomposition of one codepoint, appended to out.
void decompose(uint32_t c, std::vector<uint32_t>& out) {
    // Hangul syllables (Unicode 3.12): L V (T).
    constexpr uint32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
    constexpr uint32_t n_v = 21, n_t = 28, n_s = 19 * n_v * n_t;
    if (c >= s_base && c < s_base + n_s) {
        const uint32_t s = c - s_base;
        out.push_back(l_base + s / (n_v * n_t));
        out.push_back(v_base + (s % (n_v * n_t)) / n_t);
        if (s % n_t) out.push_back(t_base + s % n_t);
        return;
    }
    if (c >= 0xC0) {
        const wd::decomposition* end = wd::k_nfd + wd::k_n_nfd;
        const wd::decomposition* it = std::lower_bound(
            wd::k_nfd, end, c, [](const wd::decomposition& d, uint32_t v) { return d.cpt < v; });
        if (it != end && it->cpt == c) {
            const uint32_t* d = wd::k_nfd_data + it->offset;
            out.insert(out.end(), d, d + it->len);
            return;
        }
    }
    out.push_back(c);
}

// Appends the lower case of c (one or two codepoints).
void to_lower(uint32_t c, std::vector<uint32_t>& out) {
    if (c < 0x80) {
        out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
        return;
    }
    const wd::cpt_pair* end = wd::k_lower + wd::k_n_lower;
    const wd::cpt_pair* it = std::lower_bound(
        wd::k_lower, end, c, [](const wd::cpt_pair& p, uint32_t v) { return p.cpt < v; });
    if (it != end && it->cpt == c) {
        out.push_back(it->to);
        return;
    }
    for (size_t i = 0; i < wd::k_n_lower2; ++i) {
        if (wd::k_lower2[i].cpt == c) {
            out.push_back(wd::k_lower2[i].to0);
            out.push_back(wd::k_lower2[i].to1);
            return;
        }
    }
    out.push_back(c);
}

void decode_utf8(std::string_view s, std::vector<uint32_t>& out) {
    size_t i = 0;
    while (i < s.size()) {
        uint32_t c = 0;
        const size_t n = unicode::utf8_decode(s.data() + i, s.size() - i, &c);
        if (n == 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
            out.push_back(k_replacement);
            i += 1;
        } else {
            out.push_back(c);
            i += n;
        }
    }
}

}  // namespace

struct wordpiece_tokenizer::impl {
    wordpiece_config cfg;
    std::vector<std::string> vocab;
    std::unordered_map<std::string, int32_t> index;
    std::vector<std::pair<std::string, int32_t>> specials;  // longest first
    size_t max_token_bytes = 0;
    int32_t unk = -1, cls = -1, sep = -1, pad = -1;

    int32_t lookup(const std::string& s) const {
        auto it = index.find(s);
        return it == index.end() ? -1 : it->second;
    }

    // Normalizes one segment (no special tokens inside) into codepoints.
    void normalize(std::string_view text, std::vector<uint32_t>& out) const {
        std::vector<uint32_t> a, b;
        decode_utf8(text, a);
        b.reserve(a.size() + 8);
        for (uint32_t c : a) {
            if (cfg.clean_text) {
                if (c == 0 || c == k_replacement || is_control(c)) continue;
                if (is_whitespace(c)) c = ' ';
            }
            if (cfg.tokenize_chinese_chars && is_cjk(c)) {
                b.push_back(' ');
                b.push_back(c);
                b.push_back(' ');
            } else {
                b.push_back(c);
            }
        }
        if (cfg.strip_accents) {
            a.clear();
            for (uint32_t c : b) decompose(c, a);
            // Canonical ordering: stable sort of each run of non-starters by combining class.
            for (size_t i = 0; i < a.size();) {
                if (ccc(a[i]) == 0) {
                    ++i;
                    continue;
                }
                size_t j = i;
                while (j < a.size() && ccc(a[j]) != 0) ++j;
                std::stable_sort(a.begin() + i, a.begin() + j,
                                 [](uint32_t x, uint32_t y) { return ccc(x) < ccc(y); });
                i = j;
            }
            b.clear();
            for (uint32_t c : a) {
                if (!is_mn(c)) b.push_back(c);
            }
        }
        if (cfg.lower_case) {
            out.reserve(out.size() + b.size());
            for (uint32_t c : b) to_lower(c, out);
        } else {
            out.insert(out.end(), b.begin(), b.end());
        }
    }

    // Calls fn(word codepoints [begin, end)) for each pre-token of a normalized segment.
    template <class Fn>
    void split_words(const std::vector<uint32_t>& cpts, Fn&& fn) const {
        size_t start = 0;
        for (size_t i = 0; i < cpts.size(); ++i) {
            const uint32_t c = cpts[i];
            if (is_whitespace(c)) {
                if (i > start) fn(start, i);
                start = i + 1;
            } else if (is_punctuation(c)) {
                if (i > start) fn(start, i);
                fn(i, i + 1);
                start = i + 1;
            }
        }
        if (cpts.size() > start) fn(start, cpts.size());
    }

    void wordpiece(const uint32_t* w, size_t n, std::vector<int32_t>& out) const {
        if (int64_t(n) > cfg.max_input_chars_per_word) {
            out.push_back(unk);
            return;
        }
        std::string word;
        std::vector<size_t> off;  // byte offset of each codepoint, plus the end
        for (size_t i = 0; i < n; ++i) {
            off.push_back(word.size());
            unicode::utf8_append(word, w[i]);
        }
        off.push_back(word.size());
        const size_t first = out.size();
        std::string piece;
        for (size_t start = 0; start < n;) {
            int32_t found = -1;
            size_t end = n;
            for (; end > start; --end) {
                const size_t len = off[end] - off[start];
                const size_t pre = start > 0 ? cfg.subword_prefix.size() : 0;
                if (len + pre > max_token_bytes) continue;
                piece.assign(start > 0 ? cfg.subword_prefix : std::string());
                piece.append(word, off[start], len);
                found = lookup(piece);
                if (found >= 0) break;
            }
            if (found < 0) {
                out.resize(first);
                out.push_back(unk);
                return;
            }
            out.push_back(found);
            start = end;
        }
    }

    void encode_segment(std::string_view text, std::vector<int32_t>& out) const {
        std::vector<uint32_t> cpts;
        normalize(text, cpts);
        split_words(cpts, [&](size_t b, size_t e) { wordpiece(cpts.data() + b, e - b, out); });
    }
};

wordpiece_tokenizer::wordpiece_tokenizer(std::vector<std::string> vocab, wordpiece_config cfg)
    : impl_(std::make_unique<impl>()) {
    impl& m = *impl_;
    m.cfg = std::move(cfg);
    m.vocab = std::move(vocab);
    m.index.reserve(m.vocab.size() * 2);
    for (size_t i = 0; i < m.vocab.size(); ++i) {
        m.index.emplace(m.vocab[i], int32_t(i));  // first occurrence wins
        m.max_token_bytes = std::max(m.max_token_bytes, m.vocab[i].size());
    }
    auto need = [&](const std::string& t) {
        const int32_t id = m.lookup(t);
        if (id < 0) throw error(status::format, fmt("wordpiece: token %s is not in the vocabulary",
                                                     t.c_str()));
        return id;
    };
    m.unk = need(m.cfg.unk_token);
    m.cls = need(m.cfg.cls_token);
    m.sep = need(m.cfg.sep_token);
    m.pad = need(m.cfg.pad_token);
    for (const std::string& s : m.cfg.special_tokens) {
        if (!s.empty()) m.specials.emplace_back(s, need(s));
    }
    std::stable_sort(m.specials.begin(), m.specials.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    if (m.cfg.max_input_chars_per_word <= 0) {
        throw error(status::format, "wordpiece: max_input_chars_per_word must be positive");
    }
}

wordpiece_tokenizer wordpiece_tokenizer::from_gguf(const gguf_file& f) {
    auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->empty()) {
        throw error(status::format, fmt("%s: no tokenizer.ggml.tokens", f.path().c_str()));
    }
    wordpiece_config cfg;
    if (!f.has("tokenizer.wordpiece.subword_prefix")) {
        // llama.cpp's BERT GGUFs store a "phantom space" vocabulary: word-initial pieces get a
        // U+2581 prefix and "##" is dropped; [..] tokens are unchanged. Undo it.
        const std::string phantom = "\xE2\x96\x81";
        for (std::string& t : *tokens) {
            if (t.size() >= 2 && t.front() == '[' && t.back() == ']') continue;
            if (t.compare(0, phantom.size(), phantom) == 0) {
                t.erase(0, phantom.size());
            } else {
                t.insert(0, "##");
            }
        }
    }
    auto get_bool = [&](const char* key, bool& v) {
        if (auto b = f.get_bool(key)) v = *b;
    };
    get_bool("tokenizer.wordpiece.clean_text", cfg.clean_text);
    get_bool("tokenizer.wordpiece.tokenize_chinese_chars", cfg.tokenize_chinese_chars);
    get_bool("tokenizer.wordpiece.do_lower_case", cfg.lower_case);
    cfg.strip_accents = cfg.lower_case;
    get_bool("tokenizer.wordpiece.strip_accents", cfg.strip_accents);
    if (auto n = f.get_int("tokenizer.wordpiece.max_input_chars_per_word")) {
        cfg.max_input_chars_per_word = int32_t(std::clamp<int64_t>(*n, 1, 1 << 20));
    }
    if (auto s = f.get_string("tokenizer.wordpiece.subword_prefix")) cfg.subword_prefix = *s;
    if (auto s = f.get_string_array("tokenizer.wordpiece.special_tokens")) {
        cfg.special_tokens = *s;
    } else {  // BERT's usual five, those the vocabulary has
        std::vector<std::string> present;
        for (const std::string& t : cfg.special_tokens) {
            if (std::find(tokens->begin(), tokens->end(), t) != tokens->end()) present.push_back(t);
        }
        cfg.special_tokens = std::move(present);
    }
    auto token_at = [&](const char* key, std::string& v) {
        if (auto id = f.get_int(key)) {
            if (*id < 0 || *id >= int64_t(tokens->size())) {
                throw error(status::format, fmt("%s: %s out of range", f.path().c_str(), key));
            }
            v = (*tokens)[size_t(*id)];
        }
    };
    token_at("tokenizer.ggml.unknown_token_id", cfg.unk_token);
    token_at("tokenizer.ggml.cls_token_id", cfg.cls_token);
    token_at("tokenizer.ggml.seperator_token_id", cfg.sep_token);
    token_at("tokenizer.ggml.padding_token_id", cfg.pad_token);
    return wordpiece_tokenizer(std::move(*tokens), std::move(cfg));
}

wordpiece_tokenizer::~wordpiece_tokenizer() = default;
wordpiece_tokenizer::wordpiece_tokenizer(wordpiece_tokenizer&&) noexcept = default;
wordpiece_tokenizer& wordpiece_tokenizer::operator=(wordpiece_tokenizer&&) noexcept = default;

void wordpiece_tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
    const impl& m = *impl_;
    size_t seg = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        for (const auto& [s, id] : m.specials) {
            if (text.compare(i, s.size(), s) == 0) {
                m.encode_segment(text.substr(seg, i - seg), out);
                out.push_back(id);
                i += s.size() - 1;
                seg = i + 1;
                break;
            }
        }
    }
    m.encode_segment(text.substr(seg), out);
}

std::vector<int32_t> wordpiece_tokenizer::encode(std::string_view text) const {
    std::vector<int32_t> out;
    encode(text, out);
    return out;
}

std::vector<std::string> wordpiece_tokenizer::pre_tokenize(std::string_view text) const {
    std::vector<uint32_t> cpts;
    impl_->normalize(text, cpts);
    std::vector<std::string> words;
    impl_->split_words(cpts, [&](size_t b, size_t e) {
        std::string w;
        for (size_t i = b; i < e; ++i) unicode::utf8_append(w, cpts[i]);
        words.push_back(std::move(w));
    });
    return words;
}

int32_t wordpiece_tokenizer::n_vocab() const { return int32_t(impl_->vocab.size()); }

const std::string& wordpiece_tokenizer::token(int32_t id) const {
    if (id < 0 || id >= n_vocab()) {
        throw error(status::invalid_arg, fmt("wordpiece: token id %d out of range", id));
    }
    return impl_->vocab[size_t(id)];
}

int32_t wordpiece_tokenizer::find(std::string_view t) const {
    return impl_->lookup(std::string(t));
}

int32_t wordpiece_tokenizer::unk_id() const { return impl_->unk; }
int32_t wordpiece_tokenizer::cls_id() const { return impl_->cls; }
int32_t wordpiece_tokenizer::sep_id() const { return impl_->sep; }
int32_t wordpiece_tokenizer::pad_id() const { return impl_->pad; }
const wordpiece_config& wordpiece_tokenizer::config() const { return impl_->cfg; }

}  // namespace cacheblend
