#include "core/tokenizer/unicode.h"

#include <array>
#include <cstring>
#include <unordered_map>

#include "core/tokenizer/unicode-data.h"

namespace cacheblend {
namespace unicode {

namespace {

constexpr uint32_t k_max_cpt = 0x110000;
constexpr uint32_t k_block_bits = 8;
constexpr uint32_t k_block_size = 1u << k_block_bits;
constexpr uint32_t k_out_of_range = 0xFFFFFFFFu;

const uint16_t k_category_flag[8] = {
    flag_undefined, flag_number, flag_letter, flag_separator,
    flag_mark, flag_punctuation, flag_symbol, flag_control,
};

// Two-stage lookup (block index per 256 codepoints, deduplicated blocks), expanded once from
// the compact range table: O(1) per codepoint and ~100 KiB instead of llama.cpp's 2.2 MiB array.
struct flag_table {
    std::vector<uint16_t> stage1;
    std::vector<uint16_t> blocks;

    flag_table() {
        std::vector<uint16_t> flat(k_max_cpt);
        const uint32_t* r = unicode_data::k_category_ranges;
        const size_t n = unicode_data::k_n_category_ranges;
        for (size_t i = 0; i < n; ++i) {
            const uint32_t start = r[i] >> 8;
            const uint32_t end = i + 1 < n ? r[i + 1] >> 8 : k_max_cpt;
            const uint16_t f = k_category_flag[r[i] & 7];
            for (uint32_t c = start; c < end && c < k_max_cpt; ++c) flat[c] = f;
        }
        for (size_t i = 0; i < unicode_data::k_n_whitespace; ++i) {
            flat[unicode_data::k_whitespace[i]] |= flag_whitespace;
        }
        stage1.resize(k_max_cpt >> k_block_bits);
        std::unordered_map<std::string, uint16_t> seen;
        for (uint32_t b = 0; b < stage1.size(); ++b) {
            const uint16_t* src = flat.data() + (size_t(b) << k_block_bits);
            std::string key(reinterpret_cast<const char*>(src), k_block_size * sizeof(uint16_t));
            auto it = seen.find(key);
            if (it == seen.end()) {
                const uint16_t idx = uint16_t(blocks.size() / k_block_size);
                blocks.insert(blocks.end(), src, src + k_block_size);
                it = seen.emplace(std::move(key), idx).first;
            }
            stage1[b] = it->second;
        }
    }

    uint16_t get(uint32_t cpt) const {
        if (cpt >= k_max_cpt) return flag_undefined;
        return blocks[(size_t(stage1[cpt >> k_block_bits]) << k_block_bits) |
                      (cpt & (k_block_size - 1))];
    }
};

const flag_table& flags_table() {
    static const flag_table t;
    return t;
}

struct byte_tables {
    uint32_t to_cpt[256];
    char utf8[256][2];
    uint8_t utf8_len[256];

