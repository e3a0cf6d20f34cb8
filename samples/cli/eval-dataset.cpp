#include "eval-dataset.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "blend-common.h"
#include "capi-util.h"

namespace cacheblend::cli {
namespace {

constexpr int k_max_depth = 256;

void put_utf8(uint32_t cp, std::string& out) {
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate has no UTF-8 form
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class literal_parser {
public:
    literal_parser(std::string_view s, literal_syntax syn)
        : s_(s), py_(syn == literal_syntax::python) {}

    literal parse() {
        literal v = value(0);
        ws();
        if (i_ != s_.size()) fail("unexpected text after the value");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
            if (s_[k] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        throw capi_error(CBL_FORMAT, "line " + std::to_string(line) + ", column " +
                                         std::to_string(col) + ": " + what);
    }
    bool at_end() const { return i_ >= s_.size(); }
    char peek() const { return at_end() ? '\0' : s_[i_]; }
    void ws() {
        while (!at_end()) {
            const char c = s_[i_];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || (py_ && c == '\f')) {
                ++i_;
            } else if (py_ && c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
                i_ += 2;  // explicit line joining
            } else {
                return;
            }
        }
    }
    bool word(const char* w) {
        const size_t n = std::strlen(w);
        if (s_.compare(i_, n, w) != 0) return false;
        const char after = i_ + n < s_.size() ? s_[i_ + n] : '\0';
        if (std::isalnum(static_cast<unsigned char>(after)) || after == '_') return false;
        i_ += n;
        return true;
    }

    literal value(int depth) {
        if (depth > k_max_depth) fail("nesting too deep");
        ws();
        if (at_end()) fail("unexpected end of input");
        const char c = peek();
        if (c == '[' || (py_ && c == '(')) return sequence(depth, c == '[' ? ']' : ')');
        if (c == '{') return dict(depth);
        if (starts_string()) return string_value();
        literal v;
        if (py_ ? (word("True") || word("true")) : word("true")) {
            v.kind = literal::boolean;
            v.b = true;
            return v;
        }
        if (py_ ? (word("False") || word("false")) : word("false")) {
            v.kind = literal::boolean;
            return v;
        }
        if (py_ ? (word("None") || word("null")) : word("null")) return v;
        if (c == '-' || (c >= '0' && c <= '9') || (py_ && (c == '+' || c == '.'))) return number();
        const bool printable = std::isprint(static_cast<unsigned char>(c)) != 0;
        fail(std::string("unexpected character '") + (printable ? std::string(1, c) : "?") + "'");
    }

    literal sequence(int depth, char close) {
        literal v;
        v.kind = literal::list;
        ++i_;
        ws();
        if (peek() == close) {
            ++i_;
            return v;
        }
        while (true) {
            v.items.push_back(value(depth + 1));
            ws();
            if (peek() == ',') {
                ++i_;
                ws();
                if (py_ && peek() == close) {  // trailing comma
                    ++i_;
                    return v;
                }
                continue;
            }
            if (peek() == close) {
                ++i_;
                return v;
            }
            fail(std::string("expected ',' or '") + close + "' in a list");
        }
    }

    literal dict(int depth) {
        literal v;
        v.kind = literal::dict;
        ++i_;
        ws();
        if (peek() == '}') {
            ++i_;
            return v;
        }
        while (true) {
            ws();
            if (!starts_string()) fail("expected a string key in a dict");
            std::string key = string_value().str;
            ws();
            if (peek() != ':') fail("expected ':' after a dict key");
            ++i_;
            literal item = value(depth + 1);
            v.fields.emplace_back(std::move(key), std::move(item));
            ws();
            if (peek() == ',') {
                ++i_;
                ws();
                if (py_ && peek() == '}') {
                    ++i_;
                    return v;
                }
                continue;
            }
            if (peek() == '}') {
                ++i_;
                return v;
            }
            fail("expected ',' or '}' in a dict");
        }
    }

    bool starts_string() const {
        if (!py_) return peek() == '"';
        size_t k = i_;
        // Up to two prefix letters (u, r, b, br, rb) then a quote.
        for (int n = 0; n < 2 && k < s_.size() && s_[k] && std::strchr("uUrRbB", s_[k]); ++n) ++k;
        return k < s_.size() && (s_[k] == '\'' || s_[k] == '"');
    }

    literal string_value() {
        literal v;
        v.kind = literal::string;
        v.str = one_string();
        // Python joins adjacent literals: 'a' "b" == 'ab'.
        while (py_) {
            const size_t save = i_;
            ws();
            if (!starts_string()) {
                i_ = save;
                break;
            }
            v.str += one_string();
        }
        return v;
    }

    std::string one_string() {
        bool raw = false;
        while (py_ && s_[i_] != '\'' && s_[i_] != '"') {
            if (s_[i_] == 'r' || s_[i_] == 'R') raw = true;
            ++i_;
        }
        const char q = s_[i_];
        const bool triple = py_ && s_.compare(i_, 3, std::string(3, q)) == 0;
        i_ += triple ? 3 : 1;
        std::string out;
        while (true) {
            if (at_end()) fail("unterminated string");
            const char c = s_[i_];
            if (c == q) {
                if (!triple) {
                    ++i_;
                    return out;
                }
                if (s_.compare(i_, 3, std::string(3, q)) == 0) {
                    i_ += 3;
                    return out;
                }
            }
            if (c == '\n' && !triple) fail("newline inside a string");
            if (!py_ && static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                ++i_;
                continue;
            }
            if (i_ + 1 >= s_.size()) fail("unterminated string");
            if (raw) {
                // Raw strings keep the backslash; it only stops the next quote from closing.
                out += c;
                out += s_[i_ + 1];
                i_ += 2;
                continue;
            }
            ++i_;
            py_ ? python_escape(out) : json_escape(out);
        }
    }

    uint32_t hex_run(int n, const char* what) {
        if (i_ + static_cast<size_t>(n) > s_.size()) {
            fail(std::string("truncated ") + what + " escape");
        }
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
            const int d = hex_digit(s_[i_ + static_cast<size_t>(k)]);
            if (d < 0) fail(std::string("bad ") + what + " escape");
            v = (v << 4) | static_cast<uint32_t>(d);
        }
        i_ += static_cast<size_t>(n);
        return v;
    }

    // Combines \uD8xx\uDCxx into one code point (JSON always, Python too for convenience).
    uint32_t surrogate_pair(uint32_t hi) {
        if (hi < 0xD800 || hi > 0xDBFF) return hi;
        if (s_.compare(i_, 2, "\\u") != 0) return hi;
        const size_t save = i_;
        i_ += 2;
        const uint32_t lo = hex_run(4, "\\u");
        if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
        i_ = save;
        return hi;
    }

    void json_escape(std::string& out) {
        const char e = s_[i_++];
        switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': put_utf8(surrogate_pair(hex_run(4, "\\u")), out); break;
            default: --i_; fail("unknown escape in a string");
        }
    }

