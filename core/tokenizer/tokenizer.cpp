// Tokenizer byte-exact with llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) for gpt2 byte-level
// BPE and llama SentencePiece vocabularies. Where llama.cpp's behaviour is arbitrary (hash-map
// iteration order when auto-detecting EOT/FIM tokens, std::sort order of equal-length special
// tokens) we use the same containers and algorithms so the result is the same.
//
// One deliberate difference: llama.cpp replaces each invalid UTF-8 byte by U+FFFD before BPE, so
// such bytes do not survive a round trip. We pre-tokenize them exactly as it does (U+FFFD's
// category) but byte-encode the original byte, so decode(encode(s)) == s for any bytes.
//
// The parts live in their own files (core/tokenizer/tokenizer-impl.h lists them); this one is the
// public interface.

#include "core/tokenizer/tokenizer.h"

#include "core/tokenizer/tokenizer-impl.h"

namespace cacheblend {

using namespace tokenizer_detail;

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
