#include "corpus-common.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "commands.h"

namespace cacheblend::cli {

flag_spec data_flag() { return {"data", "DIR", "data directory (catalog, index, KV store)"}; }

namespace {

// The library's rule for metadata keys ([A-Za-z0-9_.-], 1 to 128 bytes), checked here too so a bad
// key is bad usage (exit 2) like every other malformed flag.
bool valid_metadata_key(const std::string& key) {
    if (key.empty() || key.size() > 128) return false;
    return std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
    });
}

// Ingest names a file's document by its real absolute path (realpath), so a prefix is resolved the
// same way: all of it when it names a file or folder, else its folder part, the rest kept as typed
// ("docs/intro" matches "docs/intro.md"); a trailing '/' stays, so "docs/" excludes "docs-old/".
// A prefix with a scheme ("notes://") names documents an application added under its own uris:
// it is taken literally.
std::string resolve_uri_prefix(const std::string& p) {
    if (p.empty() || p.find("://") != std::string::npos) return p;
    char buf[PATH_MAX];
    if (::realpath(p.c_str(), buf)) {  // an existing file or folder ("..", "docs", "docs/")
        const std::string real = buf;
        return real + (p.back() == '/' && real.back() != '/' ? "/" : "");
    }
    const size_t slash = p.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "." : p.substr(0, std::max<size_t>(slash, 1));
    const std::string rest = slash == std::string::npos ? p : p.substr(slash + 1);
    if (::realpath(dir.c_str(), buf)) {
        const std::string real = buf;
        return (real == "/" ? "" : real) + "/" + rest;
    }
    if (p[0] == '/') return p;
    if (::getcwd(buf, sizeof(buf))) return std::string(buf) + "/" + p;
    return p;
}

}  // namespace

std::vector<flag_spec> filter_flags() {
    return {
        {"collection", "C", "only documents of this collection"},
        {"uri-prefix", "P", "only documents whose uri (a file's absolute path) starts with P"},
        {"filter", "KEY=VALUE",
         "only documents whose metadata KEY is VALUE (files: kind=text|markdown|html, path); "
         "repeatable, all must match",
         true},
    };
}

doc_filter parse_filter_flags(const parsed_args& a, const std::string& cmd) {
    doc_filter f;
    f.collection = a.get_or("collection", "");
    f.uri_prefix = resolve_uri_prefix(a.get_or("uri-prefix", ""));
    for (const std::string& kv : a.get_all("filter")) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) {
            throw usage_error(cmd + ": --filter wants KEY=VALUE, got '" + kv + "'");
        }
        std::string key = kv.substr(0, eq);
        if (!valid_metadata_key(key)) {
            throw usage_error(cmd + ": --filter: metadata key must be 1 to 128 of [A-Za-z0-9_.-], "
                                    "got '" + key + "'");
        }
        f.keys.push_back(std::move(key));
        f.values.push_back(kv.substr(eq + 1));
    }
    for (size_t i = 0; i < f.keys.size(); ++i) {
        f.key_ptrs.push_back(f.keys[i].c_str());
        f.value_ptrs.push_back(f.values[i].c_str());
    }
    return f;
}

runtime_ptr open_existing_runtime(cbl_runtime_params* rp) {
    rp->must_exist = true;
    cbl_runtime* rt = nullptr;
    const cbl_status st = cbl_runtime_open(rp, &rt);
    if (st == CBL_OK) return runtime_ptr(rt);
    const std::string msg = cbl_last_error();
    const std::string dir = rp->data_dir ? rp->data_dir : "the default data directory";
    if ((st & 0xff) == CBL_IO && msg.find("no data directory at") != std::string::npos) {
        throw capi_error(st, "no data directory at " + dir + " (make one with cacheblend ingest "
                                                             "--data " + dir + " PATH)");
    }
    throw capi_error(st, msg);
}

}  // namespace cacheblend::cli
