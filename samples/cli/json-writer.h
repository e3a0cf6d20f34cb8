// A small streaming JSON writer for the CLI's --json output. Commas and nesting are tracked for
// the caller; strings are escaped and invalid UTF-8 becomes U+FFFD, so the output is always valid
// JSON even when a token piece holds half of a multi-byte character.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace cacheblend::cli {

// Appends `s` as a quoted JSON string literal to `out`.
void json_escape(std::string_view s, std::string& out);

class json_writer {
public:
    // indent 0: one compact line; > 0: pretty-printed with that many spaces per level.
    explicit json_writer(std::ostream& os, int indent = 0) : os_(os), indent_(indent) {}

    json_writer& begin_object();
    json_writer& end_object();
    json_writer& begin_array();
    json_writer& end_array();
    json_writer& key(std::string_view k);

    json_writer& value(std::string_view s);
    json_writer& value(const char* s) { return value(std::string_view(s)); }
    json_writer& value(const std::string& s) { return value(std::string_view(s)); }
    json_writer& value(bool b);
    json_writer& value(int32_t v) { return value(static_cast<int64_t>(v)); }
    json_writer& value(int64_t v);
    json_writer& value(uint64_t v);
    json_writer& value(double v);  // shortest round-trip form; NaN and infinities become null
    json_writer& value(float v);   // shortest form that round-trips as a float
    json_writer& null();

    template <typename T>
    json_writer& field(std::string_view k, const T& v) {
        key(k);
        return value(v);
    }

    // True once the top-level value is complete.
    bool done() const { return stack_.empty() && wrote_root_; }

private:
    struct level {
        bool is_object;
        bool has_items;
    };
    void before_value();
    void newline(size_t depth);
    void raw(std::string_view s) { os_.write(s.data(), static_cast<std::streamsize>(s.size())); }

    std::ostream& os_;
    int indent_;
    std::vector<level> stack_;
    bool after_key_ = false;
    bool wrote_root_ = false;
    std::string buf_;
};

}  // namespace cacheblend::cli
