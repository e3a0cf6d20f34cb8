#include "retrieval/corpus.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <unordered_set>

#include "core/kvstore/chunk-hash.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "core/util/file-io.h"
#include "core/util/private-path.h"
#include "retrieval/extract/sniff.h"

namespace cacheblend {

std::string corpus_catalog_path(const std::string& dir) { return dir + "/catalog.db"; }
std::string corpus_index_path(const std::string& dir) { return dir + "/vectors.faiss"; }

namespace {

// JSON string literal; invalid UTF-8 (odd file names) becomes U+FFFD so the JSON stays valid.
void json_str(std::string_view s, std::string& out) {
    out += '"';
    while (!s.empty()) {
        const size_t bad = find_invalid_utf8(s);
        const std::string_view ok = s.substr(0, bad);
        for (char c : ok) {
            const unsigned char u = static_cast<unsigned char>(c);
            if (c == '"' || c == '\\') {
                out += '\\';
                out += c;
            } else if (u < 0x20) {
                out += fmt("\\u%04x", u);
            } else {
                out += c;
            }
        }
        if (bad == std::string_view::npos) break;
        out += "\xEF\xBF\xBD";
        s.remove_prefix(bad + 1);
    }
    out += '"';
}

std::string sha256_hex(std::string_view data) {
    chunk_key k;
    sha256(data.data(), data.size(), k.bytes);
    return k.hex();
}

// A file the walk found and the identity it had when it was checked. read_file opens it without
// following a symlink and refuses a different file (one swapped in after the walk looked).
struct found_file {
    std::string path;       // as walked or named: reported, and stored as metadata "path"
    std::string open_path;  // what is opened: `path`, or a followed symlink's real target
    dev_t dev = 0;
    ino_t ino = 0;
};

// Reads a whole regular file through `io` (tests inject failures); returns an error reason
// instead of throwing (skipped files).
bool read_file(file_io& io, const found_file& f, int64_t limit, std::string* data, file_stat* st,
               std::string* why) {
    // O_NONBLOCK: a FIFO swapped in after the walk must not hang the run; O_NOFOLLOW: neither
    // may a symlink (the walk decided which links to follow and resolved them already).
    int fd = -1;
    if (const int err = io.open(f.open_path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0, &fd)) {
        *why = err == ELOOP ? "symbolic link (not followed)" : "cannot open: " + errno_name(err);
        return false;
    }
    const io_fd closer(&io, fd);
    if (const int err = io.fstat(fd, st)) {
        *why = "cannot stat: " + errno_name(err);
        return false;
    }
    if (!st->is_reg) {
        *why = "not a regular file";
        return false;
    }
    if (st->dev != static_cast<uint64_t>(f.dev) || st->ino != static_cast<uint64_t>(f.ino)) {
        *why = "replaced while being ingested (not the file that was checked)";
        return false;
    }
    if (st->size > static_cast<uint64_t>(limit)) {
        *why = fmt("too large: %llu bytes (limit %lld)", static_cast<unsigned long long>(st->size),
                   static_cast<long long>(limit));
        return false;
    }
    data->resize(static_cast<size_t>(st->size));
    size_t got = 0;
    if (const int err = io.pread(fd, data->data(), data->size(), 0, &got)) {
        *why = "read failed: " + errno_name(err);
        return false;
    }
    if (got != data->size()) {
        // Truncated (or emptied) while we read: half a file must not pass for the whole one.
        *why = fmt("changed while being read (%zu of %zu bytes read)", got, data->size());
        return false;
    }
    return true;
}

std::string absolute(const std::string& path) {
    char buf[PATH_MAX];
    if (::realpath(path.c_str(), buf)) return buf;
    if (!path.empty() && path[0] == '/') return path;
    if (::getcwd(buf, sizeof(buf))) return std::string(buf) + "/" + path;
    return path;
}

struct walk_state {
    std::string root;              // real path of the folder being walked
    bool follow_symlinks = false;  // ingest_params::follow_symlinks
    std::vector<found_file> files;
    std::vector<std::pair<std::string, std::string>> errors;
};

const char* const k_special_file = "not a regular file (FIFO, device or socket): not opened";

// A symlink met in a folder: followed only when asked and when its target stays inside the
// ingested folder, so a planted link cannot pull in a file from elsewhere (issue 17).
void add_link(const std::string& p, walk_state& w) {
    if (!w.follow_symlinks) {
        w.errors.emplace_back(p, "symbolic link (not followed)");
        return;
    }
    char buf[PATH_MAX];
    if (!::realpath(p.c_str(), buf)) {
        w.errors.emplace_back(p, "symbolic link to a missing target: " + errno_name(errno));
        return;
    }
    const std::string target = buf;
    if (target.compare(0, w.root.size(), w.root) != 0 || target.size() <= w.root.size() ||
        (w.root != "/" && target[w.root.size()] != '/')) {
        w.errors.emplace_back(p, "symbolic link leading outside " + w.root + " (not followed)");
        return;
    }
    struct stat st {};
    if (::stat(target.c_str(), &st) != 0) {
        w.errors.emplace_back(p, "cannot stat: " + errno_name(errno));
    } else if (S_ISDIR(st.st_mode)) {
        // The target is inside the folder: the walk reaches it (and avoids loops) on its own.
        w.errors.emplace_back(p, "symbolic link to a folder (not followed)");
    } else if (!S_ISREG(st.st_mode)) {
        w.errors.emplace_back(p, k_special_file);
    } else {
        w.files.push_back({p, target, st.st_dev, st.st_ino});
    }
}

// Sorted recursive listing; hidden names skipped, symlinks not followed (add_link), special
// files never opened.
void walk(const std::string& dir, walk_state& w, int depth) {
    if (depth > 64) {
        w.errors.emplace_back(dir, "folder nesting deeper than 64");
        return;
    }
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
        w.errors.emplace_back(dir, "cannot open folder: " + errno_name(errno));
        return;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
        const std::string p = dir + "/" + n;
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0) {
            w.errors.emplace_back(p, "cannot stat: " + errno_name(errno));
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            walk(p, w, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            w.files.push_back({p, p, st.st_dev, st.st_ino});
        } else if (S_ISLNK(st.st_mode)) {
            add_link(p, w);
        } else {
            w.errors.emplace_back(p, k_special_file);
        }
    }
}

void report_progress(const ingest_params& p, const char* phase, int64_t done, int64_t total,
                     const std::string& current) {
    if (!p.progress) return;
    ingest_progress pr;
    pr.phase = phase;
    pr.done = done;
    pr.total = total;
    pr.current = current;
    if (!p.progress(pr)) {
        throw error(status::aborted, "ingest: stopped: the progress callback returned false");
    }
}

// A file past ingest_params::max_file_seconds: not an error of the run, the file is skipped.
struct file_too_slow {
    std::string why;
};

// Chunks embedded per call inside one document: each batch is a progress point (and a time
// check), so a big file reports movement every few seconds instead of once at the end.
constexpr size_t k_embed_batch = 32;

}  // namespace

