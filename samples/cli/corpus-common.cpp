#include "corpus-common.h"

#include <sys/stat.h>

#include <cerrno>

#include "commands.h"
#include "model-common.h"
#include "core/error.h"
#include "core/file-io.h"
#include "retrieval/embedder.h"

namespace cacheblend::cli {

flag_spec data_flag() { return {"data", "DIR", "data directory (catalog, index, KV store)"}; }

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
