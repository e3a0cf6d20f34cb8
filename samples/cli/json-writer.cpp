#include "json-writer.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace cacheblend::cli {
namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 if it is ill-formed. `bad_len` receives
// the length of the maximal ill-formed prefix, which becomes one U+FFFD (Unicode's recommended
// "maximal subpart" replacement, the same count as Python's errors="replace").
size_t utf8_sequence(std::string_view s, size_t i, size_t& bad_len) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;  // overlong
        if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;  // overlong
        if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
        bad_len = 1;
        return 0;
    }
    for (size_t k = 1; k <= need; ++k) {
        const size_t j = i + k;
        const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (j >= s.size() || b(j) < l || b(j) > h) {
            bad_len = k;
            return 0;
        }
    }
    return need + 1;
}

}  // namespace

void json_escape(std::string_view s, std::string& out) {
    static const char hex[] = "0123456789abcdef";
    out.push_back('"');
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                default:
                    if (c < 0x20 || c == 0x7F) {
                        out += "\\u00";
                        out.push_back(hex[c >> 4]);
                        out.push_back(hex[c & 15]);
                    } else {
                        out.push_back(static_cast<char>(c));
                    }
            }
            ++i;
            continue;
        }
        size_t bad = 0;
        const size_t n = utf8_sequence(s, i, bad);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            i += bad;
        } else {
            out.append(s.data() + i, n);
            i += n;
        }
    }
    out.push_back('"');
}

void json_writer::newline(size_t depth) {
    if (indent_ <= 0) return;
    os_.put('\n');
    for (size_t i = 0; i < depth * static_cast<size_t>(indent_); ++i) os_.put(' ');
}

void json_writer::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (stack_.empty()) {
        if (wrote_root_) throw std::logic_error("json_writer: second top-level value");
        wrote_root_ = true;
        return;
    }
    level& l = stack_.back();
    if (l.is_object) throw std::logic_error("json_writer: object value without a key");
    if (l.has_items) os_.put(',');
    l.has_items = true;
    newline(stack_.size());
}

json_writer& json_writer::key(std::string_view k) {
    if (stack_.empty() || !stack_.back().is_object || after_key_) {
        throw std::logic_error("json_writer: key outside an object");
    }
    level& l = stack_.back();
    if (l.has_items) os_.put(',');
    l.has_items = true;
    newline(stack_.size());
    buf_.clear();
    json_escape(k, buf_);
    raw(buf_);
    raw(indent_ > 0 ? ": " : ":");
    after_key_ = true;
    return *this;
}

json_writer& json_writer::begin_object() {
    before_value();
    os_.put('{');
    stack_.push_back({true, false});
    return *this;
}

json_writer& json_writer::begin_array() {
    before_value();
    os_.put('[');
    stack_.push_back({false, false});
    return *this;
}

json_writer& json_writer::end_object() {
    if (stack_.empty() || !stack_.back().is_object || after_key_) {
        throw std::logic_error("json_writer: unbalanced end_object");
    }
    const bool items = stack_.back().has_items;
    stack_.pop_back();
    if (items) newline(stack_.size());
    os_.put('}');
    return *this;
}

json_writer& json_writer::end_array() {
    if (stack_.empty() || stack_.back().is_object) {
        throw std::logic_error("json_writer: unbalanced end_array");
    }
    const bool items = stack_.back().has_items;
    stack_.pop_back();
    if (items) newline(stack_.size());
    os_.put(']');
    return *this;
}

json_writer& json_writer::value(std::string_view s) {
    before_value();
    buf_.clear();
    json_escape(s, buf_);
    raw(buf_);
    return *this;
}

json_writer& json_writer::value(bool b) {
    before_value();
    raw(b ? "true" : "false");
    return *this;
}

json_writer& json_writer::value(int64_t v) {
    before_value();
    char tmp[32];
    const auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
    return *this;
}

json_writer& json_writer::value(uint64_t v) {
    before_value();
    char tmp[32];
    const auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
    return *this;
}

json_writer& json_writer::value(double v) {
    if (!std::isfinite(v)) return null();
    before_value();
    char tmp[64];
    const auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
    return *this;
}

json_writer& json_writer::value(float v) {
    if (!std::isfinite(v)) return null();
    before_value();
    char tmp[64];
    const auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
    return *this;
}

json_writer& json_writer::null() {
    before_value();
    raw("null");
    return *this;
}

}  // namespace cacheblend::cli