struct corpus::doc_input {
    std::string uri;
    std::string source;  // bytes
    doc_kind kind = doc_kind::text;
    std::string metadata;
    int64_t mtime_ns = 0;
};

// On a normal exit every catalog change since sync_index_locked() was ours and mirrored in the
// index; after an error one may be half done, so the index is reloaded before its next use.
corpus::write_scope::write_scope(corpus& c, const ingest_params* p)
    : c_(c), lock_(c.lock_writer(p)), exceptions_(std::uncaught_exceptions()) {
    c_.sync_index_locked();
}

corpus::write_scope::~write_scope() {
    if (std::uncaught_exceptions() > exceptions_) {
        c_.index_version_ = -1;
        return;
    }
    try {
        c_.index_version_ = c_.cat_->vector_version();
    } catch (...) {
        c_.index_version_ = -1;
    }
}

corpus::~corpus() {
    try {
        std::lock_guard<std::mutex> lock(write_mu_);
        // Only an index that mirrors the catalog is saved, and only under the writer lock:
        // otherwise the next opener rebuilds it from the catalog.
        if (index_ && index_dirty_) {
            const std::unique_ptr<writer_lock> wl = writer_lock::try_acquire(dir_);
            if (wl && cat_->vector_version() == index_version_) save_index_locked();
        }
    } catch (...) {  // a destructor must not throw; the index is rebuilt on the next open
    }
}

