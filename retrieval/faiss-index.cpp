#include "retrieval/faiss-index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>

#include "core/kvstore/chunk-hash.h"
#include "core/util/error.h"
#include "core/util/file-io.h"

namespace cacheblend {

namespace {

using idx_t = faiss::Index::idx_t;

constexpr char k_magic[8] = {'C', 'B', 'L', 'V', 'I', 'D', 'X', '\0'};
constexpr uint32_t k_file_version = 1;

// The whole index file, or false with a reason. Only a regular file is read: a FIFO must not
// hang every command, a directory must not fail it (an unusable file means a rebuild).
bool read_index_file(const std::string& path, std::string* data, std::string* why) {
    const std::shared_ptr<file_io> io = posix_file_io();
    int fd = -1;
    const int err = io->open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0, &fd);
    if (err != 0) {
        *why = err == ENOENT ? "no index file" : "cannot open: " + errno_name(err);
        return false;
    }
    io_fd f(io.get(), fd);
    file_stat st;
    if (io->fstat(fd, &st) != 0 || !st.is_reg) {
        *why = path + " is not a regular file";
        return false;
    }
    data->resize(static_cast<size_t>(st.size));
    size_t got = 0;
    if (const int e = io->pread(fd, data->data(), data->size(), 0, &got); e != 0) {
        *why = "read failed: " + errno_name(e);
        return false;
    }
    data->resize(got);
    return true;
}

faiss::IndexIDMap2* idmap(const std::unique_ptr<faiss::Index>& p) {
    return static_cast<faiss::IndexIDMap2*>(p.get());
}

void normalize(float* v, int32_t dim) {
    double s = 0;
    for (int32_t i = 0; i < dim; ++i) s += static_cast<double>(v[i]) * v[i];
    if (s <= 0) return;
    const float inv = static_cast<float>(1.0 / std::sqrt(s));
    for (int32_t i = 0; i < dim; ++i) v[i] *= inv;
}

std::unique_ptr<faiss::Index> factory_index(int32_t dim, const std::string& factory) {
    try {
        return std::unique_ptr<faiss::Index>(
            faiss::index_factory(dim, factory.c_str(), faiss::METRIC_INNER_PRODUCT));
    } catch (const std::exception& e) {
        throw error(status::invalid_arg, "vector index: bad factory string '" + factory + "': " +
                                             std::string(e.what()).substr(0, 200));
    }
}

// Vectors an untrained index needs before training (FAISS's k-means wants 39 per centroid and
// complains on stderr with fewer).
int64_t train_min(const faiss::Index* inner) {
    if (inner->is_trained) return 0;
    if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(inner)) {
        return static_cast<int64_t>(ivf->nlist) * 39;
    }
    return 10000;
}

template <typename T>
void put(std::string& out, const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
bool get(const std::string& in, size_t& off, T* v) {
    if (in.size() - off < sizeof(T)) return false;
    std::memcpy(v, in.data() + off, sizeof(T));
    off += sizeof(T);
    return true;
}

bool get_str(const std::string& in, size_t& off, std::string* s) {
    uint32_t n;
    if (!get(in, off, &n) || in.size() - off < n) return false;
    s->assign(in, off, n);
    off += n;
    return true;
}

}  // namespace

vector_index::vector_index(int32_t dim, const vector_index_params& p) : dim_(dim), p_(p) {
    if (dim <= 0) throw error(status::invalid_arg, fmt("vector index: bad dimension %d", dim));
    std::unique_ptr<faiss::Index> probe = factory_index(dim, p.factory);
    if (dynamic_cast<faiss::IndexIDMap*>(probe.get()) ||
        dynamic_cast<faiss::IndexIDMap2*>(probe.get())) {
        throw error(status::invalid_arg, "vector index: factory '" + p.factory +
                                             "' must not include IDMap (added here)");
    }
    // An index that must be trained starts as Flat and switches once enough vectors arrived.
    make_inner(probe->is_trained ? p.factory : "Flat");
}

vector_index::~vector_index() = default;

void vector_index::make_inner(const std::string& factory) {
    std::unique_ptr<faiss::Index> inner = factory_index(dim_, factory);
    if (auto* h = dynamic_cast<faiss::IndexHNSW*>(inner.get())) {
        h->hnsw.efSearch = p_.ef_search;
        h->hnsw.efConstruction = p_.ef_construction;
    }
    if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner.get())) {
        ivf->nprobe = static_cast<size_t>(std::max(1, p_.nprobe));
    }
    auto map = std::make_unique<faiss::IndexIDMap2>(inner.release());
    map->own_fields = true;
    index_ = std::move(map);
    active_factory_ = factory;
    removed_.clear();
}

