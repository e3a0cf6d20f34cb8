#include "capi-util.h"

#include <algorithm>
#include <thread>

namespace cacheblend::cli {

const char* mode_name(int32_t mode) {
    switch (mode) {
        case CBL_MODE_FULL: return "full";
        case CBL_MODE_PREFIX: return "prefix";
        case CBL_MODE_REUSE: return "reuse";
        case CBL_MODE_DEFAULT:
        case CBL_MODE_BLEND: return "blend";
        default: return "unknown";
    }
}

bool parse_mode(const std::string& s, int32_t* out) {
    if (s == "full") *out = CBL_MODE_FULL;
    else if (s == "prefix") *out = CBL_MODE_PREFIX;
    else if (s == "reuse") *out = CBL_MODE_REUSE;
    else if (s == "blend") *out = CBL_MODE_BLEND;
    else return false;
    return true;
}

const char* search_name(int32_t mode) {
    switch (mode) {
        case CBL_SEARCH_DENSE: return "dense";
        case CBL_SEARCH_BM25: return "bm25";
        default: return "hybrid";
    }
}

bool parse_search(const std::string& s, int32_t* out) {
    if (s == "hybrid") *out = CBL_SEARCH_HYBRID;
    else if (s == "dense") *out = CBL_SEARCH_DENSE;
    else if (s == "bm25") *out = CBL_SEARCH_BM25;
    else return false;
    return true;
}

const char* stop_name(int32_t stop) {
    switch (stop) {
        case CBL_STOP_EOG: return "eog";
        case CBL_STOP_LENGTH: return "length";
        case CBL_STOP_CONTEXT: return "context";
        case CBL_STOP_CALLBACK: return "stopped";
        default: return "none";
    }
}

bool parse_kv_format(const std::string& s, int32_t* out) {
    if (s == "f16") *out = CBL_KV_F16;
    else if (s == "q8") *out = CBL_KV_Q8;
    else if (s == "exact") *out = CBL_KV_EXACT;
    else return false;
    return true;
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
