// Tokenizer byte-exact with llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) for gpt2 byte-level
// BPE and llama SentencePiece vocabularies. Where llama.cpp's behaviour is arbitrary (hash-map
// iteration order when auto-detecting EOT/FIM tokens, std::sort order of equal-length special
// tokens) we use the same containers and algorithms so the result is the same.
//
// One deliberate difference: llama.cpp replaces each invalid UTF-8 byte by U+FFFD before BPE, so
// such bytes do not survive a round trip. We pre-tokenize them exactly as it does (U+FFFD's
// category) but byte-encode the original byte, so decode(encode(s)) == s for any bytes.

#include "core/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "core/util/error.h"
#include "core/model/gguf.h"
#include "core/tokenizer/unicode.h"

namespace cacheblend {

namespace {

// llama.cpp's llama_token_attr bits.
enum : uint32_t {
    attr_undefined = 0,
    attr_unknown = 1u << 0,
    attr_unused = 1u << 1,
    attr_normal = 1u << 2,
    attr_control = 1u << 3,
    attr_user_defined = 1u << 4,
    attr_byte = 1u << 5,
    attr_lstrip = 1u << 7,
    attr_rstrip = 1u << 8,
};

constexpr token_id k_null = -1;
constexpr const char* k_escaped_space = "\xE2\x96\x81";  // U+2581

enum class vocab_type { spm, bpe };

// Open-addressing map (left symbol id, right symbol id) -> (merge rank, merged symbol id); key
// and value share a 16-byte slot so a probe costs one cache miss.
class merge_table {
public:
    struct value {
        int32_t rank;
        int32_t result;
    };

    void init(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        slots_.assign(cap, slot{k_empty, value{0, 0}});
        mask_ = cap - 1;
    }

    // Keeps the first insertion of a pair (llama.cpp's bpe_ranks.emplace).
    void insert(int32_t l, int32_t r, value v) {
        const uint64_t key = make_key(l, r);
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return;
            if (slots_[i].key == k_empty) {
                slots_[i] = slot{key, v};
                return;
            }
        }
    }

    const value* find(int32_t l, int32_t r) const {
        const uint64_t key = make_key(l, r);
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i].val;
            if (slots_[i].key == k_empty) return nullptr;
        }
    }

private:
    static constexpr uint64_t k_empty = ~uint64_t(0);
    struct slot {
        uint64_t key;
        value val;
    };
    static uint64_t make_key(int32_t l, int32_t r) {
        return (uint64_t(uint32_t(l)) << 32) | uint32_t(r);
    }
    size_t index(uint64_t key) const {
        return size_t((key * 0x9E3779B97F4A7C15ull) >> 29) & mask_;
    }

    std::vector<slot> slots_;
    size_t mask_ = 0;
};

// Flat open-addressing index text -> id over the vocabulary arena, for the hot paths
// (std::unordered_map's node walk dominated SentencePiece tokenization).
inline uint64_t hash_bytes(const char* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t(n) * 0xFF51AFD7ED558CCDull);
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

class vocab_index {
public:
    void build(const std::string& arena, const std::vector<uint32_t>& off) {
        arena_ = arena.data();
        off_ = off.data();
        const size_t n = off.size() - 1;
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        slots_.assign(cap, slot{0, -1});
        mask_ = cap - 1;
        for (size_t id = 0; id < n; ++id) {
            const uint64_t h = hash_bytes(arena_ + off_[id], off_[id + 1] - off_[id]);
            size_t i = size_t(h) & mask_;
            while (slots_[i].id >= 0) i = (i + 1) & mask_;
            slots_[i] = slot{uint32_t(h >> 32), int32_t(id)};
        }
    }

    int32_t find(std::string_view s) const {
        const uint64_t h = hash_bytes(s.data(), s.size());
        const uint32_t tag = uint32_t(h >> 32);
        for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
            const slot& e = slots_[i];
            if (e.id < 0) return -1;
            if (e.tag == tag) {
                const uint32_t b = off_[e.id], len = off_[e.id + 1] - b;
                if (len == s.size() && std::memcmp(arena_ + b, s.data(), len) == 0) return e.id;
            }
        }
    }

private:
    struct slot {
        uint32_t tag;
        int32_t id;
    };
    std::vector<slot> slots_;
    const char* arena_ = nullptr;
    const uint32_t* off_ = nullptr;
    size_t mask_ = 0;
};

