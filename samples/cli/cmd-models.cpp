// `cacheblend models`: the named models the library knows (its registry), whether each one's file
// is in the cache folder with the size the registry gives, and which one is the default. Through
// the experimental C ABI (cbl_x_model_registry_*), since the registry lives in the library.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "capi-util.h"
#include "commands.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s{
        "models",
        "models [--json]",
        "List the named models: a name works wherever a model path does (--model NAME, CBL_MODEL).",
        {
            {"json", "", "print {\"folder\", \"default\", \"default_path\", \"models\": [...]}"},
        },
        0,
        "A model is present when its file is in the cache folder; a file whose size differs from "
        "the registry's is reported as 'wrong size' (fetch it again). Fetch a model with "
        "cacheblend-fetch-model NAME (installed next to cacheblend; scripts/fetch-model.sh in a "
        "source tree).",
    };
    return s;
}

struct row {
    cbl_x_registry_model m;
    std::string path;
    bool present = false;  // a regular file is there
    uint64_t size = 0;     // its size when present
};

std::string take(char* s) {
    std::string r = s ? s : "";
    cbl_free(s);
    return r;
}

// "93.8 MiB", "1.04 GiB": three significant digits are enough to tell the models apart.
std::string human_size(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    if (u == 0) {
        std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(buf, sizeof(buf), v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v,
                      units[u]);
    }
    return buf;
}

std::string pad(std::string s, size_t n) {
    if (s.size() < n) s.resize(n, ' ');
    return s;
}

const char* presence(const row& r) {
    if (!r.present) return "no";
    return r.size == r.m.bytes ? "yes" : "wrong size";
}

void write_json(const std::string& folder, const std::string& default_path,
                const std::vector<row>& rows) {
    json_writer w(std::cout);
    w.begin_object();
    w.field("folder", folder);
    w.key("default");
    const row* def = nullptr;
    for (const row& r : rows) {
        if (r.m.is_default) def = &r;
    }
    if (def) {
        w.value(def->m.name);
    } else {
        w.null();
    }
    w.field("default_path", default_path);
    w.key("models").begin_array();
    for (const row& r : rows) {
        w.begin_object();
        w.field("name", r.m.name);
        w.field("file", r.m.file);
        w.field("path", r.path);
        w.field("bytes", r.m.bytes);
        w.field("sha256", r.m.sha256);
        w.field("licence", r.m.licence);
        w.field("description", r.m.description);
        w.field("default", r.m.is_default);
        w.field("present", r.present);
        w.field("size_ok", r.present && r.size == r.m.bytes);
        w.key("size");
        if (r.present) {
            w.value(r.size);
        } else {
            w.null();
        }
        w.end_object();
    }
    w.end_array();
    w.end_object();
    std::cout << "\n";
}

void write_human(const std::string& folder, const std::string& default_path,
                 const std::vector<row>& rows) {
    size_t name_w = 4;
    for (const row& r : rows) {
        name_w = std::max(name_w, std::string(r.m.name).size() + 2);  // room for " *"
    }
    std::cout << pad("NAME", name_w) << "  " << pad("PRESENT", 10) << "  " << pad("SIZE", 9) << "  "
              << pad("LICENCE", 10) << "  FILE\n";
    for (const row& r : rows) {
        std::string name = std::string(r.m.name) + (r.m.is_default ? " *" : "");
        std::string size = human_size(r.m.bytes);
        if (r.present && r.size != r.m.bytes) size = human_size(r.size);
        std::cout << pad(name, name_w) << "  " << pad(presence(r), 10) << "  " << pad(size, 9)
                  << "  " << pad(r.m.licence, 10) << "  " << r.m.file << "\n";
        std::cout << "    " << r.m.description << "\n";
    }
    std::cout << "\n* the default model";
    if (const char* env = std::getenv("CBL_MODEL"); env && *env) {
        std::cout << "; CBL_MODEL overrides it: " << default_path;
    }
    std::cout
        << "\nfolder: " << folder << "\n"
        << "fetch a model: cacheblend-fetch-model NAME; use it: --model NAME or CBL_MODEL=NAME\n";
}

}  // namespace

int run_models(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    char* s = nullptr;
    check(cbl_x_model_cache_dir(&s));
    const std::string folder = take(s);
    check(cbl_x_default_model_path(&s));
    const std::string default_path = take(s);

    std::vector<row> rows(cbl_x_model_registry_count());
    for (size_t i = 0; i < rows.size(); ++i) {
        row& r = rows[i];
        cbl_x_registry_model_init(&r.m);
        check(cbl_x_model_registry_get(i, &r.m));
        // The cache file itself, not cbl_x_model_path(name): a file called like the model in the
        // working directory would win there, but this lists what the cache holds.
        r.path = folder + "/" + r.m.file;
        struct stat st {};
        if (::stat(r.path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
            r.present = true;
            r.size = static_cast<uint64_t>(st.st_size);
        }
    }
    if (a.has("json")) {
        write_json(folder, default_path, rows);
    } else {
        write_human(folder, default_path, rows);
    }
    return 0;
}

}  // namespace cacheblend::cli
