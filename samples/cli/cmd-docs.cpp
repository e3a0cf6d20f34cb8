// `cacheblend docs`: the documents of a data directory (uri, kind, chunks, stored KV, source size,
// modification time), optionally restricted by the retrieval filters, through the C ABI
// (cbl_runtime_documents). Read-only: a data directory that does not exist is an error.
#include <cstdio>
#include <ctime>
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
    static const command_spec s = [] {
        command_spec c{
            "docs",
            "docs --data DIR [options]",
            "List the documents of a data directory.",
            {
                data_flag(),
                model_flag(),
                kv_budget_flag(),
                {"json", "",
                 "print {\"documents\": [{uri, kind, collection, chunks, kv_chunks, "
                 "kv_bytes, source_bytes, modified, ingested_at}]}"},
            },
            0,
            "kv_chunks counts the chunks whose KV is stored (precomputed, or kept by a request) "
            "and kv_bytes their files' size; modified is the file's modification time when it "
            "was ingested (UTC), absent for documents added from memory; ingested_at is when "
            "the document was last (re)ingested (UTC). The filters select documents as search "
            "does.",
        };
        for (flag_spec& f : filter_flags()) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

// "2026-11-27T15:19:12Z" for seconds since the epoch; "" for 0 (no time known).
std::string utc_seconds(int64_t s) {
    if (s <= 0) return "";
    const std::time_t t = static_cast<std::time_t>(s);
    std::tm tm{};
    if (!::gmtime_r(&t, &tm)) return "";
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string utc_time(int64_t ns) { return utc_seconds(ns / 1000000000); }

// "512 B", "3.4 MiB": enough digits to compare documents at a glance (--json has the bytes).
std::string human_bytes(int64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

}  // namespace

int run_docs(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    const bool json = a.has("json");
    if (!a.has("data") || a.get("data")->empty()) throw usage_error("docs: --data DIR is required");
    const std::string data = *a.get("data");
    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");
    const doc_filter filter = parse_filter_flags(a, "docs");
    cbl_search_params sp;
    cbl_search_params_init(&sp);
    filter.apply_to(&sp);

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = data.c_str();
    if (!model.empty()) rp.model_path = model.c_str();
    rp.no_embedder = true;  // listing needs no embeddings: skip loading the embedder
    rp.kv_budget_bytes = parse_kv_budget(a);
    const runtime_ptr rt = open_existing_runtime(&rp);
    cbl_documents* raw = nullptr;
    check(cbl_runtime_documents(rt.get(), &sp, &raw));
    const documents_ptr docs(raw);
    std::vector<cbl_document_info> list(cbl_documents_count(docs.get()));
    for (size_t i = 0; i < list.size(); ++i) {
        cbl_document_info_init(&list[i]);
        check(cbl_documents_get(docs.get(), i, &list[i]));
    }

    if (json) {
        json_writer w(std::cout);
        w.begin_object().key("documents").begin_array();
        for (const cbl_document_info& d : list) {
            w.begin_object();
            w.field("uri", d.uri).field("kind", d.kind).field("collection", d.collection);
            w.field("chunks", d.n_chunks).field("kv_chunks", d.n_kv_chunks);
            w.field("kv_bytes", d.kv_bytes).field("source_bytes", d.source_bytes);
            if (d.mtime_ns > 0) w.field("modified", utc_time(d.mtime_ns));
            if (d.ingested_at > 0) w.field("ingested_at", utc_seconds(d.ingested_at));
            w.end_object();
        }
        w.end_array().end_object();
        std::cout << "\n";
        return 0;
    }
    for (const cbl_document_info& d : list) {
        std::printf("%s\n  %s, %lld chunks (%lld with KV, %s of KV), %lld bytes",
                    printable(d.uri).c_str(), *d.kind ? d.kind : "unknown kind",
                    static_cast<long long>(d.n_chunks), static_cast<long long>(d.n_kv_chunks),
                    human_bytes(d.kv_bytes).c_str(), static_cast<long long>(d.source_bytes));
        if (d.mtime_ns > 0) std::printf(", modified %s", utc_time(d.mtime_ns).c_str());
        if (d.ingested_at > 0) std::printf(", ingested %s", utc_seconds(d.ingested_at).c_str());
        if (*d.collection) std::printf(", collection %s", printable(d.collection).c_str());
        std::printf("\n");
    }
    std::printf("%zu document%s\n", list.size(), list.size() == 1 ? "" : "s");
    return 0;
}

}  // namespace cacheblend::cli