struct fragment {
    token_id token;  // >= 0: a matched special token; k_null: raw text [off, off + len)
    uint32_t off;
    uint32_t len;
};

inline bool c_isspace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
    if (from.empty()) return;
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from.data(), pos, from.size())) != std::string::npos;) {
        out.append(s, pos, hit - pos);
        out.append(to.data(), to.size());
        pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    s.swap(out);
}

bool contains(std::string_view s, std::string_view sub) {
    return s.find(sub) != std::string_view::npos;
}

}  // namespace

struct tokenizer::impl {
    std::string model;
    std::string pre;
    vocab_type type = vocab_type::spm;
    unicode::pre_kind pre_kind = unicode::pre_kind::default_bpe;

    // Vocabulary texts, owned (the gguf_file may be closed after loading).
    std::string arena;
    std::vector<uint32_t> text_off;  // n + 1 offsets into arena
    std::vector<uint32_t> attrs;
    std::vector<float> scores;
    // Same container as llama.cpp's token_to_id, filled in the same order, so iterating it
    // visits tokens in the same order (that order decides the auto-detected EOT/FIM tokens).
    // Only needed while loading.
    std::unordered_map<std::string_view, token_id> token_to_id;
    vocab_index index;  // lookups after the arena is complete

    // BPE: symbols are ids; strings produced by merges that are not vocabulary tokens get
    // virtual ids >= n_vocab so the merge loop never needs strings.
    merge_table merges;
    token_id byte_symbol[256] = {};        // symbol id of GPT-2's byte-encoded char
    token_id single_byte_token[256] = {};  // token whose text is that single byte, or -1
    // SPM byte fallback: <0xXX>, else the byte as text, else unk, else -1.
    token_id spm_byte_token[256] = {};

    bool ignore_merges = false;
    bool spm_word_split = false;  // see tokenize_spm
    bool clean_spaces = false;
    bool add_space_prefix = false;
    bool escape_whitespaces = false;
    bool add_bos = false;
    bool add_eos = false;
    bool add_sep = false;

    token_id bos = k_null, eos = k_null, eot = k_null, eom = k_null, unk = k_null;
    token_id sep = k_null, pad = k_null, mask = k_null;
    token_id fim_pre = k_null, fim_suf = k_null, fim_mid = k_null, fim_pad = k_null;
    token_id fim_rep = k_null, fim_sep = k_null;

    std::vector<token_id> eog_ids;  // sorted
    std::vector<uint8_t> is_eog;
    std::vector<token_id> special_tokens;  // CONTROL | USER_DEFINED | UNKNOWN, longest first

    std::string piece_arena;  // token_to_piece(id, special = true) for every id
    std::vector<uint32_t> piece_off;

    int32_t n_vocab() const { return int32_t(attrs.size()); }
    std::string_view text(token_id id) const {
        return std::string_view(arena.data() + text_off[id], text_off[id + 1] - text_off[id]);
    }
    std::string_view piece(token_id id) const {
        return std::string_view(piece_arena.data() + piece_off[id],
                                piece_off[id + 1] - piece_off[id]);
    }
    token_id lookup(std::string_view s) const { return index.find(s); }

    void load(const gguf_file& f);
    void load_special_ids(const gguf_file& f);
    void detect_special_tokens();
    void build_caches(const gguf_file& f);
    std::string make_piece(token_id id) const;

    void partition(std::string_view text, bool parse_special, std::vector<fragment>& out) const;
    void tokenize_bpe(std::string_view text, std::vector<token_id>& out) const;
    void tokenize_spm(const std::string& text, std::vector<token_id>& out) const;
    void check_id(token_id id) const {
        if (id < 0 || id >= n_vocab()) {
            throw error(status::invalid_arg,
                        fmt("tokenizer: token id %d out of range [0, %d)", id, n_vocab()));
        }
    }
};

