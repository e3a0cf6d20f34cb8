// SentencePiece (llama vocabularies): score-driven bigram merging over UTF-8 characters with
// byte fallback, as llama.cpp's llm_tokenizer_spm_session does.

#include "core/tokenizer/tokenizer-impl.h"

#include <algorithm>

namespace cacheblend {

using namespace tokenizer_detail;

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

}  // namespace cacheblend