    byte_tables() {
        bool direct[256] = {};
        for (int b = 0x21; b <= 0x7E; ++b) direct[b] = true;
        for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
        for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            to_cpt[b] = direct[b] ? uint32_t(b) : next++;
            std::string s;
            utf8_append(s, to_cpt[b]);
            utf8_len[b] = uint8_t(s.size());
            std::memcpy(utf8[b], s.data(), s.size());
        }
    }
};

const byte_tables& bytes_table() {
    static const byte_tables t;
    return t;
}

// ---- splitting helpers ----
// A split pass maps a list of piece lengths (in codepoints) to a finer one, like llama.cpp's
// offsets vectors: every pass sees the pieces of the previous one and never crosses them.

using lens_t = std::vector<uint32_t>;

struct cpt_text {
    const uint32_t* cpt;
    const uint16_t* fl;
};

// std::regex_iterator semantics for a pattern with no empty matches: scan each piece for the
// leftmost match, emit the unmatched gap before it and the match itself as separate pieces.
// `match(pos, end)` returns the length of the match starting at pos (0: none).
template <typename Match>
void regex_split(const lens_t& in, lens_t& out, Match match) {
    size_t start = 0;
    for (uint32_t len : in) {
        const size_t end = start + len;
        size_t gap = start;
        size_t pos = start;
        while (pos < end) {
            const size_t m = match(pos, end);
            if (m == 0) {
                ++pos;
                continue;
            }
            if (pos > gap) out.push_back(uint32_t(pos - gap));
            out.push_back(uint32_t(m));
            pos += m;
            gap = pos;
        }
        if (gap < end) out.push_back(uint32_t(end - gap));
        start = end;
    }
}

// Port of llama.cpp's unicode_regex_split_custom_gpt2:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const cpt_text& t, const lens_t& in, lens_t& out) {
    size_t start = 0;
    for (uint32_t len : in) {
        const size_t end = start + len;
        auto cpt_at = [&](size_t p) { return p < end ? t.cpt[p] : k_out_of_range; };
        auto fl_at = [&](size_t p) -> uint16_t { return p < end ? t.fl[p] : 0; };
        size_t prev_end = start;
        auto add = [&](size_t e) -> size_t {
            const size_t n = e - prev_end;
            if (n > 0) out.push_back(uint32_t(n));
            prev_end = e;
            return n;
        };
        constexpr uint16_t k_wln = flag_whitespace | flag_letter | flag_number;
        for (size_t pos = start; pos < end;) {
            const uint32_t cpt = cpt_at(pos);
            const uint16_t f = fl_at(pos);
            if (cpt == '\'' && pos + 1 < end) {
                const uint32_t nx = cpt_at(pos + 1);
                if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                    pos += add(pos + 2);
                    continue;
                }
                if (pos + 2 < end) {
                    const uint32_t nn = cpt_at(pos + 2);
                    if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') ||
                        (nx == 'l' && nn == 'l')) {
                        pos += add(pos + 3);
                        continue;
                    }
                }
            }
            uint16_t f2 = cpt == ' ' ? fl_at(pos + 1) : f;
            if (f2 & flag_letter) {
                pos += (cpt == ' ');
                while (f2 & flag_letter) f2 = fl_at(++pos);
                add(pos);
                continue;
            }
            if (f2 & flag_number) {
                pos += (cpt == ' ');
                while (f2 & flag_number) f2 = fl_at(++pos);
                add(pos);
                continue;
            }
            if (!(f2 & k_wln) && f2) {
                pos += (cpt == ' ');
                while (!(f2 & k_wln) && f2) f2 = fl_at(++pos);
                add(pos);
                continue;
            }
            size_t n_ws = 0;
            while (fl_at(pos + n_ws) & flag_whitespace) ++n_ws;
            if (n_ws > 1 && cpt_at(pos + n_ws) != k_out_of_range) {  // \s+(?!\S)
                pos += n_ws - 1;
                add(pos);
                continue;
            }
            if (n_ws > 0) {  // \s+
                pos += n_ws;
                add(pos);
                continue;
            }
            add(++pos);
        }
        start = end;
    }
}

inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Port of llama.cpp's unicode_regex_split_custom_llama3:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
// (its case folding is unicode_tolower; only ASCII folds onto the letters compared, which
// scripts/gen-unicode-data.py checks.)
void split_llama3(const cpt_text& t, const lens_t& in, lens_t& out) {
    size_t start = 0;
    for (uint32_t len : in) {
        const size_t end = start + len;
        auto cpt_at = [&](size_t p) { return p < end ? t.cpt[p] : k_out_of_range; };
        auto fl_at = [&](size_t p) -> uint16_t { return p < end ? t.fl[p] : 0; };
        size_t prev_end = start;
        auto add = [&](size_t e) -> size_t {
            const size_t n = e - prev_end;
            if (n > 0) out.push_back(uint32_t(n));
            prev_end = e;
            return n;
        };
        constexpr uint16_t k_wln = flag_whitespace | flag_letter | flag_number;
        for (size_t pos = start; pos < end;) {
            const uint32_t cpt = cpt_at(pos);
            const uint16_t f = fl_at(pos);
            if (cpt == '\'' && pos + 1 < end) {
                const uint32_t nx = ascii_lower(cpt_at(pos + 1));
                if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                    pos += add(pos + 2);
                    continue;
                }
                if (pos + 2 < end) {
                    const uint32_t nn = ascii_lower(cpt_at(pos + 2));
                    if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') ||
                        (nx == 'l' && nn == 'l')) {
                        pos += add(pos + 3);
                        continue;
                    }
                }
            }
            if (!(cpt == '\r' || cpt == '\n' || (f & flag_number))) {
                if ((f & flag_letter) || (fl_at(pos + 1) & flag_letter)) {
                    ++pos;
                    while (fl_at(pos) & flag_letter) ++pos;
                    add(pos);
                    continue;
                }
            }
            if (f & flag_number) {
                size_t ini = pos;
                while (fl_at(pos) & flag_number) {
                    if (++pos - ini >= 3) {
                        add(pos);
                        ini = pos;
                    }
                }
                add(pos);
                continue;
            }
            uint16_t f2 = cpt == ' ' ? fl_at(pos + 1) : f;
            if (!(f2 & k_wln) && f) {
                pos += (cpt == ' ');
                while (!(f2 & k_wln) && f2) f2 = fl_at(++pos);
                uint32_t c2 = cpt_at(pos);
                while (c2 == '\r' || c2 == '\n') c2 = cpt_at(++pos);
                add(pos);
                continue;
            }
            size_t n_ws = 0;
            size_t last_rn = 0;
            while (fl_at(pos + n_ws) & flag_whitespace) {
                const uint32_t c2 = cpt_at(pos + n_ws);
                if (c2 == '\r' || c2 == '\n') last_rn = pos + n_ws + 1;
                ++n_ws;
            }
            if (last_rn > 0) {  // \s*[\r\n]+
                pos = last_rn;
                add(pos);
                continue;
            }
            if (n_ws > 1 && cpt_at(pos + n_ws) != k_out_of_range) {  // \s+(?!\S)
                pos += n_ws - 1;
                add(pos);
                continue;
            }
            if (n_ws > 0) {
                pos += n_ws;
                add(pos);
                continue;
            }
            add(++pos);
        }
        start = end;
    }
}

