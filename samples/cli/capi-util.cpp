#include "capi-util.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "args.h"

namespace cacheblend::cli {

const char* enum_name(int32_t kind, int32_t value) {
    const char* n = cbl_enum_name(kind, value);
    return n ? n : "unknown";
}

int32_t parse_enum(int32_t kind, const std::string& flag, const std::string& text) {
    int32_t v = 0;
    if (cbl_enum_parse(kind, text.c_str(), &v) != CBL_OK) {
        // The library's message names the valid words; drop its function-name prefix.
        std::string why = cbl_last_error();
        const size_t colon = why.find(": ");
        if (colon != std::string::npos) why = why.substr(colon + 2);
        throw usage_error("--" + flag + ": " + why);
    }
    return v;
}

std::vector<int32_t> parse_enum_list(int32_t kind, const std::string& flag,
                                     const std::string& text) {
    std::vector<int32_t> out;
    for (size_t pos = 0; pos <= text.size();) {
        const size_t comma = text.find(',', pos);
        const size_t end = comma == std::string::npos ? text.size() : comma;
        const int32_t v = parse_enum(kind, flag, text.substr(pos, end - pos));
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

std::string enum_names(int32_t kind) {
    std::vector<std::string> names;
    // Values are small and dense from 1 (CBL_STOP_NONE is 0, and is no flag value).
    for (int32_t v = 1; v < 64; ++v) {
        if (const char* n = cbl_enum_name(kind, v)) names.push_back(n);
    }
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
        out += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
        out += names[i];
    }
    return out;
}

const char* kv_format_name(int32_t format) {
    switch (format) {
        case CBL_KV_Q8: return "q8";
        case CBL_KV_EXACT: return "exact";
        default: return "f16";
    }
}

std::string token_text(const cbl_model* m, int32_t token) {
    size_t n = 0;
    if (cbl_token_to_piece(m, token, nullptr, 0, &n) != CBL_OK) return "";
    std::string s(n, '\0');
    if (n > 0 && cbl_token_to_piece(m, token, &s[0], n, &n) != CBL_OK) return "";
    return s;
}

model_ptr load_model(const std::string& path) {
    cbl_model* m = nullptr;
    check(cbl_model_load(path.empty() ? nullptr : path.c_str(), nullptr, &m));
    return model_ptr(m);
}

int32_t default_thread_count() {
    const unsigned hc = std::thread::hardware_concurrency();
    return static_cast<int32_t>(std::clamp(hc == 0 ? 4u : hc, 1u, 16u));
}

}  // namespace cacheblend::cli
