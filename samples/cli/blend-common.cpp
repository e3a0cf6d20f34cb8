#include "blend-common.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace cacheblend::cli {

std::string default_kv_store_dir() {
    std::string base;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
        base = x;
    } else if (const char* h = std::getenv("HOME"); h && *h) {
        base = std::string(h) + "/.cache";
    } else {
        base = "/tmp";
    }
    return base + "/cacheblend/kv";
}

flag_spec store_flag() {
    return {"store", "DIR", "chunk KV store (default: ${XDG_CACHE_HOME:-~/.cache}/cacheblend/kv)"};
}

flag_spec direct_io_flag() {
    return {"direct-io", "",
            "read stored KV with O_DIRECT, bypassing the page cache (cold-read timings)"};
}

std::vector<flag_spec> blend_tuning_flags() {
    return {
        {"check-layers", "L,..", "layers that select tokens to recompute (default 1)"},
        {"check-ratios", "R,..", "ratio kept at each check layer, non-increasing (gradual)"},
        {"deviation", "v|k|kv", "what the check layer compares: V, K or both (default v)"},
        {"kv-format", "f16|q8", "stored KV format (default f16)"},
    };
}

std::vector<double> parse_double_list(const std::string& flag, const std::string& text,
                                      double min, double max) {
    std::vector<double> out;
    size_t pos = 0;
    while (true) {
        const size_t comma = text.find(',', pos);
        const std::string item =
            text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        double v = 0;
        const char* end = item.data() + item.size();
        const auto r = std::from_chars(item.data(), end, v);
        if (item.empty() || r.ec != std::errc() || r.ptr != end || !std::isfinite(v)) {
            throw usage_error("--" + flag + ": expected comma-separated numbers, got '" + text +
                              "'");
        }
        if (v < min || v > max) {
            std::ostringstream os;
            os << "--" << flag << ": " << item << " is out of range [" << min << ", " << max
               << "]";
            throw usage_error(os.str());
        }
        out.push_back(v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

void apply_blend_tuning(const parsed_args& a, blend_params* p) {
    if (a.has("check-layers")) {
        p->check_layers.clear();
        for (int64_t l : a.get_int_list("check-layers", "1", 1, 1 << 20)) {
            p->check_layers.push_back(static_cast<int32_t>(l));
        }
    }
    if (auto s = a.get("check-ratios")) {
        p->check_ratios.clear();
        for (double r : parse_double_list("check-ratios", *s, 0.0, 1.0)) {
            p->check_ratios.push_back(static_cast<float>(r));
        }
        if (p->check_ratios.size() != p->check_layers.size()) {
            throw usage_error("--check-ratios: give one ratio per check layer (" +
                              std::to_string(p->check_layers.size()) + ")");
        }
    }
    if (auto d = a.get("deviation")) {
        if (*d == "v") {
            p->deviation = deviation_kind::v;
        } else if (*d == "k") {
            p->deviation = deviation_kind::k;
        } else if (*d == "kv") {
            p->deviation = deviation_kind::kv;
        } else {
            throw usage_error("--deviation: expected v, k or kv, got '" + *d + "'");
        }
    }
    if (auto f = a.get("kv-format")) {
        if (*f == "f16") {
            p->format = kv_format::f16;
        } else if (*f == "q8") {
            p->format = kv_format::q8;
        } else {
            throw usage_error("--kv-format: expected f16 or q8, got '" + *f + "'");
        }
    }
}

std::shared_ptr<kv_store> open_store(const parsed_args& a) {
    kv_store_params kp;
    kp.dir = a.has("store") ? *a.get("store") : default_kv_store_dir();
    if (kp.dir.empty()) throw usage_error("--store: empty path");
    kp.direct_io = a.has("direct-io");
    return kv_store::open(kp);
}

void write_blend_stats(json_writer& w, const blend_stats& s, double ttft_ms,
                       double decode_tokens_per_s) {
    w.field("mode", s.mode);
    w.field("ratio", s.ratio);
    w.field("ttft_ms", ttft_ms);
    w.field("load_ms", s.load_ms);
    w.field("select_ms", s.select_ms);
    w.field("compute_ms", s.compute_ms);
    w.field("tokens_total", s.tokens_total);
    w.field("tokens_reused", s.tokens_reused);
    w.field("tokens_recomputed", s.tokens_recomputed);
    w.field("tokens_missed", s.tokens_missed);
    w.field("bytes_loaded", static_cast<uint64_t>(s.bytes_loaded));
    w.field("decode_tokens_per_s", decode_tokens_per_s);
    w.field("prefill_ms", s.ttft_ms);
    w.field("load_wait_ms", s.load_wait_ms);
    w.field("chunks_hit", s.chunks_hit);
    w.field("chunks_missed", s.chunks_missed);
    if (!s.fallback_reason.empty()) w.field("fallback_reason", s.fallback_reason);
}

std::string read_text_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        throw error(status::io, "cannot open " + path + ": " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) throw error(status::io, path + " is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error(status::io, "cannot open " + path + ": " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw error(status::io_read, "cannot read " + path);
    return ss.str();
}

}  // namespace cacheblend::cli
