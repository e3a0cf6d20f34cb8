// corpus::check and corpus::repair (`ingest --check`, `ingest --repair`): is the catalog a sound
// SQLite file with an FTS index that matches its text, does every KV file the catalog names read
// back whole, and do catalog, vector index and KV store agree. The catalog is the truth; the FTS
// index, the vector index and the KV files derive from it, so repair rebuilds or deletes those
// and never edits documents. A catalog SQLite itself finds damaged cannot be trusted to say what
// the rest should hold: repair then touches nothing and says to re-ingest into a new data dir.
#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_set>

#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "retrieval/corpus.h"

namespace cacheblend {

struct corpus::damage {
    consistency_report report;
    bool catalog_broken = false;       // PRAGMA integrity_check failed: trust nothing else
    bool fts_broken = false;           // the FTS index disagrees with the chunk text
    bool index_stale = false;          // vector index and catalog embeddings differ
    int64_t unembedded = 0;            // chunks without an embedding (with an embedder)
    std::vector<std::string> bad_kv;   // keys with a corrupt or foreign file, or malformed
    std::vector<chunk_key> orphans;    // files of the own store that no chunk references
    int64_t pending_deletes = 0;
};

namespace {

std::string plural(int64_t n, const char* one, const char* many) {
    return fmt("%lld %s", static_cast<long long>(n), n == 1 ? one : many);
}

}  // namespace

corpus::damage corpus::inspect_locked() {
    damage d;
    consistency_report& c = d.report;
    for (const std::string& line : cat_->integrity_problems()) {
        c.problems.push_back("catalog " + cat_->path() + " is damaged: " + line);
        d.catalog_broken = true;
    }
    if (d.catalog_broken) return d;  // its queries would fail or lie
    const std::string fts = cat_->fts_problem();
    if (!fts.empty()) {
        d.fts_broken = true;
        c.problems.push_back("the catalog's full-text index disagrees with the chunk text: " + fts);
    }

    c.documents = cat_->count_documents();
    c.chunks = cat_->count_chunks();
    const std::vector<int64_t> embedded = cat_->embedded_chunk_ids();
    if (index_) {
        const std::vector<int64_t> in_index = index_->ids();
        c.vectors = static_cast<int64_t>(in_index.size());
        std::vector<int64_t> missing, extra;
        std::set_difference(embedded.begin(), embedded.end(), in_index.begin(), in_index.end(),
                            std::back_inserter(missing));
        std::set_difference(in_index.begin(), in_index.end(), embedded.begin(), embedded.end(),
                            std::back_inserter(extra));
        if (!missing.empty()) {
            c.problems.push_back(fmt("%zu embedded chunks missing from the index", missing.size()));
        }
        if (!extra.empty()) {
            c.problems.push_back(fmt("%zu index vectors without a chunk", extra.size()));
        }
        d.index_stale = !missing.empty() || !extra.empty();
        if (p_.emb && static_cast<int64_t>(embedded.size()) != c.chunks) {
            d.unembedded = c.chunks - static_cast<int64_t>(embedded.size());
            c.problems.push_back(fmt("%lld chunks without an embedding",
                                     static_cast<long long>(d.unembedded)));
        }
    }

    std::map<std::string, int64_t> refs;  // KV key -> chunks holding it
    int64_t without_key = 0;
    for (const auto& [id, key] : cat_->chunk_kv_keys()) {
        if (key.empty()) {
            ++without_key;
        } else {
            ++refs[key];
        }
    }
    c.kv_keys = static_cast<int64_t>(refs.size());
    const std::vector<std::string> pending = cat_->pending_kv_deletes();
    d.pending_deletes = static_cast<int64_t>(pending.size());
    if (!pending.empty()) c.problems.push_back(fmt("%zu KV deletes pending", pending.size()));
    if (!p_.kv) return d;

    int64_t gone = 0;
    for (const auto& [key, n] : refs) {
        chunk_key k;
        if (!parse_chunk_key(key, &k)) {
            c.problems.push_back("malformed KV key '" + key + "' in the catalog");
            d.bad_kv.push_back(key);
            continue;
        }
        const kv_verify_result v = p_.kv->verify(k, nullptr);
        switch (v.status) {
            case kv_verify_status::ok: break;
            case kv_verify_status::missing: gone += n; break;  // a cache miss, not damage
            case kv_verify_status::corrupt:
            case kv_verify_status::foreign:
                c.problems.push_back(fmt("KV file of key %s is %s: ", key.c_str(),
                                         kv_verify_status_name(v.status)) + v.detail);
                d.bad_kv.push_back(key);
                break;
            case kv_verify_status::io_error:
                c.problems.push_back("KV file of key " + key + " cannot be read: " + v.detail);
                break;
        }
    }
    c.kv_uncached = without_key + gone;
    if (c.kv_uncached > 0) {
        c.notes.push_back(plural(c.kv_uncached, "chunk", "chunks") +
                          " without cached KV (evicted under the store's byte budget or never "
                          "computed; `ingest --precompute` computes them)");
    }

    if (!p_.kv_owned) return d;  // a shared store holds other data dirs' files too
    for (const chunk_key& k : p_.kv->keys()) {
        if (!refs.count(k.hex())) d.orphans.push_back(k);
    }
    c.kv_orphans = static_cast<int64_t>(d.orphans.size());
    if (d.orphans.empty()) return d;
    if (c.chunks == 0) {
        // Files without any chunk: the catalog was lost (a truncated catalog reads as empty).
        c.problems.push_back(
            "the catalog holds no chunks but the KV store " + p_.kv->dir() + " holds " +
            plural(c.kv_orphans, "chunk file", "chunk files") +
            ": the catalog was lost or emptied; re-ingest the documents (`ingest --repair` "
            "deletes the files)");
    } else {
        // Normal use leaves some: `ask --kv-format q8` on chunks precomputed as f16 re-keys
        // them, and sessions of the runtime store KV of any prompt. They are cache, not damage.
        c.notes.push_back(plural(c.kv_orphans, "KV file", "KV files") +
                          " that no chunk references (other KV formats or prompts; "
                          "`ingest --repair` deletes them)");
    }
    return d;
}

consistency_report corpus::check() {
    std::lock_guard<std::mutex> lock(write_mu_);
    const write_scope ws(*this, nullptr);  // a consistent view: no other writer midway
    return inspect_locked().report;
}

repair_report corpus::repair(const ingest_params& p) {
    std::lock_guard<std::mutex> lock(write_mu_);
    const write_scope ws(*this, &p);
    repair_report out;
    damage d = inspect_locked();
    if (d.catalog_broken) {
        // The damaged pages may be the FTS index's own, which its rebuild rewrites from the
        // chunk text. (REINDEX cannot help: it must read a damaged index to drop it.)
        try {
            cat_->rebuild_fts();
        } catch (const error&) {  // the damage is elsewhere: reported below
        }
        const std::vector<std::string> left = cat_->integrity_problems();
        if (!left.empty()) {
            out.not_repaired.push_back(
                "catalog " + cat_->path() + " is damaged (" + left.front() +
                "): its documents cannot be trusted or repaired; re-ingest them into a new data "
                "directory (--data NEW_DIR) and delete this one");
            return out;
        }
        out.repaired.push_back("rebuilt the catalog's damaged full-text index");
        d = inspect_locked();
    }
    if (d.fts_broken) {
        cat_->rebuild_fts();
        out.repaired.push_back("rebuilt the catalog's full-text index from the chunk text");
    }

    if (d.pending_deletes > 0) {
        delete_pending_kv(nullptr);
        out.repaired.push_back("finished " + plural(d.pending_deletes, "pending KV delete",
                                                    "pending KV deletes"));
    }
    if (!d.bad_kv.empty()) {
        for (const std::string& key : d.bad_kv) {
            chunk_key k;
            if (parse_chunk_key(key, &k)) p_.kv->remove(k);
            cat_->clear_kv_key(key);
        }
        out.repaired.push_back("deleted " + plural(static_cast<int64_t>(d.bad_kv.size()),
                                                   "damaged KV file", "damaged KV files") +
                               " and cleared their keys in the catalog");
    }
    if (!d.orphans.empty()) {
        for (const chunk_key& k : d.orphans) p_.kv->remove(k);
        out.repaired.push_back("deleted " + plural(static_cast<int64_t>(d.orphans.size()),
                                                   "KV file", "KV files") +
                               " that no chunk references");
        if (d.report.chunks == 0) {
            out.notes.push_back("the catalog holds no documents: re-ingest them");
        }
    }

    ingest_report r;
    if (p_.emb && d.unembedded > 0) {
        embed_missing(p, r);
        out.repaired.push_back("embedded " + plural(r.embedded, "chunk", "chunks"));
    }
    if (index_ && (d.index_stale || r.embedded > 0)) {
        set_index(build_vector_index(*cat_, p_.emb->dim(), p_.index));
        index_dirty_ = true;
        save_index_locked();
        out.repaired.push_back("rebuilt the vector index from the catalog (" +
                               plural(index_->size(), "vector", "vectors") + ")");
    }
    if (p.precompute_kv && p_.kv) {
        precompute_missing(p, r);
        if (r.kv_computed > 0) {
            out.repaired.push_back("computed " + plural(r.kv_computed, "chunk KV", "chunk KVs"));
        }
    }

    const consistency_report after = inspect_locked().report;
    out.not_repaired = after.problems;
    out.notes.insert(out.notes.end(), after.notes.begin(), after.notes.end());
    return out;
}

}  // namespace cacheblend
