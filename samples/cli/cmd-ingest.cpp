// `cacheblend ingest`: files and folders into a data directory (catalog + FAISS index, optional
// eager KV precompute), through the public C ABI only. Re-running is incremental: unchanged
// files are skipped by content hash, changed ones replaced, vanished ones removed; an interrupted
// run is finished by the next one.
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <utility>

#include "blend-common.h"
#include "cacheblend.h"
#include "capi-util.h"
#include "commands.h"
#include "ingest-progress.h"
#include "json-writer.h"
#include "sigint.h"

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
            kv_budget_flag(),
            kv_remote_flag(),
            {"chunk-tokens", "N", "chunk budget in model tokens (default 512)"},
            {"collection", "C", "collection name stored with the documents"},
            {"precompute", "", "compute and store each chunk's KV now"},
            {"follow-symlinks", "", "follow symlinks that stay inside the ingested folder"},
            {"remove", "URI", "remove a document (its absolute path) instead", true},
            {"check", "", "verify the catalog, the index and every KV file, and that they agree"},
            {"repair", "", "fix what --check finds (with --precompute: compute missing KV too)"},
            {"max-file-size", "BYTES",
             "skip files larger than this; K, M, G suffixes (x1024) (default 16M: ~4M tokens, a "
             "3000-page book; bigger text files are nearly always logs or dumps)"},
            {"max-file-seconds", "S",
             "abandon a file not committed after S seconds (nothing of it is kept) and go on "
             "with the next (default: no limit)"},
            {"threads", "N", "CPU threads (default: all cores)"},
            device_flag(),
            {"json", "", "print a JSON report"},
        },
        1 << 20,
        "Files that cannot be ingested (unreadable, invalid UTF-8, empty, too large, too slow, "
        "unsupported type) are skipped with a reason; the rest of the folder is ingested. Symlinks "
        "inside a folder are skipped unless --follow-symlinks is given, and never followed out of "
        "it. Ctrl-C stops after the document being committed, prints what was done and exits 130; "
        "running the same command again finishes the job. --check and --repair exit 1 when "
        "problems remain.",
    };
    return s;
}

struct ingest_log {
    ingest_progress* view = nullptr;
    std::vector<std::pair<std::string, std::string>> skipped;  // (path, reason)
    std::vector<std::string> notices;
    bool told_wait = false;
};

bool on_progress(const cbl_progress* p, void* user) {
    auto* log = static_cast<ingest_log*>(user);
    const std::string phase = p->phase;
    if (phase == "skip") {
        log->skipped.emplace_back(p->current, p->message);
    } else if (phase == "notice") {
        log->notices.emplace_back(p->message);
    } else if (phase == "wait") {
        // One writer per data directory: say once why nothing moves.
        if (!log->told_wait) {
            std::fprintf(stderr, "ingest: waiting for another writer of this data directory (%s)\n",
                         p->current);
            log->told_wait = true;
        }
    } else {
        log->view->on(*p);
    }
    return !sigint_received();  // the CLI's Ctrl-C reaches the library as this false
}

// "1048576", "512K", "16M", "2G" (binary multiples).
int64_t parse_size(const std::string& flag, const std::string& s) {
    size_t digits = 0;
    while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
    const std::string unit = s.substr(digits);
    int shift = -1;
    if (unit.empty()) shift = 0;
    if (unit == "K" || unit == "k") shift = 10;
    if (unit == "M" || unit == "m") shift = 20;
    if (unit == "G" || unit == "g") shift = 30;
    if (digits == 0 || digits > 12 || shift < 0) {
        throw usage_error("--" + flag + ": expected BYTES with an optional K, M or G suffix, " +
                          "got '" + s + "'");
    }
    const int64_t v = std::stoll(s.substr(0, digits));
    if (v <= 0 || v > (INT64_MAX >> shift)) {
        throw usage_error("--" + flag + ": " + s + " is out of range");
    }
    return v << shift;
}

// Throws capi_error (exit 1) naming the first uri that is not a document of the data directory.
void require_documents(cbl_runtime* rt, const std::vector<std::string>& uris,
                       const std::string& data) {
    for (const std::string& uri : uris) {
        cbl_search_params only;  // the documents whose uri starts with it: is one exactly it?
        cbl_search_params_init(&only);
        only.uri_prefix = uri.c_str();
        cbl_documents* raw = nullptr;
        check(cbl_runtime_documents(rt, &only, &raw));
        const documents_ptr docs(raw);
        bool found = false;
        for (size_t i = 0; i < cbl_documents_count(docs.get()) && !found; ++i) {
            cbl_document_info d;
            cbl_document_info_init(&d);
            check(cbl_documents_get(docs.get(), i, &d));
            found = uri == d.uri;
        }
        if (!found) {
            throw capi_error(CBL_INVALID_ARG,
                             "ingest --remove: " + uri + " is not a document of " + data +
                                 " (nothing removed; documents are named by absolute path: see "
                                 "cacheblend docs --data " + data + ")");
        }
    }
}