// ---------------------------------------------------------------------------------------------
// loading

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
            throw error(status::format,
                        "tokenizer: tokenizer.ggml.token_type shorter than tokens");
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
            throw error(status::format,
                        fmt("tokenizer: duplicate token '%.*s' (ids %d and %zu)",
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
                       "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
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
                       "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                       "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"})) {
            fim_pre = id;
            make_control(id);
        }
        if (fim_suf == k_null &&
            any_of(s, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                       "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
                       "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"})) {
            fim_suf = id;
            make_control(id);
        }
        if (fim_mid == k_null &&
            any_of(s, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                       "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                       "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"})) {
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
        if (any_of(t.first, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                             "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                             "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                             "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
                             "<|tool_response>",
                             "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81"
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

void tokenizer::impl::build_caches(const gguf_file& f) {
    const int32_t n = n_vocab();
    for (token_id id = 0; id < n; ++id) {
        if (attrs[id] & (attr_control | attr_user_defined | attr_unknown)) {
            special_tokens.push_back(id);
        }
    }
    // std::sort (not stable) with llama.cpp's comparator and input order: the same order for
    // tokens of equal length.
    std::sort(special_tokens.begin(), special_tokens.end(), [&](token_id a, token_id b) {
        return text(a).size() > text(b).size();
    });

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

// ---------------------------------------------------------------------------------------------
// encoding

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

void tokenizer::impl::tokenize_bpe(std::string_view text, std::vector<token_id>& out) const {
    struct symbol {
        token_id id;
        int32_t prev, next;
        uint32_t begin, len;  // bytes of the word
    };
    struct bigram {
        int32_t rank;
        int32_t left, right;
        token_id left_id, right_id, result;
    };
    // llama.cpp's llm_bigram_bpe::comparator: lowest rank, then leftmost, on top.
    auto cmp = [](const bigram& a, const bigram& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };

    unicode::pretok_scratch scratch;
    std::vector<std::pair<uint32_t, uint32_t>> words;
    unicode::pretokenize(text, pre_kind, scratch, words);

    std::vector<symbol> syms;
    std::vector<bigram> heap;
    std::string encoded;
    const token_id nv = n_vocab();

    auto emit_symbol = [&](std::string_view word, const symbol& s) {
        if (s.id < nv) {
            out.push_back(s.id);
            return;
        }
        // Not a vocabulary token: llama.cpp looks up each byte of the byte-encoded text.
        for (uint32_t i = s.begin; i < s.begin + s.len; ++i) {
            for (char c : unicode::byte_to_utf8(uint8_t(word[i]))) {
                const token_id t = single_byte_token[uint8_t(c)];
                if (t != k_null) out.push_back(t);
            }
        }
    };
    auto add_bigram = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        const merge_table::value* v = merges.find(syms[l].id, syms[r].id);
        if (!v) return;
        heap.push_back({v->rank, l, r, syms[l].id, syms[r].id, v->result});
        std::push_heap(heap.begin(), heap.end(), cmp);
    };

    for (const auto& w : words) {
        const std::string_view word = text.substr(w.first, w.second);
        if (ignore_merges) {
            encoded.clear();
            for (char c : word) {
                const std::string_view e = unicode::byte_to_utf8(uint8_t(c));
                encoded.append(e.data(), e.size());
            }
            const token_id id = lookup(encoded);
            if (id != k_null) {
                out.push_back(id);
                continue;
            }
        }
        const int32_t n = int32_t(word.size());
        syms.resize(size_t(n));
        for (int32_t i = 0; i < n; ++i) {
            syms[i] = {byte_symbol[uint8_t(word[i])], i - 1, i + 1 < n ? i + 1 : -1,
                       uint32_t(i), 1};
        }
        heap.clear();
        for (int32_t i = 1; i < n; ++i) add_bigram(i - 1, i);
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), cmp);
            const bigram b = heap.back();
            heap.pop_back();
            symbol& l = syms[b.left];
            symbol& r = syms[b.right];
            // Stale when either side has been merged since (ids change whenever text does).
            if (l.len == 0 || r.len == 0 || l.id != b.left_id || r.id != b.right_id) continue;
            l.id = b.result;
            l.len += r.len;
            r.len = 0;
            l.next = r.next;
            if (r.next >= 0) syms[r.next].prev = b.left;
            add_bigram(l.prev, b.left);
            add_bigram(b.left, l.next);
        }
        for (int32_t i = n > 0 ? 0 : -1; i != -1; i = syms[i].next) {
            if (syms[i].len > 0) emit_symbol(word, syms[i]);
        }
    }
}

// Port of llm_tokenizer_spm_session: score-driven bigram merging over UTF-8 characters, then
// resegmentation with byte fallback. `text` is already space-escaped.
// llama.cpp also records every queued bigram in a rev_merge map to split final symbols that are
// not tokens. That lookup can never succeed: a merge only ever creates a vocabulary token, so
// the only non-token symbols are unmerged single characters, and no bigram (two symbols, the
// first at least one whole character long) has the same text as a single character. We skip the
// map, which is most of the cost on long texts.
void tokenizer::impl::tokenize_spm(const std::string& text, std::vector<token_id>& out) const {
    struct symbol {
        int32_t prev, next;
        uint32_t off, n;
    };
    struct bigram {
        int32_t left, right;
        float score;
        uint32_t size;
    };
    auto cmp = [](const bigram& l, const bigram& r) {
        return l.score < r.score || (l.score == r.score && l.left > r.left);
    };

    std::vector<symbol> syms;
    syms.reserve(text.size());
    for (size_t off = 0; off < text.size();) {
        const size_t len = std::min(unicode::utf8_seq_len(uint8_t(text[off])), text.size() - off);
        const int32_t idx = int32_t(syms.size());
        syms.push_back({idx - 1, idx + 1, uint32_t(off), uint32_t(len)});
        off += len;
    }
    if (syms.empty()) return;
    const int32_t n_syms = int32_t(syms.size());

    std::vector<bigram> heap;
    const std::string_view tv(text);
    auto try_add = [&](int32_t l, int32_t r) {
        if (l == -1 || r == -1) return;
        const std::string_view s = tv.substr(syms[l].off, syms[l].n + syms[r].n);
        const token_id id = lookup(s);
        if (id == k_null) return;
        heap.push_back({l, r, scores[id], uint32_t(s.size())});
        std::push_heap(heap.begin(), heap.end(), cmp);
    };
    // Merges one run of symbols [a, b) to completion, then emits its tokens.
    auto run = [&](int32_t a, int32_t b) {
        syms[a].prev = -1;
        syms[b - 1].next = -1;
        heap.clear();
        for (int32_t i = a + 1; i < b; ++i) try_add(i - 1, i);
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), cmp);
            const bigram bg = heap.back();
            heap.pop_back();
            symbol& l = syms[bg.left];
            symbol& r = syms[bg.right];
            if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) syms[r.next].prev = bg.left;
            try_add(l.prev, bg.left);
            try_add(bg.left, l.next);
        }
        for (int32_t i = a; i != -1; i = syms[i].next) {
            const std::string_view str = tv.substr(syms[i].off, syms[i].n);
            const token_id id = lookup(str);
            if (id != k_null) {
                out.push_back(id);
                continue;
            }
            for (char c : str) {  // byte fallback: <0xXX> tokens
                const token_id t = spm_byte_token[uint8_t(c)];
                if (t != k_null) out.push_back(t);
            }
        }
    };

    // llama.cpp merges the whole fragment with one priority queue. When no token has U+2581 after
    // anything but U+2581 (spm_word_split, checked at load), no bigram can ever span a "▁" symbol
    // that does not follow "▁": the runs between such symbols merge independently, so we merge
    // them one by one with a small, cache-resident queue and get the same tokens.
    int32_t seg = 0;
    if (spm_word_split) {
        const std::string_view esc(k_escaped_space);
        for (int32_t i = 1; i < n_syms; ++i) {
            const uint32_t off = syms[i].off;
            if (syms[i].n == 3 && tv.compare(off, 3, esc) == 0 &&
                !(off >= 3 && tv.compare(off - 3, 3, esc) == 0)) {
                run(seg, i);
                seg = i;
            }
        }
    }
    run(seg, n_syms);
}