// llama.cpp runs the qwen2 regex through std::regex over its "collapsed" text (one byte per
// codepoint, categories as marker bytes); this matcher gives the same ECMAScript leftmost-
// alternative result at each position:
// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_qwen2(const cpt_text& t, size_t p, size_t e) {
    const uint32_t c = t.cpt[p];
    const uint16_t f = t.fl[p];
    auto is_l = [&](size_t q) { return q < e && (t.fl[q] & flag_letter); };
    auto is_x = [&](size_t q) {  // [^\s\p{L}\p{N}]
        return q < e && !(t.fl[q] & (flag_whitespace | flag_letter | flag_number));
    };
    auto is_rn = [&](size_t q) { return q < e && (t.cpt[q] == '\r' || t.cpt[q] == '\n'); };
    if (c == '\'' && p + 1 < e) {
        const uint32_t a = ascii_lower(t.cpt[p + 1]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (p + 2 < e) {
            const uint32_t b = ascii_lower(t.cpt[p + 2]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
                return 3;
            }
        }
    }
    const bool c_opt = !(c == '\r' || c == '\n' || (f & (flag_letter | flag_number)));
    if ((c_opt && is_l(p + 1)) || (f & flag_letter)) {
        size_t q = p + 1;
        while (is_l(q)) ++q;
        return q - p;
    }
    if (f & flag_number) return 1;
    if ((c == ' ' && is_x(p + 1)) || is_x(p)) {
        size_t q = p + 1;
        while (is_x(q)) ++q;
        while (is_rn(q)) ++q;
        return q - p;
    }
    if (f & flag_whitespace) {
        size_t q = p;
        size_t last_rn = 0;
        while (q < e && (t.fl[q] & flag_whitespace)) {
            if (t.cpt[q] == '\r' || t.cpt[q] == '\n') last_rn = q + 1;
            ++q;
        }
        if (last_rn) return last_rn - p;
        if (q == e || q - p == 1) return q - p;
        return q - p - 1;
    }
    return 0;
}

// [\p{P}\$\+<=>\^~\|]+ (falcon adds the backtick).
size_t match_punct_run(const cpt_text& t, size_t p, size_t e, bool backtick) {
    auto in_class = [&](size_t q) {
        if (t.fl[q] & flag_punctuation) return true;
        switch (t.cpt[q]) {
            case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|':
                return true;
            case '`':
                return backtick;
            default:
                return false;
        }
    };
    size_t q = p;
    while (q < e && in_class(q)) ++q;
    return q - p;
}

size_t match_flag_run(const cpt_text& t, size_t p, size_t e, uint16_t flag) {
    size_t q = p;
    while (q < e && (t.fl[q] & flag)) ++q;
    return q - p;
}

