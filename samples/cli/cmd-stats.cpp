// `cacheblend stats`: what a data directory holds and costs on disk: documents, chunks, vectors,
// the catalog and index files, the KV store against its budget, and the free space left, through
// the C ABI (cbl_runtime_stats). Read-only: a data directory that does not exist is an error.
#include <cstdio>
#include <iostream>

#include "blend-common.h"
#include "cacheblend.h"
#include "capi-util.h"
#include "commands.h"
#include "corpus-common.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s{
        "stats",
        "stats --data DIR [options]",
        "Show the sizes of a data directory and its KV store against the budget.",
        {
            data_flag(),
            model_flag(),
            kv_budget_flag(),
            {"json", "", "print one JSON object (sizes in bytes)"},
        },
        0,
        "The KV budget shown is --kv-budget (default 8G): opening the store evicts the least "
        "recently used chunk KV past it, as every command that opens the store does.",
    };
    return s;
}

// "1.5 GiB", "512 B".
std::string human_bytes(uint64_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

}  // namespace

int run_stats(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (!a.has("data") || a.get("data")->empty()) throw usage_error("stats: --data DIR is required");
    const std::string data = *a.get("data");
    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = data.c_str();
    if (!model.empty()) rp.model_path = model.c_str();
    rp.kv_budget_bytes = parse_kv_budget(a);
    const runtime_ptr rt = open_existing_runtime(&rp);
    cbl_corpus_stats s;
    cbl_corpus_stats_init(&s);
    check(cbl_runtime_stats(rt.get(), &s));

    if (a.has("json")) {
        json_writer w(std::cout);
        w.begin_object().field("data_dir", data);
        w.field("documents", s.documents).field("chunks", s.chunks).field("vectors", s.vectors);
        w.field("catalog_bytes", s.catalog_bytes).field("index_bytes", s.index_bytes);
        w.field("kv_entries", s.kv_entries).field("kv_bytes", s.kv_bytes);
        w.field("kv_budget_bytes", s.kv_budget_bytes).field("disk_free_bytes", s.disk_free_bytes);
        w.end_object();
        std::cout << "\n";
        return 0;
    }
    const double used = s.kv_budget_bytes ? 100.0 * static_cast<double>(s.kv_bytes) /
                                                static_cast<double>(s.kv_budget_bytes)
                                          : 0;
    std::printf("data directory: %s\n", data.c_str());
    std::printf("documents: %lld\nchunks: %lld\nvectors: %lld\n",
                static_cast<long long>(s.documents), static_cast<long long>(s.chunks),
                static_cast<long long>(s.vectors));
    std::printf("catalog: %s\nindex: %s\n", human_bytes(s.catalog_bytes).c_str(),
                human_bytes(s.index_bytes).c_str());
    std::printf("kv store: %lld entries, %s of %s budget (%.1f%%)\n",
                static_cast<long long>(s.kv_entries), human_bytes(s.kv_bytes).c_str(),
                human_bytes(s.kv_budget_bytes).c_str(), used);
    std::printf("disk free: %s\n", human_bytes(s.disk_free_bytes).c_str());
    return 0;
}

}  // namespace cacheblend::cli