void vector_index::cap_threads() const { omp_set_num_threads(std::max(1, p_.omp_threads)); }

void vector_index::add(const std::vector<int64_t>& ids, const float* vectors) {
    if (ids.empty()) return;
    std::vector<float> x(vectors, vectors + ids.size() * static_cast<size_t>(dim_));
    for (size_t i = 0; i < ids.size(); ++i) normalize(x.data() + i * dim_, dim_);
    std::unique_lock<std::shared_mutex> lock(mu_);
    cap_threads();
    try {
        if (active_factory_ != p_.factory) {
            // Still the Flat stand-in for an index that needs training: switch when possible.
            std::unique_ptr<faiss::Index> probe = factory_index(dim_, p_.factory);
            const int64_t total = index_->ntotal + static_cast<int64_t>(ids.size());
            if (total >= train_min(probe.get())) {
                auto* map = idmap(index_);
                const auto* flat = static_cast<const faiss::IndexFlat*>(map->index);
                std::vector<float> all(flat->get_xb(), flat->get_xb() + map->ntotal * dim_);
                std::vector<idx_t> all_ids(map->id_map.begin(), map->id_map.end());
                all.insert(all.end(), x.begin(), x.end());
                all_ids.insert(all_ids.end(), ids.begin(), ids.end());
                make_inner(p_.factory);
                const idx_t n = static_cast<idx_t>(all_ids.size());
                index_->train(n, all.data());
                index_->add_with_ids(n, all.data(), all_ids.data());
                return;
            }
        }
        std::vector<idx_t> fid(ids.begin(), ids.end());
        index_->add_with_ids(static_cast<idx_t>(fid.size()), x.data(), fid.data());
    } catch (const faiss::FaissException& e) {
        throw error(status::internal, std::string("vector index: add failed: ") + e.what());
    }
}

void vector_index::remove(const std::vector<int64_t>& ids) {
    if (ids.empty()) return;
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto* map = idmap(index_);
    if (dynamic_cast<faiss::IndexHNSW*>(map->index)) {
        for (int64_t id : ids) {
            if (map->rev_map.count(id)) removed_.insert(id);
        }
        return;
    }
    cap_threads();
    std::vector<idx_t> fid(ids.begin(), ids.end());
    faiss::IDSelectorBatch sel(fid.size(), fid.data());
    try {
        map->remove_ids(sel);
    } catch (const faiss::FaissException& e) {
        throw error(status::internal, std::string("vector index: remove failed: ") + e.what());
    }
}

std::vector<scored_chunk> vector_index::search(const float* query, int32_t k,
                                               const std::function<bool(int64_t)>& accept,
                                               int32_t ef_search) const {
    std::vector<float> q(query, query + dim_);
    normalize(q.data(), dim_);
    std::shared_lock<std::shared_mutex> lock(mu_);
    const auto* map = static_cast<const faiss::IndexIDMap2*>(index_.get());
    const idx_t total = map->ntotal;
    std::vector<scored_chunk> out;
    if (k <= 0 || total == 0) return out;
    cap_threads();
    idx_t want = std::min<idx_t>(total, k + static_cast<idx_t>(removed_.size()));
    for (;;) {
        std::vector<float> dist(static_cast<size_t>(want));
        std::vector<idx_t> lab(static_cast<size_t>(want));
        faiss::SearchParametersHNSW hp;
        hp.efSearch = std::max<int>(ef_search > 0 ? ef_search : p_.ef_search,
                                    static_cast<int>(want));
        faiss::SearchParametersIVF ip;
        ip.nprobe = static_cast<size_t>(std::max(1, p_.nprobe));
        const faiss::SearchParameters* sp = nullptr;
        if (dynamic_cast<const faiss::IndexHNSW*>(map->index)) sp = &hp;
        if (dynamic_cast<const faiss::IndexIVF*>(map->index)) sp = &ip;
        try {
            // The inner index with its own parameters; positions map to ids through id_map.
            if (auto* h = dynamic_cast<faiss::IndexHNSW*>(map->index)) {
                std::lock_guard<std::mutex> hl(hnsw_mu_);
                h->hnsw.efSearch = hp.efSearch;
                h->search(1, q.data(), want, dist.data(), lab.data());
            } else {
                map->index->search(1, q.data(), want, dist.data(), lab.data(), sp);
            }
        } catch (const faiss::FaissException& e) {
            throw error(status::internal, std::string("vector index: search failed: ") + e.what());
        }
        out.clear();
        for (idx_t i = 0; i < want && static_cast<int32_t>(out.size()) < k; ++i) {
            if (lab[i] < 0) continue;
            const int64_t id = map->id_map[static_cast<size_t>(lab[i])];
            if (removed_.count(id) || (accept && !accept(id))) continue;
            out.push_back({id, dist[i]});
        }
        if (static_cast<int32_t>(out.size()) >= k || want >= total) break;
        want = std::min<idx_t>(total, want * 4);
    }
    return out;
}

