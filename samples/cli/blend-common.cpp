#include "blend-common.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>


namespace cacheblend::cli {

std::string default_kv_store_dir() {
    char* dir = nullptr;
    check(cbl_x_default_kv_store_dir(&dir));
    std::string out = dir;
    cbl_free(dir);
    return out;
}

float default_ratio() {
    cbl_x_blend_params p;
    cbl_x_blend_params_init(&p);
    return p.recompute_ratio;
}

std::string default_ratio_text() {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(default_ratio()));
    return buf;
}

flag_spec mode_flag() {
    return {"mode", "M",
            enum_names(CBL_NAMES_MODE) + " (default " + mode_name(CBL_MODE_DEFAULT) + ")"};
}

flag_spec ratio_flag() {
    return {"ratio", "R|auto|calibrated",
            "share of reused tokens recomputed by blend (default " + default_ratio_text() +
                "; calibrated: what `cacheblend calibrate` recorded)"};
}

flag_spec store_flag() {
    return {"store", "DIR", "chunk KV store (default: ${XDG_CACHE_HOME:-~/.cache}/cacheblend/kv)"};
}

flag_spec store_data_flag() {
    return {"data", "DIR",
            "use the KV store of this data directory (DIR/kv, as ingest and ask do) instead of "
            "--store: a calibration recorded there is the one `ask --data DIR` uses"};
}

flag_spec kv_budget_flag() {
    return {"kv-budget", "SIZE",
            "bytes the store may hold, e.g. 500M or 16G (default 8G); least recently used chunks "
            "are evicted past it"};
}

flag_spec kv_remote_flag() {
    return {
        "kv-remote", "URL",
        "share chunk KV with other machines through Redis: redis://[user:password@]host:port/db "
        "(default $CBL_KV_REMOTE); chunks missing here are read from it, computed ones written "
        "to it; a server that is down only makes requests use local KV (a note says so)"};
}

const char* kv_remote_of(const parsed_args& a) {
    // Into `a`'s own storage (get() returns a copy, which would dangle).
    const auto it = a.all().find("kv-remote");
    if (it == a.all().end() || it->second.empty()) return nullptr;
    if (it->second.back().empty()) throw usage_error("--kv-remote: empty URL");
    return it->second.back().c_str();
}

namespace {

uint64_t parse_size(const std::string& flag, const std::string& text) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    double mult = 1;
    if (used + 1 == text.size()) {
        switch (text[used]) {
            case 'K': case 'k': mult = 1024.0; break;
            case 'M': case 'm': mult = 1024.0 * 1024; break;
            case 'G': case 'g': mult = 1024.0 * 1024 * 1024; break;
            case 'T': case 't': mult = 1024.0 * 1024 * 1024 * 1024; break;
            default: used = 0;
        }
        if (used) ++used;
    }
    const double bytes = v * mult;
    if (used == 0 || used != text.size() || !(bytes >= 1) || bytes > 1e18) {
        throw usage_error("--" + flag + ": expected a size such as 500M or 16G, got '" + text + "'");
    }
    return static_cast<uint64_t>(bytes);
}

}  // namespace

uint64_t parse_kv_budget(const parsed_args& a) {
    const auto b = a.get("kv-budget");
    return b ? parse_size("kv-budget", *b) : 0;
}

flag_spec direct_io_flag() {
    return {"direct-io", "",
            "read stored KV with O_DIRECT, bypassing the page cache (cold-read timings)"};
}

std::vector<flag_spec> blend_tuning_flags() {
    return {
        {"check-layers", "L,..", "layers that select tokens to recompute (default 1)"},
        {"check-ratios", "R,..", "ratio kept at each check layer, non-increasing (gradual)"},
        {"deviation", "v|k|kv|random",
         "what the check layer compares: V, K or both (default v); random: the control"},
        select_flag(),
        {"kv-format", "F",
         "stored KV format: " + enum_names(CBL_NAMES_KV_FORMAT) + " (default " +
             enum_name(CBL_NAMES_KV_FORMAT, CBL_KV_DEFAULT) + "; exact: K in f32)"},
    };
}

