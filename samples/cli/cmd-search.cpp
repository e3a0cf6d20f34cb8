// `cacheblend search`: hybrid (BM25 + dense, reciprocal-rank fusion), dense or BM25 retrieval
// over a data directory made by `ingest`, optionally restricted to documents by collection, uri
// prefix or metadata; prints hits with their citation ranges. Through the C ABI (cbl_runtime).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cacheblend.h"
#include "blend-common.h"
#include "capi-util.h"
#include "commands.h"
#include "corpus-common.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s = [] {
        command_spec c{
            "search",
            "search --data DIR QUERY [options]",
            "Retrieve the chunks that best match QUERY.",
            {
                data_flag(),
                model_flag(),
                kv_budget_flag(),
                {"k", "K", "number of hits (default 5)"},
                {"mode", "MODE", "hybrid (default), dense or bm25"},
                {"json", "", "print {\"hits\": [{uri, chunk_id, start, end, score, text}]}"},
            },
            1,
            "start/end are byte offsets into the source file. Without an embedder, hybrid search "
            "runs as BM25 and says so. The filters apply to both retrievers before fusion.",
        };
        for (flag_spec& f : filter_flags()) c.flags.push_back(std::move(f));
        return c;
    }();
    return s;
}

}  // namespace

int run_search(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (a.positional().size() != 1) throw usage_error("search: give exactly one QUERY");
    const bool json = a.has("json");
    cbl_search_params sp;
    cbl_search_params_init(&sp);
    sp.k = static_cast<int32_t>(a.get_int("k", 5, 1, 10000));
    sp.mode = parse_enum(CBL_NAMES_SEARCH, "mode", a.get_or("mode", "hybrid"));
    const doc_filter filter = parse_filter_flags(a, "search");
    filter.apply_to(&sp);
    if (!a.has("data")) throw usage_error("search: --data DIR is required");
    const std::string data = *a.get("data");
    if (data.empty()) throw usage_error("search: --data: empty path");
    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = data.c_str();
    if (!model.empty()) rp.model_path = model.c_str();
    rp.kv_budget_bytes = parse_kv_budget(a);
    const runtime_ptr rt = open_existing_runtime(&rp);
    cbl_results* r_raw = nullptr;
    check(cbl_runtime_search(rt.get(), a.positional()[0].c_str(), &sp, &r_raw));
    const results_ptr results(r_raw);
    const std::string notice = cbl_results_notice(results.get());
    if (!notice.empty() && !json) std::fprintf(stderr, "cacheblend: note: %s\n", notice.c_str());
    std::vector<cbl_hit> hits(cbl_results_count(results.get()));
    for (size_t i = 0; i < hits.size(); ++i) {
        cbl_hit_init(&hits[i]);
        check(cbl_results_hit(results.get(), i, &hits[i]));
    }

    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        w.field("mode", std::string(search_name(cbl_results_mode(results.get()))));
        if (!notice.empty()) w.field("notice", notice);
        w.key("hits").begin_array();
        for (const cbl_hit& h : hits) {
            w.begin_object();
            w.field("uri", std::string(h.uri)).field("chunk_id", h.chunk_id).field("start", h.start);
            w.field("end", h.end).field("score", h.score);
            if (h.page > 0) w.field("page", static_cast<int64_t>(h.page));
            if (h.heading && *h.heading) w.field("heading", std::string(h.heading));
            w.field("text", std::string(h.text, h.text_len));
            w.end_object();
        }
        w.end_array().end_object();
        std::cout << "\n";
    } else {
        for (size_t i = 0; i < hits.size(); ++i) {
            const cbl_hit& h = hits[i];
            std::string snippet(h.text, std::min<size_t>(h.text_len, 160));
            for (char& ch : snippet) {
                if (ch == '\n') ch = ' ';
            }
            std::string where;
            if (h.page > 0) where += " page " + std::to_string(h.page);
            if (h.heading && *h.heading) where += std::string(" \"") + h.heading + "\"";
            std::printf("%zu. %.4f  %s [%lld, %lld)%s\n   %s%s\n", i + 1, h.score, h.uri,
                        static_cast<long long>(h.start), static_cast<long long>(h.end),
                        where.c_str(), snippet.c_str(), h.text_len > 160 ? "..." : "");
        }
        if (hits.empty()) std::printf("no hits\n");
    }
    return 0;
}

}  // namespace cacheblend::cli