std::unique_ptr<corpus> corpus::open(const std::string& dir, corpus_params p) {
    if (!p.encode) throw error(status::invalid_arg, "corpus: a tokenizer (encode) is required");
    if (dir.empty()) throw error(status::invalid_arg, "corpus: empty data directory");
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        throw error(status::io_write, "corpus: cannot create " + dir + ": " + errno_name(errno));
    }
    // Ours when we just made it (0700); a pre-existing one others can write is refused.
    require_private_path("data directory", dir, true);
    require_private_path("vector index", corpus_index_path(dir), false);
    std::unique_ptr<corpus> c(new corpus());
    c->dir_ = dir;
    c->p_ = std::move(p);
    c->io_ = c->p_.io ? c->p_.io : posix_file_io();
    c->cat_ = catalog::open(corpus_catalog_path(dir));
    c->index_path_ = corpus_index_path(dir);
    if (c->p_.emb) {
        const std::string id = c->p_.emb->id();
        const std::string dim = std::to_string(c->p_.emb->dim());
        if (c->cat_->get_meta("embedder_id") != id || c->cat_->get_meta("embed_dim") != dim) {
            // A first open or another embedder: a write, so under the writer lock (re-read there).
            const std::unique_ptr<writer_lock> wl = writer_lock::acquire(dir);
            const auto old_id = c->cat_->get_meta("embedder_id");
            const auto old_dim = c->cat_->get_meta("embed_dim");
            if ((old_id && *old_id != id) || (old_dim && *old_dim != dim)) {
                // Vectors of another model are meaningless here: drop them; ingest re-embeds.
                c->cat_->clear_embeddings();
            }
            c->cat_->set_meta("embedder_id", id);
            c->cat_->set_meta("embed_dim", dim);
        }
        const int64_t v = c->cat_->vector_version();
        bool rebuilt = false;
        c->set_index(c->load_index(v, &rebuilt));
        c->index_version_ = v;
        c->index_dirty_ = rebuilt;
        if (rebuilt) {
            // Saved only when no writer is busy and the catalog has not moved since v (a reader
            // must not stamp a version its contents may not match).
            const std::unique_ptr<writer_lock> wl = writer_lock::try_acquire(dir);
            try {
                if (wl && c->cat_->vector_version() == v) c->save_index_locked();
            } catch (const error&) {
                // The index is a cache: search works from the rebuild. It stays dirty, so the next
                // ingest's save reports why (e.g. a folder at vectors.faiss, by path).
            }
        }
    }
    return c;
}

std::unique_ptr<writer_lock> corpus::lock_writer(const ingest_params* p) {
    writer_lock::wait_fn wait;
    if (p && p->progress) {
        wait = [p](const std::string& holder, bool) {
            ingest_progress pr;
            pr.phase = "wait";
            pr.current = holder;
            return p->progress(pr);
        };
    }
    return writer_lock::acquire(dir_, wait);
}

std::shared_ptr<vector_index> corpus::load_index(int64_t v, bool* rebuilt) const {
    std::string why;
    std::unique_ptr<vector_index> idx =
        vector_index::load(index_path_, p_.emb->dim(), p_.index, v, &why);
    if (idx && idx->wants_rebuild()) idx.reset();
    *rebuilt = !idx;
    if (!idx) idx = build_vector_index(*cat_, p_.emb->dim(), p_.index);
    return std::shared_ptr<vector_index>(std::move(idx));
}

void corpus::set_index(std::shared_ptr<vector_index> idx) {
    std::lock_guard<std::mutex> lock(index_mu_);
    index_ = std::move(idx);
}

std::shared_ptr<vector_index> corpus::index_snapshot() const {
    std::lock_guard<std::mutex> lock(index_mu_);
    return index_;
}

std::shared_ptr<const vector_index> corpus::index() const { return index_snapshot(); }

void corpus::sync_index_locked() {
    remove_stale_temp_files();
    if (!p_.emb) return;
    const int64_t v = cat_->vector_version();
    if (index_ && v == index_version_) return;
    // Another process wrote since we last looked (or our last write failed half way).
    bool rebuilt = false;
    set_index(load_index(v, &rebuilt));
    index_version_ = v;
    index_dirty_ = rebuilt;
}

