#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cacheblend.h"
#include "commands.h"

namespace cacheblend::cli {

const char* const k_version = CBL_VERSION_STRING;

flag_spec model_flag() {
    return {"model", "M",
            "GGUF model file or model name (see `cacheblend models`; default: $CBL_MODEL, else "
            "qwen2.5-coder-1.5b)"};
}

flag_spec device_flag() {
    return {"device", "D",
            "compute device: cpu (default), or cuda:N in a CUDA build on a machine with a GPU"};
}

std::string device_arg(const parsed_args& a) {
    const std::string d = a.get_or("device", "");
    if (a.has("device") && d.empty()) throw usage_error("--device: empty name (cpu, cuda:0)");
    return d;
}

bool print_help_if_asked(const command_spec& spec, const parsed_args& a) {
    if (!a.help) return false;
    std::fputs(format_help(spec).c_str(), stdout);
    return true;
}

std::string printable(const std::string& bytes) {
    static const char hex[] = "0123456789abcdef";
    std::string out = "'";
    for (size_t i = 0; i < bytes.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(bytes[i]);
        // Multi-byte UTF-8 passes through only when complete, so the terminal shows characters.
        size_t n = 0;
        if (c >= 0xC2 && c <= 0xDF)
            n = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            n = 2;
        else if (c >= 0xF0 && c <= 0xF4)
            n = 3;
        bool ok = n > 0;
        for (size_t k = 1; ok && k <= n; ++k) {
            ok = i + k < bytes.size() && (static_cast<unsigned char>(bytes[i + k]) & 0xC0) == 0x80;
        }
        if (ok) {
            out.append(bytes, i, n + 1);
            i += n;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\\' || c == '\'') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c < 0x20 || c >= 0x7F) {
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out + "'";
}

}  // namespace cacheblend::cli