inline bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

size_t match_digit3(const cpt_text& t, size_t p, size_t e) {
    return (p + 2 < e && is_ascii_digit(t.cpt[p]) && is_ascii_digit(t.cpt[p + 1]) &&
            is_ascii_digit(t.cpt[p + 2]))
               ? 3
               : 0;
}

// \s?\p{X}+
size_t match_ws_opt_run(const cpt_text& t, size_t p, size_t e, uint16_t flag) {
    size_t q = p;
    if ((t.fl[p] & flag_whitespace) && p + 1 < e && (t.fl[p + 1] & flag)) q = p + 1;
    const size_t n = match_flag_run(t, q, e, flag);
    return n ? q - p + n : 0;
}

// [\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+ runs through std::wregex, where llama.cpp first
// replaces non-ASCII whitespace by U+000B: those codepoints (U+1680, U+2000.., U+3000) fall in the ranges but never match.
size_t match_cjk_run(const cpt_text& t, size_t p, size_t e) {
    size_t q = p;
    while (q < e) {
        const uint32_t c = t.cpt[q];
        const bool in = ((c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) ||
                         (c >= 0xAC00 && c <= 0xD7FF)) &&
                        !(t.fl[q] & flag_whitespace);
        if (!in) break;
        ++q;
    }
    return q - p;
}

}  // namespace

const char* version() { return unicode_data::k_unicode_version; }

uint16_t cpt_flags(uint32_t cpt) { return flags_table().get(cpt); }

size_t utf8_decode(const char* s, size_t n, uint32_t* cpt) {
    const uint8_t b0 = uint8_t(s[0]);
    auto cont = [&](size_t i) { return i < n && (uint8_t(s[i]) & 0xC0) == 0x80; };
    if (!(b0 & 0x80)) {
        *cpt = b0;
        return 1;
    }
    if (!(b0 & 0x40)) return 0;
    if (!(b0 & 0x20)) {
        if (!cont(1)) return 0;
        *cpt = (uint32_t(b0 & 0x1F) << 6) | (uint8_t(s[1]) & 0x3F);
        return 2;
    }
    if (!(b0 & 0x10)) {
        if (!cont(1) || !cont(2)) return 0;
        *cpt = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(uint8_t(s[1]) & 0x3F) << 6) |
               (uint8_t(s[2]) & 0x3F);
        return 3;
    }
    if (!(b0 & 0x08)) {
        if (!cont(1) || !cont(2) || !cont(3)) return 0;
        *cpt = (uint32_t(b0 & 0x07) << 18) | (uint32_t(uint8_t(s[1]) & 0x3F) << 12) |
               (uint32_t(uint8_t(s[2]) & 0x3F) << 6) | (uint8_t(s[3]) & 0x3F);
        return 4;
    }
    return 0;
}

