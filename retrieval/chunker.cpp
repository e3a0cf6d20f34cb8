#include "retrieval/chunker.h"

#include <algorithm>
#include <functional>

#include "core/util/error.h"

namespace cacheblend {

namespace {

// A token spans at most this many bytes (the window searched for a piece's end).
constexpr size_t k_max_token_bytes = 64;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
                               c == '\v'; }

bool utf8_start(std::string_view t, size_t i) {
    return i >= t.size() || (static_cast<unsigned char>(t[i]) & 0xC0) != 0x80;
}

struct unit {
    size_t begin, end;  // content range incl. trailing whitespace up to the next unit
    int32_t n_tokens;
    bool para_end;      // a paragraph break follows
};

// Sentence and line boundaries: [begin, end) ranges covering the text.
std::vector<unit> split_units(std::string_view t) {
    std::vector<unit> out;
    size_t begin = 0;
    size_t i = 0;
    const size_t n = t.size();
    while (i < n) {
        const char c = t[i];
        bool cut = false;
        if (c == '\n') {
            cut = true;
        } else if (c == '.' || c == '!' || c == '?') {
            size_t k = i + 1;
            while (k < n && (t[k] == '"' || t[k] == '\'' || t[k] == ')' || t[k] == ']')) ++k;
            if (k >= n || is_space(t[k])) {
                cut = true;
                i = k - 1;
            }
        }
        ++i;
        if (!cut) continue;
        // Trailing whitespace joins this unit; two newlines in it make a paragraph break.
        int newlines = c == '\n' ? 1 : 0;
        while (i < n && is_space(t[i])) {
            if (t[i] == '\n') ++newlines;
            ++i;
        }
        out.push_back({begin, i, 0, newlines >= 2});
        begin = i;
    }
    if (begin < n) out.push_back({begin, n, 0, true});
    if (!out.empty()) out.back().para_end = true;
    return out;
}

std::string_view trimmed(std::string_view t, size_t b, size_t e, size_t* ob, size_t* oe) {
    while (b < e && is_space(t[b])) ++b;
    while (e > b && is_space(t[e - 1])) --e;
    *ob = b;
    *oe = e;
    return t.substr(b, e - b);
}

int32_t count(const encode_fn& enc, std::string_view t, size_t b, size_t e) {
    size_t tb, te;
    const std::string_view s = trimmed(t, b, e, &tb, &te);
    return s.empty() ? 0 : static_cast<int32_t>(enc(s).size());
}

// Splits an oversized unit [b, e) into pieces of at most max tokens: the longest prefix that fits,
// cut after whitespace when there is any, else at a character boundary (binary search).
// `tick` (may be empty) hears each piece's end: progress within one huge line.
void split_long(std::string_view t, size_t b, size_t e, const encode_fn& enc, int32_t max,
                bool para_end, std::vector<unit>& out,
                const std::function<void(size_t)>& tick = {}) {
    const size_t window_bytes = static_cast<size_t>(max) * k_max_token_bytes;
    while (b < e) {
        // Only a rest that could fit is counted whole: counting the whole rest of a megabyte
        // line for every piece made one long line quadratic.
        if (e - b <= window_bytes) {
            const int32_t whole = count(enc, t, b, e);
            if (whole <= max) {
                out.push_back({b, e, whole, para_end});
                return;
            }
        }
        // A token spans at most a few dozen bytes, so the answer lies within this window.
        const size_t window = std::min(e, b + window_bytes);
        // Galloping first (the fit is usually a few bytes per token, far below the window), so
        // the binary search below counts prefixes about as long as the piece, not the window.
        size_t lo = b + 1, hi = window;  // largest fitting end in [lo, hi]
        for (size_t step = static_cast<size_t>(max) * 2; b + step < window; step *= 2) {
            if (count(enc, t, b, b + step) > max) {
                hi = b + step - 1;
                break;
            }
            lo = b + step;
        }
        while (lo < hi) {
            const size_t mid = lo + (hi - lo + 1) / 2;
            if (count(enc, t, b, mid) <= max) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        size_t cut = lo;
        size_t ws = cut;
        while (ws > b && !is_space(t[ws - 1])) --ws;
        if (ws > b) {
            cut = ws;
        } else {
            while (cut > b + 1 && !utf8_start(t, cut)) --cut;
            if (!utf8_start(t, cut)) {  // not even one character fits: take one anyway
                cut = b + 1;
                while (cut < e && !utf8_start(t, cut)) ++cut;
            }
        }
        while (cut < e && is_space(t[cut])) ++cut;
        out.push_back({b, cut, count(enc, t, b, cut), false});
        b = cut;
        if (tick) tick(b);
    }
}

}  // namespace

encode_fn tokenizer_encoder(const tokenizer& vocab) {
    const tokenizer* v = &vocab;
    return [v](std::string_view s) { return v->encode(s, false, false); };
}

std::vector<text_chunk> chunk_text(std::string_view text, const encode_fn& encode,
                                   const chunker_params& p, const chunk_progress_fn& progress) {
    if (p.max_tokens < 8) {
        throw error(status::invalid_arg, fmt("chunker: max_tokens %d is below 8", p.max_tokens));
    }
    const int32_t max = p.max_tokens;
    const size_t window_bytes = static_cast<size_t>(max) * k_max_token_bytes;
    // Progress about every 64 KiB of text: often enough for a time limit, rare enough to be free.
    constexpr size_t k_progress_bytes = 64 << 10;
    size_t next_report = k_progress_bytes;
    std::function<void(size_t)> tick;
    if (progress) {
        tick = [&](size_t pos) {
            if (pos < next_report) return;
            progress(pos, text.size());
            next_report = pos + k_progress_bytes;
        };
    }
    std::vector<unit> units;
    for (const unit& u : split_units(text)) {
        // A unit longer than the window cannot fit: split it without tokenizing it whole (a
        // tokenizer's cost may grow faster than linearly on one huge word).
        const int32_t n = u.end - u.begin <= window_bytes ? count(encode, text, u.begin, u.end)
                                                          : max + 1;
        if (n <= max) {
            units.push_back({u.begin, u.end, n, u.para_end});
        } else {
            split_long(text, u.begin, u.end, encode, max, u.para_end, units, tick);
        }
        if (tick) tick(u.end);
    }

    std::vector<text_chunk> out;
    const auto emit = [&](size_t ua, size_t ub) -> bool {  // units [ua, ub); false: too long
        text_chunk c;
        const std::string_view s = trimmed(text, units[ua].begin, units[ub - 1].end, &c.begin,
                                           &c.end);
        if (s.empty()) return true;
        c.tokens = encode(s);
        if (static_cast<int32_t>(c.tokens.size()) > max) return false;
        out.push_back(std::move(c));
        return true;
    };

    size_t a = 0;
    while (a < units.size()) {
        // Greedy: as many units as fit by their own counts.
        int64_t sum = 0;
        size_t b = a;
        while (b < units.size() && sum + units[b].n_tokens <= max) sum += units[b++].n_tokens;
        if (b == a) b = a + 1;  // cannot happen after split_long, but never loop forever
        if (b < units.size()) {
            // Prefer the last paragraph break that leaves the chunk at least half full.
            int64_t run = 0;
            size_t best = 0;
            for (size_t k = a; k < b; ++k) {
                run += units[k].n_tokens;
                if (units[k].para_end && run >= static_cast<int64_t>(p.paragraph_min_share * max)) {
                    best = k + 1;
                }
            }
            if (best) b = best;
        }
        // Tokenizing the joined text can merge differently; shrink until it fits.
        while (!emit(a, b)) {
            if (b - a == 1) {
                // A single unit that fits alone by count cannot exceed; guard anyway by hard cut.
                std::vector<unit> pieces;
                split_long(text, units[a].begin, units[a].end, encode, max - 2, false, pieces);
                units.erase(units.begin() + static_cast<std::ptrdiff_t>(a));
                units.insert(units.begin() + static_cast<std::ptrdiff_t>(a), pieces.begin(),
                             pieces.end());
                b = a + 1;
                continue;
            }
            --b;
        }
        a = b;
    }
    return out;
}

std::vector<text_chunk> chunk_text_within(std::string_view text, const std::vector<size_t>& cuts,
                                          const encode_fn& encode, const chunker_params& p,
                                          const chunk_progress_fn& progress) {
    std::vector<text_chunk> out;
    size_t from = 0;
    for (size_t i = 0; i <= cuts.size(); ++i) {
        const size_t to =
            i < cuts.size() ? std::min(std::max(cuts[i], from), text.size()) : text.size();
        if (to == from) continue;
        chunk_progress_fn inner;
        if (progress) {
            inner = [&](size_t done, size_t) { progress(from + done, text.size()); };
        }
        for (text_chunk& c : chunk_text(text.substr(from, to - from), encode, p, inner)) {
            c.begin += from;
            c.end += from;
            out.push_back(std::move(c));
        }
        from = to;
    }
    if (progress) progress(text.size(), text.size());
    return out;
}

}  // namespace cacheblend