void add(cbl_ingest_report* to, const cbl_ingest_report& r) {
    to->files_seen += r.files_seen;
    to->added += r.added;
    to->updated += r.updated;
    to->unchanged += r.unchanged;
    to->removed += r.removed;
    to->skipped += r.skipped;
    to->chunks_added += r.chunks_added;
    to->chunks_removed += r.chunks_removed;
    to->embedded += r.embedded;
    to->kv_computed += r.kv_computed;
    to->kv_deleted += r.kv_deleted;
}

}  // namespace

int run_ingest(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    const bool json = a.has("json");
    const std::vector<std::string> removes = a.get_all("remove");
    if (a.positional().empty() && removes.empty() && !a.has("check") && !a.has("repair")) {
        throw usage_error("ingest: give at least one PATH (or --remove URI / --check / --repair)");
    }
    if (!a.has("data") || a.get("data")->empty()) throw usage_error("ingest: --data DIR is required");
    const std::string data = *a.get("data");
    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");
    const std::string collection = a.get_or("collection", "");

    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.chunk_tokens = static_cast<int32_t>(a.get_int("chunk-tokens", 512, 8, 1 << 16));
    if (!collection.empty()) ip.collection = collection.c_str();
    ip.precompute_kv = a.has("precompute");
    ip.follow_symlinks = a.has("follow-symlinks");
    ingest_progress bar(!json);
    ingest_log log;
    log.view = &bar;
    ip.progress = on_progress;
    ip.progress_user_data = &log;
    if (a.has("max-file-size")) {
        ip.max_file_bytes = parse_size("max-file-size", a.get_or("max-file-size", ""));
    }
    ip.max_file_seconds = a.get_double("max-file-seconds", 0, 0, 1e9);

    // Every PATH before any work: a mistyped one ingests nothing (the library refuses it too,
    // but only when its turn comes, after the paths before it were committed).
    for (const std::string& path : a.positional()) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) {
            throw capi_error(CBL_IO, "ingest: cannot access " + path + ": " +
                                         std::strerror(errno) + " (nothing ingested)");
        }
    }

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = data.c_str();
    if (!model.empty()) rp.model_path = model.c_str();
    rp.n_threads = static_cast<int32_t>(a.get_int("threads", 0, 0, 1024));
    const std::string device = device_arg(a);
    if (!device.empty()) rp.device = device.c_str();
    rp.kv_budget_bytes = parse_kv_budget(a);
    rp.kv_remote = kv_remote_of(a);
    cbl_runtime* rt_raw = nullptr;
    check(cbl_runtime_open(&rp, &rt_raw));
    const runtime_ptr rt(rt_raw);
    if (*cbl_runtime_notice(rt.get()) && !json) {
        std::fprintf(stderr, "cacheblend: note: %s\n", cbl_runtime_notice(rt.get()));
    }

    // Every uri first: one unknown uri (a typo, a relative path) removes nothing at all.
    require_documents(rt.get(), removes, data);
    cbl_ingest_report r;
    cbl_ingest_report_init(&r);
    for (const std::string& uri : removes) {
        cbl_ingest_report one;
        cbl_ingest_report_init(&one);
        check(cbl_runtime_delete_counted(rt.get(), uri.c_str(), &one));
        add(&r, one);
    }
    const sigint_guard sigint;
    bool interrupted = false;
    for (const std::string& path : a.positional()) {
        cbl_ingest_report one;
        cbl_ingest_report_init(&one);
        const cbl_status st = cbl_runtime_ingest_path(rt.get(), path.c_str(), &ip, &one);
        add(&r, one);  // an aborted ingest still counts what it committed
        if (st == CBL_ABORTED && sigint_received()) {
            interrupted = true;
            break;
        }
        check(st);
    }
    // "repaired: ...", "not repaired: ..." and "note: ..." lines, in that order.
    std::vector<std::string> repaired, not_repaired, notes;
    if (a.has("repair")) {
        char* text = nullptr;
        check(cbl_runtime_repair(rt.get(), &ip, &text));
        if (text) {
            std::istringstream lines(text);
            cbl_free(text);
            for (std::string line; std::getline(lines, line);) {
                for (auto [prefix, to] : {std::pair{"repaired: ", &repaired},
                                          std::pair{"not repaired: ", &not_repaired},
                                          std::pair{"note: ", &notes}}) {
                    const std::string pre = prefix;
                    if (line.compare(0, pre.size(), pre) == 0) {
                        to->push_back(line.substr(pre.size()));
                    }
                }
            }
        }
    }
    bar.finish();

    std::vector<std::string> problems;
    if (a.has("check")) {
        char* text = nullptr;
        check(cbl_runtime_check(rt.get(), &text));
        if (text) {
            std::istringstream lines(text);
            cbl_free(text);
            for (std::string line; std::getline(lines, line);) problems.push_back(line);
        }
    }
    cbl_corpus_stats cs;
    cbl_corpus_stats_init(&cs);
    check(cbl_runtime_stats(rt.get(), &cs));

    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        w.field("files_seen", r.files_seen).field("added", r.added).field("updated", r.updated);
        w.field("unchanged", r.unchanged).field("removed", r.removed);
        w.field("chunks_added", r.chunks_added).field("chunks_removed", r.chunks_removed);
        w.field("embedded", r.embedded).field("kv_computed", r.kv_computed);
        w.field("kv_deleted", r.kv_deleted).field("interrupted", interrupted);
        w.key("skipped").begin_array();
        for (const auto& [path, why] : log.skipped) {
            w.begin_object().field("path", path).field("reason", why).end_object();
        }
        w.end_array();
        w.key("notices").begin_array();
        if (*cbl_runtime_notice(rt.get())) w.value(std::string(cbl_runtime_notice(rt.get())));
        for (const std::string& n : log.notices) w.value(n);
        w.end_array();
        w.field("documents", cs.documents).field("chunks", cs.chunks);
        if (a.has("check")) {
            w.key("check").begin_object();
            w.field("kv_entries", cs.kv_entries);
            w.key("problems").begin_array();
            for (const std::string& p : problems) w.value(p);
            w.end_array().end_object();
        }
        if (a.has("repair")) {
            w.key("repair").begin_object();
            for (auto [name, items] : {std::pair{"repaired", &repaired},
                                       std::pair{"not_repaired", &not_repaired},
                                       std::pair{"notes", &notes}}) {
                w.key(name).begin_array();
                for (const std::string& s : *items) w.value(s);
                w.end_array();
            }
            w.end_object();
        }
        w.end_object();
        std::cout << "\n";
    } else {
        std::printf("%lld added, %lld updated, %lld unchanged, %lld removed, %lld skipped; "
                    "%lld chunks added, %lld removed",
                    static_cast<long long>(r.added), static_cast<long long>(r.updated),
                    static_cast<long long>(r.unchanged), static_cast<long long>(r.removed),
                    static_cast<long long>(log.skipped.size()),
                    static_cast<long long>(r.chunks_added),
                    static_cast<long long>(r.chunks_removed));
        if (r.embedded) std::printf("; %lld embedded", static_cast<long long>(r.embedded));
        if (r.kv_computed) std::printf("; %lld KV computed", static_cast<long long>(r.kv_computed));
        if (r.kv_deleted) std::printf("; %lld KV deleted", static_cast<long long>(r.kv_deleted));
        std::printf("\ncatalog: %lld documents, %lld chunks\n", static_cast<long long>(cs.documents),
                    static_cast<long long>(cs.chunks));
        for (const auto& [path, why] : log.skipped) {
            std::printf("skipped %s: %s\n", printable(path).c_str(), why.c_str());
        }
        if (a.has("repair")) {
            std::printf("repair: %s\n", !not_repaired.empty() ? "PROBLEMS LEFT"
                                         : repaired.empty()   ? "nothing to repair"
                                                              : "done");
            for (const std::string& s : repaired) std::printf("  repaired: %s\n", s.c_str());
            for (const std::string& s : not_repaired) {
                std::printf("  not repaired: %s\n", s.c_str());
            }
            for (const std::string& s : notes) std::printf("  note: %s\n", s.c_str());
        }
        if (a.has("check")) {
            std::printf("check: %s\n", problems.empty() ? "consistent" : "PROBLEMS");
            for (const std::string& p : problems) std::printf("  %s\n", p.c_str());
        }
    }
    if (interrupted) {
        // Not an error line: the documents above are committed, and rerunning finishes the job.
        std::fprintf(stderr,
                     "cacheblend: interrupted: %lld documents committed before the stop; run the "
                     "same command again to finish\n",
                     static_cast<long long>(r.added + r.updated));
        return 130;  // 128 + SIGINT, as a shell reports a Ctrl-C
    }
    return (a.has("check") && !problems.empty()) || !not_repaired.empty() ? 1 : 0;
}

}  // namespace cacheblend::cli