flag_spec select_flag() {
    return {"select", "POLICY",
            "which reused tokens to recompute: " + enum_names(CBL_X_NAMES_SELECT) + " (default " +
                enum_name(CBL_X_NAMES_SELECT, CBL_X_SELECT_DEFAULT) + ")"};
}

int32_t parse_select(const parsed_args& a) {
    const auto s = a.get("select");
    return s ? parse_enum(CBL_X_NAMES_SELECT, "select", *s) : CBL_X_SELECT_DEFAULT;
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

cbl_x_blend_params blend_tuning::params(int32_t mode, float ratio, bool auto_ratio) const {
    cbl_x_blend_params p;
    cbl_x_blend_params_init(&p);
    p.mode = mode;
    p.recompute_ratio = ratio;
    p.auto_ratio = auto_ratio;
    p.kv_format = kv_format;
    p.deviation = deviation;
    p.select = select;
    if (!check_layers.empty()) {
        p.check_layers = check_layers.data();
        p.n_check_layers = check_layers.size();
    }
    if (!check_ratios.empty()) p.check_ratios = check_ratios.data();
    return p;
}

blend_tuning parse_blend_tuning(const parsed_args& a) {
    blend_tuning t;
    if (a.has("check-layers")) {
        for (int64_t l : a.get_int_list("check-layers", "1", 1, 1 << 20)) {
            t.check_layers.push_back(static_cast<int32_t>(l));
        }
    }
    if (auto s = a.get("check-ratios")) {
        for (double r : parse_double_list("check-ratios", *s, 0.0, 1.0)) {
            t.check_ratios.push_back(static_cast<float>(r));
        }
        const size_t n_layers = t.check_layers.empty() ? 1 : t.check_layers.size();
        if (t.check_ratios.size() != n_layers) {
            throw usage_error("--check-ratios: give one ratio per check layer (" +
                              std::to_string(n_layers) + ")");
        }
    }
    if (auto d = a.get("deviation")) {
        if (*d == "v") {
            t.deviation = CBL_X_DEVIATION_V;
        } else if (*d == "k") {
            t.deviation = CBL_X_DEVIATION_K;
        } else if (*d == "kv") {
            t.deviation = CBL_X_DEVIATION_KV;
        } else if (*d == "random") {
            t.deviation = CBL_X_DEVIATION_RANDOM;
        } else {
            throw usage_error("--deviation: expected v, k, kv or random, got '" + *d + "'");
        }
    }
    if (auto f = a.get("kv-format")) {
        t.kv_format = parse_enum(CBL_NAMES_KV_FORMAT, "kv-format", *f);
    }
    t.select = parse_select(a);
    return t;
}

kvstore_ptr open_store(const parsed_args& a, std::string* dir) {
    if (a.has("store") && a.has("data")) {
        throw usage_error("--store and --data both name a KV store: give one");
    }
    if (const auto data = a.get("data")) {
        if (data->empty()) throw usage_error("--data: empty path");
        // As the runtime does for `ingest` and `ask`: the data dir (0700) and its kv/ store.
        if (::mkdir(data->c_str(), 0700) != 0 && errno != EEXIST) {
            throw capi_error(CBL_IO, "cannot create " + *data + ": " + std::strerror(errno));
        }
        *dir = *data + "/kv";
    } else {
        *dir = a.has("store") ? *a.get("store") : default_kv_store_dir();
        if (dir->empty()) throw usage_error("--store: empty path");
    }
    cbl_kvstore_params kp;
    cbl_kvstore_params_init(&kp);
    kp.direct_io = a.has("direct-io");
    kp.budget_bytes = parse_kv_budget(a);
    kp.kv_remote = kv_remote_of(a);
    cbl_kvstore* kv = nullptr;
    check(cbl_kvstore_open(dir->c_str(), &kp, &kv));
    return kvstore_ptr(kv);
}

std::string read_text_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        throw capi_error(CBL_IO, "cannot open " + path + ": " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) throw capi_error(CBL_IO, path + " is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw capi_error(CBL_IO, "cannot open " + path + ": " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw capi_error(CBL_IO_READ, "cannot read " + path);
    return ss.str();
}

}  // namespace cacheblend::cli