int64_t vector_index::size() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return index_->ntotal - static_cast<int64_t>(removed_.size());
}

std::vector<int64_t> vector_index::ids() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<int64_t> out;
    for (idx_t id : idmap(index_)->id_map) {
        if (!removed_.count(id)) out.push_back(id);
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool vector_index::wants_rebuild() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return !removed_.empty() &&
           static_cast<double>(removed_.size()) >
               p_.rebuild_deleted_share * static_cast<double>(std::max<idx_t>(1, index_->ntotal));
}

void vector_index::save(const std::string& path, int64_t vector_version) const {
    std::string body;
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        faiss::VectorIOWriter w;
        try {
            faiss::write_index(index_.get(), &w);
        } catch (const faiss::FaissException& e) {
            throw error(status::internal, std::string("vector index: serialize: ") + e.what());
        }
        body.append(k_magic, sizeof(k_magic));
        put(body, k_file_version);
        put(body, dim_);
        put(body, vector_version);
        put(body, static_cast<uint32_t>(p_.factory.size()));
        body += p_.factory;
        put(body, static_cast<uint32_t>(active_factory_.size()));
        body += active_factory_;
        put(body, static_cast<uint64_t>(removed_.size()));
        for (int64_t id : removed_) put(body, id);
        put(body, static_cast<uint64_t>(w.data.size()));
        body.append(reinterpret_cast<const char*>(w.data.data()), w.data.size());
    }
    uint8_t sum[32];
    sha256(body.data(), body.size(), sum);
    body.append(reinterpret_cast<const char*>(sum), sizeof(sum));

    std::shared_ptr<file_io> io = posix_file_io();
    // rename() cannot replace a directory; say so, not just EISDIR (anything else is replaced).
    if (file_stat st; io->lstat(path, &st) == 0 && st.is_dir)
        throw error(status::io_write, fmt("vector index: %s is a directory, not an index file: "
                                          "remove it (the index is rebuilt from the catalog)",
                                          path.c_str()));
    // A temp name of our own (pid + counter, O_EXCL): two writers never share one, and a failed
    // save removes it (a killed writer's is removed by the next one under the writer lock).
    static std::atomic<uint64_t> seq{0};
    std::string tmp;
    int fd = -1;
    for (int attempt = 0;; ++attempt) {
        tmp = fmt("%s.tmp.%ld.%llu", path.c_str(), static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(seq.fetch_add(1)));
        const int err = io->open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600, &fd);
        if (err == 0) break;
        if (err != EEXIST || attempt >= 100) {
            check_io(err, status::io_write, "vector index: create", tmp);
        }
    }
    try {
        io_fd f(io.get(), fd);
        check_io(io->pwrite(fd, body.data(), body.size(), 0), status::io_write,
                 "vector index: write", tmp);
        check_io(io->fsync(fd), status::io_write, "vector index: fsync", tmp);
        check_io(f.close(), status::io_write, "vector index: close", tmp);
        check_io(io->rename(tmp, path), status::io_write, "vector index: rename to", path);
    } catch (...) {
        io->unlink(tmp);
        throw;
    }
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    check_io(io->fsync_dir(dir.empty() ? "/" : dir), status::io_write, "vector index: fsync",
             dir);
}

