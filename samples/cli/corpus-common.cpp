#include "corpus-common.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "commands.h"
#include "model-common.h"
#include "core/error.h"
#include "core/file-io.h"
#include "retrieval/embedder.h"

namespace cacheblend::cli {

flag_spec data_flag() { return {"data", "DIR", "data directory (catalog, index, KV store)"}; }

namespace {

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

search_filter parse_filter_flags(const parsed_args& a, const std::string& cmd) {
    search_filter f;
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
        f.metadata.emplace_back(std::move(key), kv.substr(eq + 1));
    }
    return f;
}

cli_corpus open_cli_corpus(const parsed_args& a, const std::string& cmd) {
    if (!a.has("data")) throw usage_error(cmd + ": --data DIR is required");
    const std::string dir = *a.get("data");
    if (dir.empty()) throw usage_error(cmd + ": --data: empty path");
    cli_corpus c;
    c.vocab = load_model(a, true);
    corpus_params p;
    p.encode = tokenizer_encoder(c.vocab->vocab());
    p.tokenizer_id = c.vocab->name() + fmt(":%016llx",
                                           static_cast<unsigned long long>(c.vocab->fingerprint()));
    const std::string emb_path = default_embedder_path();
    struct stat st {};
    if (::stat(emb_path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        p.emb = load_bert_embedder(emb_path);
    } else {
        c.embedder_notice = "embedder not found at " + emb_path +
                            " (set CBL_EMBED_MODEL): BM25 only, dense search disabled";
    }
    kv_store_params kp;
    kp.dir = dir + "/kv";
    // The data directory must exist before the store makes its folder inside it.
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        throw error(status::io_write, "cannot create " + dir + ": " + errno_name(errno));
    }
    c.kv = kv_store::open(kp);
    p.kv = c.kv;
    c.docs = corpus::open(dir, std::move(p));
    return c;
}

}  // namespace cacheblend::cli
