// BERT WordPiece tokenizer, matching HF tokenizers' BertNormalizer + BertPreTokenizer + WordPiece
// (what sentence-transformers runs for BERT models):
//   special tokens ([CLS], [MASK], ...) are matched verbatim in the raw text first;
//   clean_text: drop NUL, U+FFFD and control/format/unassigned codepoints, whitespace -> ' ';
//   tokenize_chinese_chars: spaces around CJK ideographs;
//   strip_accents: NFD, then drop nonspacing marks (Mn); lower_case: per-codepoint lower case
//   (in that order, as the Rust normalizer does);
//   split on whitespace and around every punctuation codepoint (P* or ASCII punctuation);
//   each word: greedy longest-match word pieces ("##" continuations), [UNK] for the whole word
//   when a piece is missing or the word has more than max_input_chars_per_word codepoints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cacheblend {

class gguf_file;

struct wordpiece_config {
    bool clean_text = true;
    bool tokenize_chinese_chars = true;
    bool strip_accents = true;
    bool lower_case = true;
    int32_t max_input_chars_per_word = 100;
    std::string subword_prefix = "##";
    std::string unk_token = "[UNK]";
    std::string cls_token = "[CLS]";
    std::string sep_token = "[SEP]";
    std::string pad_token = "[PAD]";
    // Matched verbatim (not normalized) before anything else; each must be in the vocabulary.
    std::vector<std::string> special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
};

class wordpiece_tokenizer {
public:
    // Throws cacheblend::error (status::format) when a special token is not in the vocabulary.
    wordpiece_tokenizer(std::vector<std::string> vocab, wordpiece_config cfg);
    // Reads tokenizer.ggml.tokens and tokenizer.wordpiece.* (scripts/convert-embedder.py).
    static wordpiece_tokenizer from_gguf(const gguf_file& f);
    ~wordpiece_tokenizer();
    wordpiece_tokenizer(wordpiece_tokenizer&&) noexcept;
    wordpiece_tokenizer& operator=(wordpiece_tokenizer&&) noexcept;

    // Appends the word-piece ids of `text` to out (no [CLS]/[SEP], no truncation). Invalid UTF-8
    // bytes read as U+FFFD. Thread-safe.
    void encode(std::string_view text, std::vector<int32_t>& out) const;
    std::vector<int32_t> encode(std::string_view text) const;

    // The normalized words of `text` before WordPiece (for tests and debugging).
    std::vector<std::string> pre_tokenize(std::string_view text) const;

    int32_t n_vocab() const;
    const std::string& token(int32_t id) const;
    int32_t find(std::string_view token) const;  // -1 when absent
    int32_t unk_id() const;
    int32_t cls_id() const;
    int32_t sep_id() const;
    int32_t pad_id() const;
    const wordpiece_config& config() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace cacheblend