std::unique_ptr<vector_index> vector_index::load(const std::string& path, int32_t dim,
                                                 const vector_index_params& p,
                                                 int64_t vector_version, std::string* why) {
    std::string tmp;
    std::string& reason = why ? *why : tmp;
    std::string data;
    if (!read_index_file(path, &data, &reason)) return nullptr;
    if (data.size() < sizeof(k_magic) + 32 || std::memcmp(data.data(), k_magic, 8) != 0) {
        reason = "not an index file";
        return nullptr;
    }
    uint8_t sum[32];
    sha256(data.data(), data.size() - 32, sum);
    if (std::memcmp(sum, data.data() + data.size() - 32, 32) != 0) {
        reason = "checksum mismatch (corrupt or truncated)";
        return nullptr;
    }
    const std::string body = data.substr(0, data.size() - 32);
    size_t off = sizeof(k_magic);
    uint32_t version = 0;
    int32_t fdim = 0;
    int64_t fver = 0;
    std::string factory, active;
    uint64_t n_removed = 0;
    if (!get(body, off, &version) || version != k_file_version) {
        reason = fmt("unknown index file version %u", version);
        return nullptr;
    }
    if (!get(body, off, &fdim) || !get(body, off, &fver) || !get_str(body, off, &factory) ||
        !get_str(body, off, &active) || !get(body, off, &n_removed) ||
        n_removed > (body.size() - off) / sizeof(int64_t)) {
        reason = "malformed header";
        return nullptr;
    }
    if (fdim != dim || factory != p.factory) {
        reason = fmt("built for dim %d '%s', want dim %d '%s'", fdim, factory.c_str(), dim,
                     p.factory.c_str());
        return nullptr;
    }
    if (fver != vector_version) {
        reason = fmt("stale (index at catalog version %lld, catalog at %lld)",
                     static_cast<long long>(fver), static_cast<long long>(vector_version));
        return nullptr;
    }
    std::unordered_set<int64_t> removed;
    for (uint64_t i = 0; i < n_removed; ++i) {
        int64_t id;
        get(body, off, &id);
        removed.insert(id);
    }
    uint64_t n_payload = 0;
    if (!get(body, off, &n_payload) || n_payload != body.size() - off) {
        reason = "malformed payload";
        return nullptr;
    }
    faiss::VectorIOReader r;
    r.data.assign(body.begin() + static_cast<std::ptrdiff_t>(off), body.end());
    std::unique_ptr<faiss::Index> idx;
    try {
        idx.reset(faiss::read_index(&r));
    } catch (const std::exception& e) {
        reason = std::string("FAISS could not read it: ") + e.what();
        return nullptr;
    }
    if (!dynamic_cast<faiss::IndexIDMap2*>(idx.get()) || idx->d != dim) {
        reason = "unexpected index type";
        return nullptr;
    }
    auto out = std::make_unique<vector_index>(dim, p);
    out->index_ = std::move(idx);
    out->active_factory_ = active;
    out->removed_ = std::move(removed);
    auto* map = idmap(out->index_);
    // The file holds the settings it was built with; later adds and searches follow today's.
    if (auto* h = dynamic_cast<faiss::IndexHNSW*>(map->index)) {
        h->hnsw.efSearch = p.ef_search;
        h->hnsw.efConstruction = p.ef_construction;
    }
    return out;
}

std::unique_ptr<vector_index> build_vector_index(catalog& cat, int32_t dim,
                                                 const vector_index_params& p) {
    std::vector<int64_t> ids;
    std::vector<float> x;
    cat.for_each_embedding([&](int64_t id, const float* v, size_t n) {
        if (n != static_cast<size_t>(dim)) {
            throw error(status::corrupt, fmt("catalog: chunk %lld has a %zu-d embedding, want %d",
                                             static_cast<long long>(id), n, dim));
        }
        ids.push_back(id);
        x.insert(x.end(), v, v + n);
    });
    auto idx = std::make_unique<vector_index>(dim, p);
    idx->add(ids, x.data());
    return idx;
}

std::unique_ptr<vector_index> open_vector_index(const std::string& path, catalog& cat,
                                                int32_t dim, const vector_index_params& p,
                                                bool* rebuilt, std::string* why) {
    std::string reason;
    const int64_t version = cat.vector_version();
    std::unique_ptr<vector_index> idx = vector_index::load(path, dim, p, version, &reason);
    if (idx && idx->wants_rebuild()) {
        idx.reset();
        reason = "too many removed vectors";
    }
    if (rebuilt) *rebuilt = !idx;
    if (why) *why = idx ? "" : reason;
    if (idx) return idx;
    idx = build_vector_index(cat, dim, p);
    idx->save(path, version);
    return idx;
}

}  // namespace cacheblend
