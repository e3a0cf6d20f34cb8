// A minimal JSON reader for test fixtures (objects, arrays, strings with \u escapes, numbers,
// true/false/null). Throws std::runtime_error on malformed input.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cbltest {

struct json {
    enum kind_t { null, boolean, number, string, array, object } kind = null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<json> arr;
    std::map<std::string, json> obj;

    const json& operator[](const std::string& key) const;  // throws when absent
    const json& operator[](size_t i) const { return arr.at(i); }
    bool has(const std::string& key) const { return kind == object && obj.count(key) > 0; }
    size_t size() const { return kind == array ? arr.size() : obj.size(); }
    int64_t as_int() const { return static_cast<int64_t>(num); }

    static json parse(const std::string& text);
};

json load_json_file(const std::string& path);

}  // namespace cbltest