void corpus::refresh_index_if_stale() const {
    if (!p_.emb) return;
    // A write in this process keeps the index current itself (and holds write_mu_ meanwhile).
    std::unique_lock<std::mutex> lk(write_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return;
    const int64_t v = cat_->vector_version();
    if (v == index_version_) return;
    bool rebuilt = false;
    auto* self = const_cast<corpus*>(this);  // the index is a cache of the catalog
    self->set_index(load_index(v, &rebuilt));
    // Built without the writer lock, it may hold rows newer than v: then v is merely old and
    // the next search reloads again; never the other way round.
    index_version_ = v;
}

void corpus::remove_stale_temp_files() const {
    // Under the writer lock no one else is writing a temp file: any left is a dead writer's.
    DIR* d = ::opendir(dir_.c_str());
    if (!d) return;
    const std::string prefix = "vectors.faiss.tmp";
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d)) {
        if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) {
            stale.emplace_back(e->d_name);
        }
    }
    ::closedir(d);
    for (const std::string& n : stale) ::unlink((dir_ + "/" + n).c_str());
}

std::string corpus::chunker_id(const chunker_params& c) const {
    return fmt("max_tokens=%d;para_share=%.3f;", c.max_tokens, c.paragraph_min_share) +
           "tokenizer=" + p_.tokenizer_id;
}

bool corpus::ingest_one(const doc_input& in, const ingest_params& p, ingest_report& r) {
    const auto start = std::chrono::steady_clock::now();
    // Progress within the document, and the per-file time limit checked at the same points.
    const auto step = [&](const char* phase, int64_t done, int64_t total) {
        report_progress(p, phase, done, total, in.uri);
        if (p.max_file_seconds <= 0) return;
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        if (took.count() > p.max_file_seconds) {
            throw file_too_slow{fmt("took longer than %g s (max_file_seconds; nothing committed)",
                                    p.max_file_seconds)};
        }
    };
    const std::string hash = sha256_hex(in.source);
    const std::string chunker = chunker_id(p.chunking);
    const std::optional<document_info> old = cat_->find_document(in.uri);
    if (old && old->content_hash == hash && old->chunker == chunker &&
        old->collection == p.collection) {
        ++r.unchanged;
        return false;
    }
    extract_limits lim;
    lim.max_bytes = p.max_document_bytes;  // also bounds what a DOCX/ODT may inflate to
    // Between pages and parts: the per-file time limit also stops a slow PDF.
    lim.check = [&] { step("chunk", 0, static_cast<int64_t>(in.source.size())); };
    const extracted_text ex = extract_text(in.source, in.kind, lim);  // throws invalid_arg
    // A PDF's pages are hard cuts, so each chunk cites one page.
    const std::vector<text_chunk> chunks =
        chunk_text_within(ex.text, ex.page_starts(), p_.encode, p.chunking,
                          [&](size_t done, size_t total) {
                              step("chunk", static_cast<int64_t>(done),
                                   static_cast<int64_t>(total));
                          });
    if (chunks.empty()) {
        throw error(status::invalid_arg, "empty document (no text)");
    }
    std::vector<new_chunk> rows(chunks.size());
    std::vector<std::string> texts(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
        const text_chunk& c = chunks[i];
        rows[i].text = ex.text.substr(c.begin, c.end - c.begin);
        rows[i].start = ex.source_begin(c.begin);
        rows[i].end = ex.source_end(c.end);
        rows[i].tokens = c.tokens;
        if (const text_section* sec = ex.section_at(c.begin)) {
            rows[i].page = sec->page;
            rows[i].heading = sec->heading;
        }
        texts[i] = rows[i].text;
    }
    if (p_.emb) {
        const size_t dim = static_cast<size_t>(p_.emb->dim());
        const auto n = static_cast<int64_t>(rows.size());
        for (size_t b = 0; b < rows.size(); b += k_embed_batch) {
            step("embed", static_cast<int64_t>(b), n);
            const size_t e = std::min(rows.size(), b + k_embed_batch);
            const std::vector<std::string> batch(texts.begin() + static_cast<std::ptrdiff_t>(b),
                                                 texts.begin() + static_cast<std::ptrdiff_t>(e));
            std::vector<float> v;
            p_.emb->embed(batch, v);
            if (v.size() != dim * batch.size()) {
                throw error(status::internal,
                            "ingest: embedder returned the wrong number of floats");
            }
            for (size_t i = b; i < e; ++i) {
                const auto at = v.begin() + static_cast<std::ptrdiff_t>((i - b) * dim);
                rows[i].embedding.assign(at, at + static_cast<std::ptrdiff_t>(dim));
            }
        }
        step("embed", n, n);  // the last check before the commit
    }
    document_info d;
    d.uri = in.uri;
    d.content_hash = hash;
    d.mtime_ns = in.mtime_ns;
    d.size = static_cast<int64_t>(in.source.size());
    d.collection = p.collection;
    d.metadata = in.metadata;
    d.chunker = chunker;
    const replace_result res = cat_->replace_document(d, rows);
    if (index_) {
        index_->remove(res.removed);
        if (p_.emb) {
            std::vector<float> flat;
            for (const new_chunk& c : rows) flat.insert(flat.end(), c.embedding.begin(),
                                                        c.embedding.end());
            index_->add(res.added, flat.data());
        }
        index_dirty_ = true;
    }
    (old ? r.updated : r.added)++;
    r.chunks_added += static_cast<int64_t>(res.added.size());
    r.chunks_removed += static_cast<int64_t>(res.removed.size());
    if (p_.emb) r.embedded += static_cast<int64_t>(rows.size());
    if (p.after_commit) p.after_commit(in.uri);
    return true;
}