    void python_escape(std::string& out) {
        const char e = s_[i_++];
        switch (e) {
            case '\n': break;  // line continuation inside a string
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case 'x': put_utf8(hex_run(2, "\\x"), out); break;
            case 'u': put_utf8(surrogate_pair(hex_run(4, "\\u")), out); break;
            case 'U': {
                const uint32_t cp = hex_run(8, "\\U");
                if (cp > 0x10FFFF) fail("\\U escape beyond U+10FFFF");
                put_utf8(cp, out);
                break;
            }
            case 'N': --i_; fail("\\N{...} escapes are not supported");
            default:
                if (e >= '0' && e <= '7') {
                    uint32_t v = static_cast<uint32_t>(e - '0');
                    for (int k = 0; k < 2 && peek() >= '0' && peek() <= '7'; ++k) {
                        v = v * 8 + static_cast<uint32_t>(s_[i_++] - '0');
                    }
                    put_utf8(v, out);
                } else {
                    out += '\\';  // Python keeps unknown escapes as written
                    out += e;
                }
        }
    }

    literal number() {
        const size_t start = i_;
        if (peek() == '-' || peek() == '+') ++i_;
        bool digits = false;
        while (std::isdigit(static_cast<unsigned char>(peek())) || (py_ && peek() == '_')) {
            ++i_;
            digits = true;
        }
        if (peek() == '.') {
            ++i_;
            while (std::isdigit(static_cast<unsigned char>(peek())) || (py_ && peek() == '_')) {
                ++i_;
                digits = true;
            }
        }
        if (digits && (peek() == 'e' || peek() == 'E')) {
            ++i_;
            if (peek() == '-' || peek() == '+') ++i_;
            if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("bad number exponent");
            while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
        }
        if (!digits) fail("bad number");
        std::string text;
        for (size_t k = start; k < i_; ++k) {
            if (s_[k] != '_') text += s_[k];
        }
        literal v;
        v.kind = literal::number;
        v.num = std::strtod(text.c_str(), nullptr);
        return v;
    }

