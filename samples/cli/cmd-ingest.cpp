// `cacheblend ingest`: files and folders into a data directory (catalog + FAISS index, optional
// eager KV precompute). Re-running is incremental: unchanged files are skipped by content hash,
// changed ones replaced, vanished ones removed; an interrupted run is finished by the next one.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "model-common.h"
#include "core/blend.h"
#include "core/error.h"
#include "core/rag-prompt.h"
#include "core/session.h"
#include "corpus-common.h"
#include "json-writer.h"
#include "progress-bar.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s{
        "ingest",
        "ingest --data DIR PATH... [options]",
        "Chunk, embed and index documents (.txt, .md, .html) from files and folders.",
        {
            data_flag(),
            model_flag(),
            {"chunk-tokens", "N", "chunk budget in model tokens (default 512)"},
            {"collection", "C", "collection name stored with the documents"},
            {"precompute", "", "compute and store each chunk's KV now (needs the full model)"},
            {"remove", "URI", "remove a document (its absolute path) instead", true},
            {"check", "", "verify that catalog, index and KV store agree"},
            {"json", "", "print a JSON report"},
        },
        1 << 20,
        "Files that cannot be ingested (unreadable, invalid UTF-8, empty, too large, unsupported "
        "type) are skipped with a reason; the rest of the folder is ingested.",
    };
    return s;
}

}  // namespace

int run_ingest(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    const bool json = a.has("json");
    const std::vector<std::string> removes = a.get_all("remove");
    if (a.positional().empty() && removes.empty() && !a.has("check")) {
        throw usage_error("ingest: give at least one PATH (or --remove URI / --check)");
    }
    cli_corpus c = open_cli_corpus(a, "ingest");
    if (!c.embedder_notice.empty() && !json) {
        std::fprintf(stderr, "cacheblend: note: %s\n", c.embedder_notice.c_str());
    }

    ingest_params p;
    p.chunking.max_tokens = static_cast<int32_t>(a.get_int("chunk-tokens", 512, 8, 1 << 16));
    p.collection = a.get_or("collection", "");
    progress_bar bar("ingest", 1, !json);
    p.progress = [&](const ingest_progress& pr) {
        bar.set_label(pr.phase);
        if (pr.total > 0) bar.update(pr.done * 100 / pr.total);
        return true;
    };

    // Eager KV: the same preamble and chunk formatting as `ask` (default_rag_prompt), so the keys
    // stored here are the ones a later request looks up.
    std::shared_ptr<const model> full;
    std::unique_ptr<session> sess;
    std::unique_ptr<blend_engine> engine;
    if (a.has("precompute")) {
        full = load_model(a, false);
        sess = std::make_unique<session>(full);
        engine = std::make_unique<blend_engine>(*sess, c.kv);
        p.precompute_kv = [&](const chunk_info& ch) {
            const blend_request req =
                build_blend_request(*full, default_rag_prompt({ch.text}, "?"));
            engine->precompute_chunk(req.preamble, req.chunks[0]);
            return engine->key_of(req.preamble, req.chunks[0]).hex();
        };
    }

    int64_t removed = 0;
    for (const std::string& uri : removes) removed += c.docs->remove(uri) ? 1 : 0;
    ingest_report r;
    if (!a.positional().empty()) r = c.docs->ingest_paths(a.positional(), p);
    r.removed += removed;
    bar.finish();
    consistency_report chk;
    if (a.has("check")) chk = c.docs->check();
    const int64_t n_docs = c.docs->cat().count_documents();
    const int64_t n_chunks = c.docs->cat().count_chunks();

    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        w.field("files_seen", r.files_seen).field("added", r.added).field("updated", r.updated);
        w.field("unchanged", r.unchanged).field("removed", r.removed);
        w.field("chunks_added", r.chunks_added).field("chunks_removed", r.chunks_removed);
        w.field("embedded", r.embedded).field("kv_computed", r.kv_computed);
        w.field("kv_deleted", r.kv_deleted);
        w.key("skipped").begin_array();
        for (const auto& [path, why] : r.skipped_files) {
            w.begin_object().field("path", path).field("reason", why).end_object();
        }
        w.end_array();
        w.key("notices").begin_array();
        if (!c.embedder_notice.empty()) w.value(c.embedder_notice);
        for (const std::string& n : r.notices) w.value(n);
        w.end_array();
        w.field("documents", n_docs).field("chunks", n_chunks);
        if (a.has("check")) {
            w.key("check").begin_object();
            w.field("vectors", chk.vectors).field("kv_keys", chk.kv_keys);
            w.key("problems").begin_array();
            for (const std::string& s : chk.problems) w.value(s);
            w.end_array().end_object();
        }
        w.end_object();
        std::cout << "\n";
    } else {
        std::printf("%lld added, %lld updated, %lld unchanged, %lld removed, %lld skipped; "
                    "%lld chunks added, %lld removed",
                    static_cast<long long>(r.added), static_cast<long long>(r.updated),
                    static_cast<long long>(r.unchanged), static_cast<long long>(r.removed),
                    static_cast<long long>(r.skipped_files.size()),
                    static_cast<long long>(r.chunks_added),
                    static_cast<long long>(r.chunks_removed));
        if (r.kv_computed) std::printf("; %lld KV computed", static_cast<long long>(r.kv_computed));
        std::printf("\ncatalog: %lld documents, %lld chunks\n", static_cast<long long>(n_docs),
                    static_cast<long long>(n_chunks));
        for (const auto& [path, why] : r.skipped_files) {
            std::printf("skipped %s: %s\n", printable(path).c_str(), why.c_str());
        }
        if (a.has("check")) {
            std::printf("check: %s\n", chk.problems.empty() ? "consistent" : "PROBLEMS");
            for (const std::string& s : chk.problems) std::printf("  %s\n", s.c_str());
        }
    }
    return a.has("check") && !chk.problems.empty() ? 1 : 0;
}

}  // namespace cacheblend::cli