ingest_report corpus::ingest_paths(const std::vector<std::string>& paths, const ingest_params& p) {
    std::lock_guard<std::mutex> lock(write_mu_);
    const write_scope ws(*this, &p);
    ingest_report r;
    try {
        ingest_paths_locked(paths, p, r);
    } catch (const error& e) {
        if (e.code() != status::aborted) throw;
        // A stop comes between commits, so the index mirrors the catalog: save it, or the next
        // open rebuilds it from the catalog.
        try {
            save_index_locked();
        } catch (const error&) {  // the next writer rebuilds it
        }
        // What was committed before the stop stays committed: say so in the report.
        r.skipped = static_cast<int64_t>(r.skipped_files.size());
        throw ingest_aborted(e.what(), std::move(r));
    }
    return r;
}

void corpus::ingest_paths_locked(const std::vector<std::string>& paths, const ingest_params& p,
                                 ingest_report& r) {
    if (!p_.emb) r.notices.push_back("no embedder: chunks are stored for BM25 only");
    walk_state w;
    w.follow_symlinks = p.follow_symlinks;
    std::vector<std::string> dirs;
    for (const std::string& path : paths) {
        // stat, not lstat: a path the caller named may be a symlink (they chose to follow it).
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) {
            w.errors.emplace_back(path, "cannot access: " + errno_name(errno));
            continue;
        }
        const std::string abs = absolute(path);
        if (S_ISDIR(st.st_mode)) {
            dirs.push_back(abs);
            w.root = abs;
            walk(abs, w, 0);
        } else if (S_ISREG(st.st_mode)) {
            w.files.push_back({abs, abs, st.st_dev, st.st_ino});
        } else {
            w.errors.emplace_back(path, k_special_file);
        }
    }
    report_progress(p, "scan", 1, 1, "");
    std::set<std::string> seen;
    const int64_t total = static_cast<int64_t>(w.files.size());
    for (int64_t i = 0; i < total; ++i) {
        const found_file& ff = w.files[static_cast<size_t>(i)];
        const std::string& f = ff.path;
        report_progress(p, "ingest", i, total, f);
        doc_input in;
        in.uri = absolute(ff.open_path);
        // A followed symlink and its target (or a path named twice) are one document.
        if (!seen.insert(in.uri).second) continue;
        ++r.files_seen;
        file_stat st;
        std::string why;
        // The bytes come through the checked descriptor (read_file); every extractor parses
        // them from memory, so no library reopens the path (a swapped-in FIFO or link).
        if (!read_file(*io_, ff, p.max_document_bytes, &in.source, &st, &why) ||
            !detect_kind(f, in.source, &in.kind, &why)) {
            r.skipped_files.emplace_back(f, why);
            continue;
        }
        in.mtime_ns = st.mtime_ns;
        in.metadata = "{\"path\":";
        json_str(f, in.metadata);
        in.metadata += ",\"kind\":\"" + std::string(doc_kind_name(in.kind)) + "\"}";
        try {
            ingest_one(in, p, r);
        } catch (const file_too_slow& e) {
            r.skipped_files.emplace_back(f, e.why);  // the next files must not wait behind it
        } catch (const error& e) {
            if (e.code() != status::invalid_arg) throw;
            r.skipped_files.emplace_back(f, e.what());
            // A document that no longer yields text leaves the catalog with its old version.
            if (std::string(e.what()).rfind("empty document", 0) == 0 &&
                remove_locked(in.uri, &r)) {
                ++r.removed;
            }
        }
    }
    report_progress(p, "ingest", total, total, "");
    for (const auto& e : w.errors) r.skipped_files.push_back(e);
    if (p.prune_missing) {
        for (const std::string& d : dirs) {
            for (const document_info& doc : cat_->list_documents(d + "/")) {
                if (seen.count(doc.uri)) continue;
                struct stat st {};
                if (::stat(doc.uri.c_str(), &st) == 0) continue;  // still there (e.g. hidden)
                if (remove_locked(doc.uri, &r)) ++r.removed;
            }
        }
    }
    r.skipped = static_cast<int64_t>(r.skipped_files.size());
    finish_locked(p, r);
}