    std::string_view s_;
    bool py_;
    size_t i_ = 0;
};

// A field that is either the value itself or a string holding a Python literal of it.
literal unwrap(const literal& v, const std::string& where) {
    if (v.kind != literal::string) return v;
    try {
        return parse_literal(v.str, literal_syntax::python);
    } catch (const capi_error& e) {
        throw capi_error(CBL_FORMAT, where + ": not a Python literal: " + e.what());
    }
}

std::vector<qa_passage> read_ctxs(const literal& field, const std::string& where) {
    const literal v = unwrap(field, where);
    if (v.kind != literal::list) {
        throw capi_error(CBL_FORMAT, where + ": expected a list of passages");
    }
    std::vector<qa_passage> out;
    for (size_t i = 0; i < v.items.size(); ++i) {
        const literal& c = v.items[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        qa_passage p;
        if (c.kind == literal::string) {
            p.text = c.str;
        } else if (c.kind == literal::dict) {
            const literal* text = c.get("text");
            const literal* title = c.get("title");
            if (!text || text->kind != literal::string) {
                throw capi_error(CBL_FORMAT, at + ": expected a string 'text'");
            }
            if (title && title->kind != literal::string && title->kind != literal::none) {
                throw capi_error(CBL_FORMAT, at + ": 'title' must be a string");
            }
            p.text = text->str;
            if (title) p.title = title->str;
        } else {
            throw capi_error(CBL_FORMAT, at + ": expected {title, text} or a string");
        }
        out.push_back(std::move(p));
    }
    if (out.empty()) throw capi_error(CBL_FORMAT, where + ": no passages");
    return out;
}

std::vector<std::string> read_answers(const literal& field, const std::string& where) {
    literal v;
    if (field.kind == literal::string) {
        // A bare answer string is allowed; a string that looks like a list must parse as one.
        const size_t b = field.str.find_first_not_of(" \t\n\r");
        const char first = b == std::string::npos ? '\0' : field.str[b];
        if (first != '[' && first != '(') return {field.str};
        v = unwrap(field, where);
    } else {
        v = field;
    }
    if (v.kind == literal::none) return {};
    if (v.kind != literal::list) {
        throw capi_error(CBL_FORMAT, where + ": expected a list of answers");
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < v.items.size(); ++i) {
        const literal* a = &v.items[i];
        // 2WikiMQA-style lists of aliases: the first one is scored (reference §1.11).
        if (a->kind == literal::list && !a->items.empty()) a = &a->items[0];
        if (a->kind != literal::string) {
            throw capi_error(CBL_FORMAT,
                        where + "[" + std::to_string(i) + "]: expected a string answer");
        }
        out.push_back(a->str);
    }
    return out;
}

}  // namespace

const literal* literal::get(std::string_view key) const {
    if (kind != dict) return nullptr;
    for (const auto& [k, v] : fields) {
        if (k == key) return &v;
    }
    return nullptr;
}

literal parse_literal(std::string_view text, literal_syntax syntax) {
    return literal_parser(text, syntax).parse();
}

std::vector<qa_record> load_qa_dataset(const std::string& path) {
    const std::string text = read_text_file(path);
    literal root;
    try {
        root = parse_literal(text, literal_syntax::json);
    } catch (const capi_error& e) {
        throw capi_error(CBL_FORMAT, "dataset " + path + " is not valid JSON: " + e.what());
    }
    if (root.kind != literal::list) {
        throw capi_error(CBL_FORMAT,
                    "dataset " + path + ": expected a JSON list of {ctxs, question, answers}");
    }
    std::vector<qa_record> out;
    out.reserve(root.items.size());
    for (size_t r = 0; r < root.items.size(); ++r) {
        const literal& rec = root.items[r];
        const std::string where = "dataset " + path + ": record " + std::to_string(r);
        if (rec.kind != literal::dict) throw capi_error(CBL_FORMAT, where + ": expected an object");
        const literal* ctxs = rec.get("ctxs");
        const literal* question = rec.get("question");
        const literal* answers = rec.get("answers");
        if (!ctxs) throw capi_error(CBL_FORMAT, where + ": missing 'ctxs'");
        if (!question || question->kind != literal::string || question->str.empty()) {
            throw capi_error(CBL_FORMAT, where + ": 'question' must be a non-empty string");
        }
        qa_record q;
        q.ctxs = read_ctxs(*ctxs, where + ": ctxs");
        q.question = question->str;
        if (answers) q.answers = read_answers(*answers, where + ": answers");
        out.push_back(std::move(q));
    }
    if (out.empty()) throw capi_error(CBL_FORMAT, "dataset " + path + " has no records");
    return out;
}

}  // namespace cacheblend::cli
