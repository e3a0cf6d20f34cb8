// Byte-level BPE (gpt2-style vocabularies): pre-tokenize with the vocabulary's splitter
// (core/tokenizer/unicode.h), map bytes to GPT-2's unicode symbols, then merge pairs by rank
// with a priority queue, as llama.cpp's llm_tokenizer_bpe_session does.

#include "core/tokenizer/tokenizer-impl.h"

#include <algorithm>
#include <utility>

namespace cacheblend {

using namespace tokenizer_detail;

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
            syms[i] = {byte_symbol[uint8_t(word[i])], i - 1, i + 1 < n ? i + 1 : -1, uint32_t(i),
                       1};
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

}  // namespace cacheblend