bool corpus::ingest_text(const std::string& uri, std::string_view text, doc_kind kind,
                         const std::string& metadata_json, const ingest_params& p,
                         ingest_report* report) {
    std::lock_guard<std::mutex> lock(write_mu_);
    const write_scope ws(*this, &p);
    ingest_report local;
    ingest_report& r = report ? *report : local;
    doc_input in;
    in.uri = uri;
    in.source.assign(text);
    in.kind = kind;
    in.metadata = metadata_json.empty() ? "{}" : metadata_json;
    if (static_cast<int64_t>(in.source.size()) > p.max_document_bytes) {
        throw error(status::invalid_arg, fmt("ingest: %s is too large: %zu bytes (limit %lld)",
                                             uri.c_str(), in.source.size(),
                                             static_cast<long long>(p.max_document_bytes)));
    }
    try {
        const bool changed = ingest_one(in, p, r);
        finish_locked(p, r);
        return changed;
    } catch (const file_too_slow& e) {
        throw ingest_aborted("ingest: " + uri + " " + e.why, r);
    } catch (const ingest_aborted&) {
        throw;
    } catch (const error& e) {
        if (e.code() != status::aborted) throw;
        throw ingest_aborted(e.what(), r);
    }
}

bool corpus::remove(const std::string& uri, ingest_report* report) {
    std::lock_guard<std::mutex> lock(write_mu_);
    const write_scope ws(*this, nullptr);
    const bool removed = remove_locked(uri, report);
    if (removed && report) ++report->removed;
    delete_pending_kv(report);
    save_index_locked();
    return removed;
}

bool corpus::remove_locked(const std::string& uri, ingest_report* r) {
    const std::vector<int64_t> ids = cat_->remove_document(uri);  // a document has >= 1 chunk
    if (r) r->chunks_removed += static_cast<int64_t>(ids.size());
    if (index_ && !ids.empty()) {
        index_->remove(ids);
        index_dirty_ = true;
    }
    return !ids.empty();
}

void corpus::finish_locked(const ingest_params& p, ingest_report& r) {
    if (p_.emb) embed_missing(p, r);
    if (p.precompute_kv) precompute_missing(p, r);
    delete_pending_kv(&r);
    if (index_ && index_->wants_rebuild()) {
        report_progress(p, "index", 0, 1, "");
        set_index(build_vector_index(*cat_, p_.emb->dim(), p_.index));
        index_dirty_ = true;
        r.notices.push_back("vector index rebuilt (too many removed vectors)");
    }
    save_index_locked();
}

void corpus::embed_missing(const ingest_params& p, ingest_report& r) {
    const size_t dim = static_cast<size_t>(p_.emb->dim());
    for (;;) {
        const std::vector<int64_t> ids = cat_->chunk_ids_without_embedding(64);
        if (ids.empty()) break;
        const std::vector<chunk_info> rows = cat_->get_chunks(ids);
        std::vector<std::string> texts;
        std::vector<int64_t> got;
        for (const chunk_info& c : rows) {
            texts.push_back(c.text);
            got.push_back(c.id);
        }
        std::vector<float> v;
        p_.emb->embed(texts, v);
        if (v.size() != dim * got.size()) {
            throw error(status::internal, "ingest: embedder returned the wrong number of floats");
        }
        cat_->set_embeddings(got, v);
        index_->add(got, v.data());
        index_dirty_ = true;
        r.embedded += static_cast<int64_t>(got.size());
        report_progress(p, "embed", r.embedded, r.embedded, "");
    }
}

