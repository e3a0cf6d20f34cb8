// The tokenizer's private state (tokenizer::impl) and the helpers its parts share: the merge
// table and vocabulary index of the hot paths, llama.cpp's token attribute bits. One header so
// that loading, special tokens and the two encoders, each in its own file, see one definition:
//   tokenizer.cpp          the public interface (encode, decode, accessors)
//   tokenizer-vocab.cpp    loading the vocabulary, merges and caches from GGUF
//   tokenizer-special.cpp  special token ids, EOG/FIM detection, special-token partition
//   tokenizer-bpe.cpp      byte-level BPE (gpt2 vocabularies)
//   tokenizer-spm.cpp      SentencePiece (llama vocabularies)
// Internal to core/tokenizer/tokenizer*.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"

namespace cacheblend {

class gguf_file;

namespace tokenizer_detail {

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
    size_t index(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> 29) & mask_; }

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

inline void replace_all(std::string& s, std::string_view from, std::string_view to) {
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

inline bool contains(std::string_view s, std::string_view sub) {
    return s.find(sub) != std::string_view::npos;
}

}  // namespace tokenizer_detail

struct tokenizer::impl {
    using vocab_type = tokenizer_detail::vocab_type;
    using merge_table = tokenizer_detail::merge_table;
    using vocab_index = tokenizer_detail::vocab_index;
    using fragment = tokenizer_detail::fragment;
    static constexpr token_id k_null = tokenizer_detail::k_null;

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

}  // namespace cacheblend