// ---------------------------------------------------------------------------------------------
// public interface

tokenizer::tokenizer() : impl_(new impl) {}
tokenizer::~tokenizer() = default;

std::unique_ptr<tokenizer> tokenizer::from_gguf(const gguf_file& f) {
    std::unique_ptr<tokenizer> t(new tokenizer());
    t->impl_->load(f);
    return t;
}

std::vector<token_id> tokenizer::encode(std::string_view text, bool add_special,
                                        bool parse_special) const {
    const impl& m = *impl_;
    std::vector<token_id> out;
    out.reserve(text.size() / 3 + 4);
    std::vector<fragment> frags;
    m.partition(text, parse_special, frags);

    if (m.type == vocab_type::bpe) {
        if (add_special && m.add_bos) out.push_back(m.bos);
        std::string escaped;
        for (const fragment& fr : frags) {
            if (fr.token != k_null) {
                out.push_back(fr.token);
                continue;
            }
            std::string_view s = text.substr(fr.off, fr.len);
            if (m.escape_whitespaces) {
                escaped.assign(s.data(), s.size());
                replace_all(escaped, " ", k_escaped_space);
                s = escaped;
            }
            m.tokenize_bpe(s, out);
        }
        if (add_special && m.add_eos) out.push_back(m.eos);
    } else {
        bool is_prev_special = true;  // the first fragment gets the space prefix
        if (add_special && m.add_bos) out.push_back(m.bos);
        std::string s;
        for (const fragment& fr : frags) {
            if (fr.token != k_null) {
                out.push_back(fr.token);
                is_prev_special = true;
                continue;
            }
            s.clear();
            if (m.add_space_prefix && is_prev_special) s = ' ';
            s.append(text.data() + fr.off, fr.len);
            replace_all(s, " ", k_escaped_space);
            m.tokenize_spm(s, out);
            is_prev_special = false;
        }
        if (add_special && m.add_eos) out.push_back(m.eos);
    }
    return out;
}