void corpus::precompute_missing(const ingest_params& p, ingest_report& r) {
    int64_t last = 0;
    // Progress counts against the chunks without KV now, so a long precompute shows an ETA; the
    // pass over evicted files below raises the total when it finds some.
    int64_t total = r.kv_computed + cat_->count_chunks_without_kv();
    const int64_t before = r.kv_computed;
    // The phase's last report says it is done (done == total), so a view can close its line.
    const auto report_done = [&] {
        if (r.kv_computed > before) report_progress(p, "kv", r.kv_computed, r.kv_computed, "");
    };
    for (;;) {
        std::vector<int64_t> ids = cat_->chunk_ids_without_kv(256);
        // Ids at or below `last` failed to get a key (callback returned ""): do not loop on them.
        ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int64_t id) { return id <= last; }),
                  ids.end());
        if (ids.empty()) break;
        for (const chunk_info& c : cat_->get_chunks(ids)) {
            total = std::max(total, r.kv_computed + 1);
            report_progress(p, "kv", r.kv_computed, total, c.uri);
            const std::string key = p.precompute_kv(c);
            if (!key.empty()) cat_->set_kv_key(c.id, key);
            ++r.kv_computed;
            last = std::max(last, c.id);
        }
    }
    // Chunks whose key is set but whose file is gone (evicted under the store's byte budget, or
    // deleted by a repair) are not "without KV" to the catalog: find them through the store.
    // One chunk per key, one pass: under a small budget each computation may evict another
    // file, and looping until all are present would never end.
    if (!p_.kv) {
        report_done();
        return;
    }
    std::vector<int64_t> gone;
    std::unordered_set<std::string> seen;
    for (const auto& [id, key] : cat_->chunk_kv_keys()) {
        chunk_key k;
        if (key.empty() || !seen.insert(key).second) continue;
        if (!parse_chunk_key(key, &k) || !p_.kv->contains(k)) gone.push_back(id);
    }
    total = r.kv_computed + static_cast<int64_t>(gone.size());
    for (size_t at = 0; at < gone.size(); at += 256) {
        const std::vector<int64_t> batch(gone.begin() + static_cast<std::ptrdiff_t>(at),
                                         gone.begin() + static_cast<std::ptrdiff_t>(
                                                            std::min(gone.size(), at + 256)));
        for (const chunk_info& c : cat_->get_chunks(batch)) {
            report_progress(p, "kv", r.kv_computed, total, c.uri);
            const std::string key = p.precompute_kv(c);
            if (!key.empty() && key != c.kv_key) cat_->set_kv_key(c.id, key);
            ++r.kv_computed;
        }
    }
    report_done();
}

void corpus::delete_pending_kv(ingest_report* r) {
    for (const std::string& key : cat_->pending_kv_deletes()) {
        // Order matters for crashes: the file goes first, then the queue entry.
        if (cat_->kv_refcount(key) == 0 && p_.kv) {
            chunk_key k;
            if (parse_chunk_key(key, &k) && p_.kv->remove(k) && r) ++r->kv_deleted;
        }
        if (p_.kv || cat_->kv_refcount(key) > 0) cat_->drop_pending_kv_delete(key);
    }
}

void corpus::save_index_locked() {
    if (!index_ || !index_dirty_) return;
    // Under the writer lock every catalog change is mirrored in index_: its version is the
    // catalog's (stamping a version that included another writer's rows lost their vectors).
    index_->save(index_path_, cat_->vector_version());
    index_dirty_ = false;
}

void corpus::flush() {
    std::lock_guard<std::mutex> lock(write_mu_);
    const write_scope ws(*this, nullptr);
    delete_pending_kv(nullptr);
    save_index_locked();
}

search_result corpus::search(const std::string& query, const search_params& p) const {
    refresh_index_if_stale();
    const std::shared_ptr<vector_index> idx = index_snapshot();
    retriever rt(*cat_, p_.emb.get(), idx.get());
    return rt.search(query, p);
}

// check() and repair(): corpus-check.cpp

}  // namespace cacheblend