void utf8_append(std::string& out, uint32_t cpt) {
    if (cpt <= 0x7F) {
        out.push_back(char(cpt));
    } else if (cpt <= 0x7FF) {
        out.push_back(char(0xC0 | ((cpt >> 6) & 0x1F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    } else if (cpt <= 0xFFFF) {
        out.push_back(char(0xE0 | ((cpt >> 12) & 0x0F)));
        out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    } else {
        out.push_back(char(0xF0 | ((cpt >> 18) & 0x07)));
        out.push_back(char(0x80 | ((cpt >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    }
}

uint32_t byte_to_cpt(uint8_t b) { return bytes_table().to_cpt[b]; }

std::string_view byte_to_utf8(uint8_t b) {
    const byte_tables& t = bytes_table();
    return std::string_view(t.utf8[b], t.utf8_len[b]);
}

int cpt_to_byte(uint32_t cpt) {
    if (cpt < 0x21) return -1;
    if (cpt <= 0x7E || (cpt >= 0xA1 && cpt <= 0xAC) || (cpt >= 0xAE && cpt <= 0xFF)) {
        return int(cpt);
    }
    if (cpt >= 0x100 && cpt < 0x100 + 68) {
        // The n-th remapped byte in increasing byte order.
        static const std::array<uint8_t, 68> k_remapped = [] {
            std::array<uint8_t, 68> a{};
            size_t n = 0;
            for (int b = 0; b < 256; ++b) {
                const bool direct = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                                    (b >= 0xAE && b <= 0xFF);
                if (!direct) a[n++] = uint8_t(b);
            }
            return a;
        }();
        return k_remapped[cpt - 0x100];
    }
    return -1;
}

void pretokenize(std::string_view text, pre_kind kind, pretok_scratch& s,
                 std::vector<std::pair<uint32_t, uint32_t>>& out) {
    if (text.empty()) return;
    const flag_table& ft = flags_table();
    s.cpt.clear();
    s.flags.clear();
    s.offset.clear();
    s.cpt.reserve(text.size());
    s.flags.reserve(text.size());
    s.offset.reserve(text.size() + 1);
    for (size_t i = 0; i < text.size();) {
        uint32_t c;
        size_t n = utf8_decode(text.data() + i, text.size() - i, &c);
        if (n == 0) {  // llama.cpp: one invalid byte becomes U+FFFD
            c = 0xFFFD;
            n = 1;
        }
        s.cpt.push_back(c);
        s.flags.push_back(ft.get(c));
        s.offset.push_back(uint32_t(i));
        i += n;
    }
    s.offset.push_back(uint32_t(text.size()));

    const cpt_text t{s.cpt.data(), s.flags.data()};
    lens_t* cur = &s.lens_a;
    lens_t* nxt = &s.lens_b;
    cur->assign(1, uint32_t(s.cpt.size()));
    auto pass = [&](auto&& fn) {
        nxt->clear();
        fn(*cur, *nxt);
        std::swap(cur, nxt);
    };
    auto gpt2 = [&](const lens_t& in, lens_t& o) { split_gpt2(t, in, o); };
    auto each_number = [&](const lens_t& in, lens_t& o) {
        regex_split(in, o, [&](size_t p, size_t) -> size_t {
            return (t.fl[p] & flag_number) ? 1 : 0;
        });
    };
    auto digit3 = [&](const lens_t& in, lens_t& o) {
        regex_split(in, o, [&](size_t p, size_t e) { return match_digit3(t, p, e); });
    };
    auto punct = [&](bool backtick) {
        return [&, backtick](const lens_t& in, lens_t& o) {
            regex_split(in, o, [&](size_t p, size_t e) {
                return match_punct_run(t, p, e, backtick);
            });
        };
    };

    switch (kind) {
        case pre_kind::gpt2:
            pass(gpt2);
            break;
        case pre_kind::digits_gpt2:
            pass(each_number);
            pass(gpt2);
            break;
        case pre_kind::default_bpe:
            pass(punct(false));
            pass(gpt2);
            pass([&](const lens_t& in, lens_t& o) {
                regex_split(in, o, [&](size_t p, size_t e) {
                    return match_flag_run(t, p, e, flag_number);
                });
            });
            pass(digit3);
            break;
        case pre_kind::falcon:
            pass(punct(true));
            pass(gpt2);
            pass(digit3);
            break;
        case pre_kind::llama3:
            pass([&](const lens_t& in, lens_t& o) { split_llama3(t, in, o); });
            break;
        case pre_kind::qwen2:
            pass([&](const lens_t& in, lens_t& o) {
                regex_split(in, o, [&](size_t p, size_t e) { return match_qwen2(t, p, e); });
            });
            break;
        case pre_kind::deepseek_coder:
            pass([&](const lens_t& in, lens_t& o) {
                regex_split(in, o, [&](size_t p, size_t) -> size_t {
                    return (t.cpt[p] == '\r' || t.cpt[p] == '\n') ? 1 : 0;
                });
            });
            pass([&](const lens_t& in, lens_t& o) {
                regex_split(in, o, [&](size_t p, size_t e) {
                    return match_ws_opt_run(t, p, e, flag_letter);
                });
            });
            pass([&](const lens_t& in, lens_t& o) {
                regex_split(in, o, [&](size_t p, size_t e) {
                    return match_ws_opt_run(t, p, e, flag_punctuation);
                });
            });
            pass([&](const lens_t& in, lens_t& o) {
                regex_split(in, o, [&](size_t p, size_t e) { return match_cjk_run(t, p, e); });
            });
            pass(each_number);
            break;
    }

    size_t c = 0;
    for (uint32_t len : *cur) {
        const uint32_t b0 = s.offset[c];
        c += len;
        out.emplace_back(b0, s.offset[c] - b0);
    }
}

}  // namespace unicode
}  // namespace cacheblend