std::string tokenizer::token_to_piece(token_id id, bool special) const {
    impl_->check_id(id);
    if (!special && (impl_->attrs[id] & (attr_unknown | attr_control))) return std::string();
    return std::string(impl_->piece(id));
}

// llama.cpp's llama_detokenize(remove_special = false, unparse_special = special): one leading
// space is dropped when the vocabulary adds a space prefix, and clean_up_tokenization_spaces is
// applied for the vocabularies that ask for it (not smollm, qwen2, deepseek-coder or SPM).
std::string tokenizer::decode(const std::vector<token_id>& ids, bool special) const {
    const impl& m = *impl_;
    std::string text;
    bool remove_space = m.add_space_prefix;
    for (token_id id : ids) {
        m.check_id(id);
        if (!special && (m.attrs[id] & (attr_unknown | attr_control))) {
            remove_space = false;
            continue;
        }
        std::string_view p = m.piece(id);
        if (remove_space && !p.empty() && p[0] == ' ') p.remove_prefix(1);
        remove_space = false;
        text.append(p.data(), p.size());
    }
    if (!m.clean_spaces || text.empty()) return text;

    // The three passes of llama.cpp, in place.
    size_t total = text.size();
    const size_t total1 = total;
    total = 1;
    for (size_t i = 1; i < total1; ++i) {  // " ?", " !", " .", " ,"
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
        text[total++] = x;
    }
    const size_t total2 = total;
    total = 1;
    for (size_t i = 1; i < total2; ++i) {  // " ' " -> "'"
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            --total;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    const size_t total3 = total;
    total = 1;
    for (size_t i = 1; i < total3; ++i) {  // " 's", " 'm", " 're", " 've"
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                --total;
            } else if (i + 2 < total3) {
                const char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
            }
        }
        text[total++] = x;
    }
    text.resize(total);
    return text;
}

int32_t tokenizer::n_vocab() const { return impl_->n_vocab(); }

std::string_view tokenizer::token_text(token_id id) const {
    impl_->check_id(id);
    return impl_->text(id);
}

token_attr tokenizer::attr(token_id id) const {
    impl_->check_id(id);
    const uint32_t a = impl_->attrs[id];
    if (a & attr_user_defined) return token_attr::user_defined;
    if (a & attr_control) return token_attr::control;
    if (a & attr_unknown) return token_attr::unknown;
    if (a & attr_byte) return token_attr::byte;
    if (a & attr_unused) return token_attr::unused;
    return token_attr::normal;
}

token_id tokenizer::bos() const { return impl_->bos; }
token_id tokenizer::eos() const { return impl_->eos; }
token_id tokenizer::eot() const { return impl_->eot; }
bool tokenizer::add_bos() const { return impl_->add_bos; }
bool tokenizer::add_eos() const { return impl_->add_eos; }

bool tokenizer::is_eog(token_id id) const {
    return id >= 0 && id < impl_->n_vocab() && impl_->is_eog[id];
}

const std::string& tokenizer::model() const { return impl_->model; }
const std::string& tokenizer::pre() const { return impl_->pre; }

}  // namespace cacheblend
