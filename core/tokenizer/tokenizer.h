// Tokenizer read from GGUF metadata (tokenizer.ggml.*): gpt2-style byte-level BPE with the
// `smollm`/`starcoder`/`refact`, `llama-bpe`/`llama3`, `qwen2`, `gpt-2`/`mpt`, `deepseek-coder`,
// `falcon` and default pre-tokenizers, and SentencePiece-style `llama` vocabularies. Byte-exact
// with llama.cpp. Immutable after loading: encode/decode may run on several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cacheblend {

class gguf_file;

using token_id = int32_t;

enum class token_attr : uint32_t {
    normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

class tokenizer {
public:
    // Throws cacheblend::error(status::format / unsupported) on a missing or unknown vocabulary.
    static std::unique_ptr<tokenizer> from_gguf(const gguf_file& f);
    ~tokenizer();

    // add_special: add BOS/EOS as the vocabulary's add_bos_token / add_eos_token flags say.
    // parse_special: match control-token text (e.g. "<|im_start|>") as special tokens;
    // user-defined tokens are always matched (llama.cpp semantics).
    std::vector<token_id> encode(std::string_view text, bool add_special, bool parse_special) const;

    // Bytes of one token. special=false renders control tokens as "" (llama.cpp token_to_piece).
    // Throws cacheblend::error(status::invalid_arg) for an id outside [0, n_vocab()).
    std::string token_to_piece(token_id id, bool special = false) const;
    // llama.cpp's llama_detokenize(remove_special = false, unparse_special = special): the pieces
    // concatenated, minus the SentencePiece prefix space of the first token, with
    // clean_up_tokenization_spaces where the vocabulary asks for it (gpt-2, starcoder, ...; not
    // smollm, qwen2, SPM). For byte-level BPE vocabularies without clean-up, decode(encode(s))
    // == s for any bytes, invalid UTF-8 included (llama.cpp would turn those into U+FFFD),
    // except bytes the vocabulary has no token for, which are dropped as llama.cpp drops them.
    std::string decode(const std::vector<token_id>& ids, bool special = false) const;

    int32_t n_vocab() const;
    std::string_view token_text(token_id id) const;  // raw vocabulary string
    token_attr attr(token_id id) const;
    token_id bos() const;  // -1 when absent
    token_id eos() const;
    token_id eot() const;
    bool add_bos() const;
    bool add_eos() const;
    bool is_eog(token_id id) const;  // end of generation: eos, eot, eom and llama.cpp's extras
    const std::string& model() const;  // "gpt2" or "llama"
    const std::string& pre() const;    // pre-tokenizer name

private:
    tokenizer();
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace cacheblend
