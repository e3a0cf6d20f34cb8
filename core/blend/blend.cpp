#include "core/blend/blend.h"

#include <algorithm>
#include <optional>

// calibration.h (via file-io.h's struct aligned_free) before kernels/memory.h's function of that
// name, which blend-plan.h includes: the other order does not compile.
#include "core/blend/calibration.h"

#include "core/blend/blend-plan.h"
#include "core/util/error.h"

// The blend engine's public face: modes and params, chunk keys, precompute and write-back, and
// prefill's retry on a corrupt stored chunk. The prefill itself is core/blend/blend-prefill.cpp.

namespace cacheblend {

const char* blend_mode_name(blend_mode m) {
    switch (m) {
        case blend_mode::full: return "full";
        case blend_mode::prefix: return "prefix";
        case blend_mode::reuse: return "reuse";
        case blend_mode::blend: return "blend";
    }
    return "?";
}

bool parse_blend_mode(const std::string& s, blend_mode* out) {
    for (blend_mode m : {blend_mode::full, blend_mode::prefix, blend_mode::reuse, blend_mode::blend}) {
        if (s == blend_mode_name(m)) {
            *out = m;
            return true;
        }
    }
    return false;
}

blend_engine::blend_engine(session& s, std::shared_ptr<kv_store> store, const blend_params& p)
    : impl_(std::make_unique<impl>()), s_(s), store_(std::move(store)) {
    set_params(p);
    impl_->logits.resize(static_cast<size_t>(s.get_model().hparams().n_vocab));
}

blend_engine::~blend_engine() = default;


void blend_engine::set_params(const blend_params& p) {
    const int32_t n_layer = s_.get_model().hparams().n_layer;
    if (!ratio_in_range(p.ratio)) {
        throw error(status::invalid_arg, fmt("blend: ratio %g outside [0, 1]", p.ratio));
    }
    if (p.check_layers.empty()) throw error(status::invalid_arg, "blend: no check layer");
    for (size_t i = 0; i < p.check_layers.size(); ++i) {
        if (p.check_layers[i] < 1 || p.check_layers[i] >= n_layer ||
            (i > 0 && p.check_layers[i] <= p.check_layers[i - 1])) {
            throw error(status::invalid_arg,
                        fmt("blend: check layers must ascend within [1, %d)", n_layer));
        }
    }
    if (!p.check_ratios.empty()) {
        if (p.check_ratios.size() != p.check_layers.size()) {
            throw error(status::invalid_arg, "blend: one check ratio per check layer");
        }
        for (size_t i = 0; i < p.check_ratios.size(); ++i) {
            const float r = p.check_ratios[i];
            if (!(r >= 0.f && r <= 1.f) || (i > 0 && r > p.check_ratios[i - 1])) {
                throw error(status::invalid_arg, "blend: check ratios must be non-increasing in [0, 1]");
            }
        }
    }
    if (!store_ && p.mode != blend_mode::full) {
        throw error(status::invalid_arg, "blend: modes other than full need a KV store");
    }
    requested_ = p;
    p_ = p;
    calib_note_.clear();
    if (p.ratio_calibrated && p.mode == blend_mode::blend) resolve_calibration();
}

void blend_engine::resolve_calibration() {
    std::optional<calibration> c;
    try {
        c = read_calibration(store_->dir(), s_.get_model().fingerprint(), p_.format);
    } catch (const error& e) {
        calib_note_ = fmt("calibration unreadable (%s): r = %g", e.what(), p_.ratio);
        return;
    }
    if (!c) {
        calib_note_ = fmt("no calibration for this model and KV format: r = %g", p_.ratio);
    } else if (c->met) {
        p_.ratio = c->ratio;
        p_.select = c->select;  // the ratio was measured with this policy
        p_.ratio_auto = false;
    } else {
        p_.mode = blend_mode::full;
        calib_note_ = fmt("calibration: no ratio below 1 met %s %s %g on %d records: computed in full",
                          c->metric.c_str(), c->metric == "kl" ? "<=" : ">=", c->target,
                          c->records);
    }
}

namespace {

chunk_key hash_chunk(const model& m, kv_format f, const std::vector<token_id>& preamble,
                     const std::vector<token_id>& chunk) {
    return make_chunk_key(m.fingerprint(), static_cast<uint32_t>(f), preamble, chunk);
}

}  // namespace

// A key is found in the last request's chunks, else in the last one asked for outside it, else
// computed (and remembered as that one).
chunk_key blend_engine::key_of(const std::vector<token_id>& preamble,
                               const std::vector<token_id>& chunk) const {
    if (key_memo::entry* e = impl_->request.find(p_.format, preamble, chunk)) {
        if (!e->key) e->key = hash_chunk(s_.get_model(), p_.format, preamble, chunk);
        return *e->key;
    }
    key_memo& o = impl_->other;
    if (!o.find(p_.format, preamble, chunk)) {
        o.format = p_.format;
        o.preamble = preamble;
        o.chunks.assign(1, {chunk, hash_chunk(s_.get_model(), p_.format, preamble, chunk)});
    }
    return *o.chunks[0].key;
}

// The request's chunks, their keys not yet computed (the lookup computes those it needs).
void blend_engine::remember_request(const blend_request& req) {
    key_memo& m = impl_->request;
    m.format = p_.format;
    m.preamble = req.preamble;
    m.chunks.clear();
    for (const auto& c : req.chunks) m.chunks.push_back({c, std::nullopt});
}

// Chunk `chunk` of the request prefill() runs.
const chunk_key& blend_engine::request_key(size_t chunk) const {
    key_memo& m = impl_->request;
    key_memo::entry& e = m.chunks[chunk];
    if (!e.key) e.key = hash_chunk(s_.get_model(), m.format, m.preamble, e.chunk);
    return *e.key;
}

chunk_kv_meta blend_engine::meta_of(int32_t n_tokens) const {
    const model_hparams& hp = s_.get_model().hparams();
    chunk_kv_meta meta;
    meta.model_fingerprint = s_.get_model().fingerprint();
    meta.format = p_.format;
    meta.n_layer = hp.n_layer;
    meta.n_kv_head = hp.n_head_kv;
    meta.head_dim = hp.head_dim;
    meta.n_tokens = n_tokens;
    return meta;
}

bool blend_engine::precompute_chunk(const std::vector<token_id>& preamble,
                                    const std::vector<token_id>& chunk) {
    if (!store_) throw error(status::invalid_arg, "blend: precompute needs a KV store");
    if (chunk.empty()) throw error(status::invalid_arg, "blend: empty chunk");
    const model& m = s_.get_model();
    const model_hparams& hp = m.hparams();
    const int64_t np = static_cast<int64_t>(preamble.size());
    const int64_t nc = static_cast<int64_t>(chunk.size());
    if (np + nc > s_.n_ctx()) {
        throw error(status::range, fmt("blend: preamble + chunk (%lld tokens) exceed the context of %d",
                                       (long long)(np + nc), s_.n_ctx()));
    }
    const chunk_key key = key_of(preamble, chunk);
    // A usable file is kept; one whose header is damaged or of an older file version (written
    // before an upgrade) is removed by the lookup and computed again, so `ingest --precompute`
    // refreshes a store instead of leaving every chunk a miss for the first requests.
    if (store_->lookup(key, meta_of(static_cast<int32_t>(nc)))) return false;

    // [P][C] runs as one batch, exactly as the chunk's rows run inside a full prefill of the
    // whole prompt, so the stored KV is what full prefill computes there (kernels may pick their
    // numerics by batch size; one batch keeps precompute and full on the same path).
    impl& I = *impl_;
    const int64_t n = np + nc;
    if (!I.pre_cache || I.pre_cache->n_ctx() < n) {
        I.pre_cache.reset();
        I.pre_cache = std::make_unique<kv_cache>(s_.get_backend(), hp, static_cast<int32_t>(n));
    }
    forward_engine& fwd = s_.engine(n);
    std::vector<token_id> tokens(preamble);
    tokens.insert(tokens.end(), chunk.begin(), chunk.end());
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);

