// `cacheblend search`: hybrid (BM25 + dense, reciprocal-rank fusion), dense or BM25 retrieval
// over a data directory made by `ingest`, optionally restricted to documents by collection, uri
// prefix or metadata; prints hits with their citation ranges.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/error.h"
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
    search_params sp;
    sp.k = static_cast<int32_t>(a.get_int("k", 5, 1, 10000));
    if (!parse_search_mode(a.get_or("mode", "hybrid"), &sp.mode)) {
        throw usage_error("search: --mode must be hybrid, dense or bm25");
    }
    sp.filter = parse_filter_flags(a, "search");
    cli_corpus c = open_cli_corpus(a, "search");
    const search_result r = c.docs->search(a.positional()[0], sp);
    if (!r.notice.empty() && !json) {
        std::fprintf(stderr, "cacheblend: note: %s\n", r.notice.c_str());
    }

    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        w.field("mode", search_mode_name(r.mode));
        if (!r.notice.empty()) w.field("notice", r.notice);
        w.key("hits").begin_array();
        for (const search_hit& h : r.hits) {
            w.begin_object();
            w.field("uri", h.uri).field("chunk_id", h.chunk_id).field("start", h.start);
            w.field("end", h.end).field("score", h.score).field("text", h.text);
            w.end_object();
        }
        w.end_array().end_object();
        std::cout << "\n";
    } else {
        for (size_t i = 0; i < r.hits.size(); ++i) {
            const search_hit& h = r.hits[i];
            std::string snippet = h.text.substr(0, 160);
            for (char& ch : snippet) {
                if (ch == '\n') ch = ' ';
            }
            std::printf("%zu. %.4f  %s [%lld, %lld)\n   %s%s\n", i + 1, h.score, h.uri.c_str(),
                        static_cast<long long>(h.start), static_cast<long long>(h.end),
                        snippet.c_str(), h.text.size() > 160 ? "..." : "");
        }
        if (r.hits.empty()) std::printf("no hits\n");
    }
    return 0;
}

}  // namespace cacheblend::cli