    const int64_t kd = hp.kv_dim();
    const size_t layer_elems = static_cast<size_t>(nc * kd);
    std::vector<float> kbuf(layer_elems * static_cast<size_t>(hp.n_layer));
    std::vector<float> vbuf(layer_elems * static_cast<size_t>(hp.n_layer));
    // k and v are the forward pass's buffers (backend memory): copied out through the backend.
    backend& be = s_.get_backend();
    auto capture = [&](int l, const float* k, const float* v, int64_t) {
        const size_t off = static_cast<size_t>(l) * layer_elems;
        be.download(kbuf.data() + off, k + np * kd, layer_elems * sizeof(float));
        be.download(vbuf.data() + off, v + np * kd, layer_elems * sizeof(float));
    };
    fwd.run(*I.pre_cache, tokens.data(), pos.data(), n, n, nullptr, capture);
    auto w = store_->create(key, meta_of(static_cast<int32_t>(nc)), chunk);
    for (int l = 0; l < hp.n_layer; ++l) {
        const size_t off = static_cast<size_t>(l) * layer_elems;
        w->put_layer(l, kbuf.data() + off, vbuf.data() + off, kd);
    }
    w->commit();
    return true;
}

const std::vector<float>& blend_engine::prefill(const blend_request& req, blend_stats* out) {
    remember_request(req);  // once per request: a retry reuses the keys
    impl_->notices.clear();
    std::vector<bool> forced_miss(req.chunks.size(), false);
    for (;;) {
        try {
            return prefill_once(req, forced_miss, out);
        } catch (const blend_chunk_failure& f) {
            // A corrupt file is a miss: drop it and run the request again without it. A chunk
            // the shared tier failed to deliver is recomputed and its value kept.
            if (f.remove) store_->remove(request_key(f.chunk));
            add_notice(f.notice);
            forced_miss[f.chunk] = true;
        }
    }
}

void blend_engine::add_notice(const std::string& n) {
    if (n.empty()) return;
    auto& v = impl_->notices;
    if (std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
}

void blend_engine::write_back_misses() {
    auto pending = std::move(impl_->pending);
    impl_->pending.clear();
    const key_memo& m = impl_->request;
    for (size_t c : pending) precompute_chunk(m.preamble, m.chunks[c].chunk);
}

}  // namespace cacheblend
