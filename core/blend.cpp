#include "core/blend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "core/calibration.h"
#include "core/error.h"
#include "kernels/cpu/fp16.h"
#include "kernels/memory.h"

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

// A fixed pseudo-random score in [0, 1) (splitmix64): the same positions win on every run.
float random_score(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<float>(x >> 40) / static_cast<float>(1u << 24);
}

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Streams the cached layers of every hit chunk into a double buffer, one layer ahead of compute.
class layer_loader {
public:
    layer_loader(std::vector<chunk_kv_reader*> readers, std::vector<int64_t> row_offset,
                 int64_t n_rows, int64_t kv_dim, std::vector<int32_t> layers)
        : readers_(std::move(readers)), row_offset_(std::move(row_offset)), kv_dim_(kv_dim),
          layers_(std::move(layers)) {
        for (auto& s : slots_) {
            s.k.resize(static_cast<size_t>(std::max<int64_t>(1, n_rows * kv_dim)));
            s.v.resize(static_cast<size_t>(std::max<int64_t>(1, n_rows * kv_dim)));
        }
        if (!layers_.empty() && !readers_.empty()) thread_ = std::thread([this] { loop(); });
    }
    ~layer_loader() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    // Blocks until `layer` is loaded; returns its K (f32) and V (f16) rows, [n_rows][kv_dim].
    std::pair<const float*, const uint16_t*> acquire(int32_t layer, double* wait_ms) {
        const auto t0 = clock_type::now();
        std::unique_lock<std::mutex> lk(mu_);
        slot& s = slots_[static_cast<size_t>(layer) % 2];
        cv_.wait(lk, [&] { return failed_ || (s.layer == layer && s.ready); });
        *wait_ms += ms_between(t0, clock_type::now());
        if (failed_) std::rethrow_exception(error_);
        return {s.k.data(), s.v.data()};
    }
    void release(int32_t layer) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            slot& s = slots_[static_cast<size_t>(layer) % 2];
            s.ready = false;
            s.layer = -1;
        }
        cv_.notify_all();
    }
    double busy_ms() const { return busy_ms_; }
    uint64_t bytes() const {
        uint64_t b = 0;
        for (auto* r : readers_) b += r->bytes_read();
        return b;
    }
    chunk_kv_reader* failed_reader() const { return failed_reader_; }

private:
    struct slot {
        aligned_array<float> k;
        aligned_array<uint16_t> v;
        int32_t layer = -1;
        bool ready = false;
    };

    void loop() {
        for (int32_t layer : layers_) {
            slot& s = slots_[static_cast<size_t>(layer) % 2];
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return stop_ || (s.layer == -1 && !s.ready); });
                if (stop_) return;
            }
            const auto t0 = clock_type::now();
            for (size_t c = 0; c < readers_.size(); ++c) {
                try {
                    const int64_t off = row_offset_[c] * kv_dim_;
                    readers_[c]->read_layer(layer, s.k.data() + off, s.v.data() + off, kv_dim_);
                } catch (...) {
                    std::lock_guard<std::mutex> lk(mu_);
                    failed_ = true;
                    failed_reader_ = readers_[c];
                    error_ = std::current_exception();
                    cv_.notify_all();
                    return;
                }
            }
            busy_ms_ += ms_between(t0, clock_type::now());
            {
                std::lock_guard<std::mutex> lk(mu_);
                s.layer = layer;
                s.ready = true;
            }
            cv_.notify_all();
        }
    }

    std::vector<chunk_kv_reader*> readers_;
    std::vector<int64_t> row_offset_;
    int64_t kv_dim_;
    std::vector<int32_t> layers_;
    slot slots_[2];
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false, failed_ = false;
    std::exception_ptr error_;
    chunk_kv_reader* failed_reader_ = nullptr;
    double busy_ms_ = 0;
    std::thread thread_;
};

}  // namespace

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

struct blend_engine::impl {
    std::unique_ptr<forward_engine> fwd;          // sized to the largest prompt seen
    std::unique_ptr<kv_cache> pre_cache;          // precompute scratch cache
    std::vector<float> logits;
    std::vector<std::pair<std::vector<token_id>, std::vector<token_id>>> pending;  // misses
    // Rates measured on earlier requests, for ratio=auto (EMA).
    double load_bytes_per_ms = 0, row_layer_ms = 0;
};

blend_engine::blend_engine(session& s, std::shared_ptr<kv_store> store, const blend_params& p)
    : impl_(std::make_unique<impl>()), s_(s), store_(std::move(store)) {
    set_params(p);
    impl_->logits.resize(static_cast<size_t>(s.get_model().hparams().n_vocab));
}

blend_engine::~blend_engine() = default;

void blend_engine::set_params(const blend_params& p) {
    const int32_t n_layer = s_.get_model().hparams().n_layer;
    if (!(p.ratio >= 0.f && p.ratio <= 1.f)) {
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
        p_.ratio_auto = false;
    } else {
        p_.mode = blend_mode::full;
        calib_note_ = fmt("calibration: no ratio below 1 met %s %s %g on %d records: computed in full",
                          c->metric.c_str(), c->metric == "kl" ? "<=" : ">=", c->target,
                          c->records);
    }
}

chunk_key blend_engine::key_of(const std::vector<token_id>& preamble,
                               const std::vector<token_id>& chunk) const {
    return make_chunk_key(s_.get_model().fingerprint(), static_cast<uint32_t>(p_.format), preamble,
                          chunk);
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
    if (store_->contains(key)) return false;

    // [P][C] runs as one batch, exactly as the chunk's rows run inside a full prefill of the
    // whole prompt, so the stored KV is what full prefill computes there (kernels may pick their
    // numerics by batch size; one batch keeps precompute and full on the same path).
    impl& I = *impl_;
    if (!I.pre_cache) I.pre_cache = std::make_unique<kv_cache>(s_.get_backend(), hp, s_.n_ctx());
    const int64_t n = np + nc;
    if (!I.fwd || I.fwd->max_rows() < n) {
        I.fwd.reset();
        I.fwd = std::make_unique<forward_engine>(m, s_.get_backend(), static_cast<int32_t>(n));
    }
    std::vector<token_id> tokens(preamble);
    tokens.insert(tokens.end(), chunk.begin(), chunk.end());
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);

    const int64_t kd = hp.kv_dim();
    const size_t layer_elems = static_cast<size_t>(nc * kd);
    std::vector<float> kbuf(layer_elems * static_cast<size_t>(hp.n_layer));
    std::vector<float> vbuf(layer_elems * static_cast<size_t>(hp.n_layer));
    auto capture = [&](int l, const float* k, const float* v, int64_t) {
        const size_t off = static_cast<size_t>(l) * layer_elems;
        std::memcpy(kbuf.data() + off, k + np * kd, layer_elems * sizeof(float));
        std::memcpy(vbuf.data() + off, v + np * kd, layer_elems * sizeof(float));
    };
    I.fwd->run(*I.pre_cache, tokens.data(), pos.data(), n, n, nullptr, capture);
    auto w = store_->create(key, meta_of(static_cast<int32_t>(nc)), chunk);
    for (int l = 0; l < hp.n_layer; ++l) {
        const size_t off = static_cast<size_t>(l) * layer_elems;
        w->put_layer(l, kbuf.data() + off, vbuf.data() + off, kd);
    }
    w->commit();
    return true;
}

namespace {

// Thrown inside one prefill attempt when a stored chunk turns out corrupt while streaming.
struct chunk_failure {
    size_t chunk;
};

}  // namespace

const std::vector<float>& blend_engine::prefill(const blend_request& req, blend_stats* out) {
    std::vector<bool> forced_miss(req.chunks.size(), false);
    for (;;) {
        try {
            return prefill_once(req, forced_miss, out);
        } catch (const chunk_failure& f) {
            // A corrupt file is a miss: drop it and run the request again without it.
            store_->remove(key_of(req.preamble, req.chunks[f.chunk]));
            forced_miss[f.chunk] = true;
        }
    }
}

const std::vector<float>& blend_engine::prefill_once(const blend_request& req,
                                                     const std::vector<bool>& forced_miss,
                                                     blend_stats* out) {
    const auto t_start = clock_type::now();
    impl& I = *impl_;
    const model& m = s_.get_model();
    const model_hparams& hp = m.hparams();
    backend& be = s_.get_backend();
    kv_cache& cache = s_.cache();
    cache.n_filled = 0;
    const int64_t kd = hp.kv_dim();

    // ---- layout ----
    std::vector<token_id> tokens(req.preamble);
    std::vector<int64_t> chunk_start(req.chunks.size());
    for (size_t c = 0; c < req.chunks.size(); ++c) {
        if (req.chunks[c].empty()) throw error(status::invalid_arg, fmt("blend: chunk %zu is empty", c));
        chunk_start[c] = static_cast<int64_t>(tokens.size());
        tokens.insert(tokens.end(), req.chunks[c].begin(), req.chunks[c].end());
    }
    if (req.question.empty()) throw error(status::invalid_arg, "blend: empty question");
    tokens.insert(tokens.end(), req.question.begin(), req.question.end());
    const int64_t N = static_cast<int64_t>(tokens.size());
    if (N > cache.n_ctx()) {
        throw error(status::range, fmt("blend: prompt of %lld tokens exceeds the context of %d tokens",
                                       (long long)N, cache.n_ctx()));
    }

    // ---- lookups: which chunks are hits ----
    blend_stats st;
    st.mode = blend_mode_name(p_.mode);
    st.tokens_total = N;
    std::vector<std::unique_ptr<chunk_kv_reader>> readers;
    std::vector<chunk_kv_reader*> hit_readers;
    std::vector<size_t> hit_chunks;
    std::vector<int64_t> hit_offset;            // first row of each hit chunk within R
    std::vector<int32_t> reused_index(static_cast<size_t>(N), -1);  // prompt row -> index in R
    std::vector<int32_t> reused_rows;            // R: prompt rows whose KV comes from the store
    I.pending.clear();
    const auto t_lookup = clock_type::now();
    for (size_t c = 0; c < req.chunks.size() && p_.mode != blend_mode::full; ++c) {
        if (p_.mode == blend_mode::prefix && c > 0) break;  // only a leading run is exact
        const auto& ch = req.chunks[c];
        std::unique_ptr<chunk_kv_reader> r;
        if (!forced_miss[c]) {
            r = store_->lookup(key_of(req.preamble, ch), meta_of(static_cast<int32_t>(ch.size())));
        }
        if (!r) {
            ++st.chunks_missed;
            st.tokens_missed += static_cast<int64_t>(ch.size());
            if (p_.write_back) I.pending.emplace_back(req.preamble, ch);
            continue;
        }
        ++st.chunks_hit;
        hit_offset.push_back(static_cast<int64_t>(reused_rows.size()));
        for (size_t i = 0; i < ch.size(); ++i) {
            const int64_t row = chunk_start[c] + static_cast<int64_t>(i);
            reused_index[static_cast<size_t>(row)] = static_cast<int32_t>(reused_rows.size());
            reused_rows.push_back(static_cast<int32_t>(row));
        }
        hit_chunks.push_back(c);
        hit_readers.push_back(r.get());
        readers.push_back(std::move(r));
    }
    double lookup_ms = ms_between(t_lookup, clock_type::now());
    const int64_t NR = static_cast<int64_t>(reused_rows.size());
    st.tokens_reused = NR;
    if (p_.mode == blend_mode::blend && NR == 0) st.fallback_reason = "no cached chunks: computed in full";
    if (!calib_note_.empty()) {
        st.fallback_reason = st.fallback_reason.empty() ? calib_note_ : calib_note_ + "; " + st.fallback_reason;
    }

    // ---- ratio and layer schedule ----
    const bool blending = p_.mode == blend_mode::blend && NR > 0;
    float ratio = p_.mode == blend_mode::blend ? p_.ratio : (p_.mode == blend_mode::full ? 1.f : 0.f);
    if (blending && p_.ratio_auto && I.load_bytes_per_ms > 0 && I.row_layer_ms > 0) {
        // Largest r whose per-layer recompute hides under the per-layer load (paper §5).
        // Stored bytes per K+V element pair.
        const double pair = p_.format == kv_format::q8    ? 2.0 * (1.0 + 2.0 / hp.head_dim)
                            : p_.format == kv_format::exact ? 6.0
                                                          : 4.0;
        const double load_ms_layer = static_cast<double>(NR) * kd * pair / I.load_bytes_per_ms;
        const double rows = load_ms_layer / I.row_layer_ms - static_cast<double>(N - NR);
        ratio = std::clamp(static_cast<float>(rows / static_cast<double>(NR)), p_.ratio_min, p_.ratio_max);
    }
    st.ratio = ratio;
    std::vector<float> check_ratio(p_.check_layers.size(), ratio);
    if (!p_.check_ratios.empty() && !p_.ratio_auto) check_ratio = p_.check_ratios;
    std::vector<int32_t> load_layers;
    if (NR > 0) {
        const int32_t first = blending ? p_.check_layers[0] : 0;
        for (int32_t l = first; l < hp.n_layer; ++l) load_layers.push_back(l);
    }

    // ---- scratch and loader ----
    if (!I.fwd || I.fwd->max_rows() < N) {
        I.fwd.reset();
        I.fwd = std::make_unique<forward_engine>(m, be, static_cast<int32_t>(N));
    }
    forward_engine& fwd = *I.fwd;
    layer_loader loader(hit_readers, hit_offset, NR, kd, load_layers);

    // Active rows: computed at the current layer (ascending prompt positions).
    std::vector<int32_t> active;
    for (int64_t i = 0; i < N; ++i) {
        if (blending || reused_index[static_cast<size_t>(i)] < 0) active.push_back(static_cast<int32_t>(i));
    }
    std::vector<token_id> act_tokens(active.size());
    for (size_t i = 0; i < active.size(); ++i) act_tokens[i] = tokens[static_cast<size_t>(active[i])];
    fwd.embed(act_tokens.data(), static_cast<int64_t>(active.size()));
    fwd.set_positions(active.data(), static_cast<int64_t>(active.size()));

    std::vector<uint8_t> is_active(static_cast<size_t>(N), 0);
    aligned_array<uint16_t> gv, gcached;
    aligned_array<float> gk, gfresh, dev;
    std::vector<int32_t> gpos, keep;
    double wait_ms = 0, select_ms = 0;

    for (int32_t l = 0; l < hp.n_layer; ++l) {
        s_.throw_if_cancelled();
        const int64_t n_act = static_cast<int64_t>(active.size());
        fwd.project_qkv(l, n_act);
        const bool loaded = !load_layers.empty() && l >= load_layers.front();
        const float* ck = nullptr;
        const uint16_t* cv = nullptr;
        if (loaded) {
            try {
                std::tie(ck, cv) = loader.acquire(l, &wait_ms);
            } catch (const error& e) {
                if (e.code() != status::corrupt && e.code() != status::format) throw;
                const auto* bad = loader.failed_reader();
                for (size_t h = 0; h < hit_readers.size(); ++h) {
                    if (hit_readers[h] == bad) throw chunk_failure{hit_chunks[h]};
                }
                throw;
            }
        }
        const auto ci = std::find(p_.check_layers.begin(), p_.check_layers.end(), l);
        const bool is_check = blending && ci != p_.check_layers.end();
        if (is_check) {
            // Deviation of fresh vs cached KV for the reused rows still active.
            const auto t_sel = clock_type::now();
            std::vector<int64_t> a_idx;
            for (int64_t a = 0; a < n_act; ++a) {
                if (reused_index[static_cast<size_t>(active[static_cast<size_t>(a)])] >= 0) a_idx.push_back(a);
            }
            const int64_t mr = static_cast<int64_t>(a_idx.size());
            dev.resize(static_cast<size_t>(std::max<int64_t>(1, mr)));
            gfresh.resize(static_cast<size_t>(std::max<int64_t>(1, mr * kd)));
            gcached.resize(static_cast<size_t>(std::max<int64_t>(1, mr * kd)));
            std::vector<float> total(static_cast<size_t>(mr), 0.f);
            // Cached rows are scored as f16 (K is rounded for it: the ranking does not need more).
            auto score = [&](const float* fresh, const uint16_t* cached_v, const float* cached_k) {
                for (int64_t i = 0; i < mr; ++i) {
                    const int64_t a = a_idx[static_cast<size_t>(i)];
                    const int64_t r = reused_index[static_cast<size_t>(active[static_cast<size_t>(a)])];
                    std::memcpy(gfresh.data() + i * kd, fresh + a * kd, static_cast<size_t>(kd) * sizeof(float));
                    if (cached_v) {
                        std::memcpy(gcached.data() + i * kd, cached_v + r * kd,
                                    static_cast<size_t>(kd) * sizeof(uint16_t));
                    } else {
                        fp32_to_fp16_row(cached_k + r * kd, gcached.data() + i * kd, kd);
                    }
                }
                be.kv_deviation(gfresh.data(), kd, gcached.data(), kd, mr, kd, dev.data());
                for (int64_t i = 0; i < mr; ++i) total[static_cast<size_t>(i)] += dev[static_cast<size_t>(i)];
            };
            if (p_.deviation == deviation_kind::random) {
                for (int64_t i = 0; i < mr; ++i) {
                    const auto row = static_cast<uint64_t>(
                        active[static_cast<size_t>(a_idx[static_cast<size_t>(i)])]);
                    total[static_cast<size_t>(i)] =
                        random_score(row + 1000003u * static_cast<uint64_t>(l));
                }
            } else {
                if (p_.deviation != deviation_kind::k) score(fwd.v(), cv, nullptr);
                if (p_.deviation != deviation_kind::v) score(fwd.k(), nullptr, ck);
            }
            const float rj = check_ratio[static_cast<size_t>(ci - p_.check_layers.begin())];
            const int64_t n_keep = std::min<int64_t>(
                mr, static_cast<int64_t>(std::ceil(static_cast<double>(rj) * static_cast<double>(NR) - 1e-9)));
            std::vector<int64_t> order(static_cast<size_t>(mr));
            for (int64_t i = 0; i < mr; ++i) order[static_cast<size_t>(i)] = i;
            std::partial_sort(order.begin(), order.begin() + n_keep, order.end(), [&](int64_t a, int64_t b) {
                const float da = total[static_cast<size_t>(a)], db = total[static_cast<size_t>(b)];
                return da > db || (da == db && a < b);
            });
            std::vector<uint8_t> chosen(static_cast<size_t>(n_act), 0);
            for (int64_t i = 0; i < n_keep; ++i) chosen[static_cast<size_t>(a_idx[static_cast<size_t>(order[static_cast<size_t>(i)])])] = 1;
            keep.clear();
            for (int64_t a = 0; a < n_act; ++a) {
                if (chosen[static_cast<size_t>(a)] || reused_index[static_cast<size_t>(active[static_cast<size_t>(a)])] < 0) {
                    keep.push_back(static_cast<int32_t>(a));
                }
            }
            select_ms += ms_between(t_sel, clock_type::now());
        }

        fwd.rope_store_kv(l, cache, n_act);  // fresh KV for every row computed at this layer
        if (loaded) {
            // Reused rows not computed at this layer take their cached KV at their new position.
            std::fill(is_active.begin(), is_active.end(), 0);
            for (int32_t a : active) is_active[static_cast<size_t>(a)] = 1;
            gpos.clear();
            gk.resize(static_cast<size_t>(std::max<int64_t>(1, NR * kd)));
            gv.resize(static_cast<size_t>(std::max<int64_t>(1, NR * kd)));
            for (int64_t r = 0; r < NR; ++r) {
                const int32_t row = reused_rows[static_cast<size_t>(r)];
                if (is_active[static_cast<size_t>(row)]) continue;
                const int64_t g = static_cast<int64_t>(gpos.size());
                std::memcpy(gk.data() + g * kd, ck + r * kd, static_cast<size_t>(kd) * sizeof(float));
                std::memcpy(gv.data() + g * kd, cv + r * kd, static_cast<size_t>(kd) * sizeof(uint16_t));
                gpos.push_back(row);
            }
            if (!gpos.empty()) {
                be.relocate_kv(gk.data(), gv.data(), static_cast<int64_t>(gpos.size()), kd, gpos.data(),
                               hp.n_head_kv, hp.head_dim, hp.rope, cache.k(l), cache.v(l),
                               cache.row_elems());
            }
            loader.release(l);
        }
        if (is_check) {
            fwd.compact_rows(keep.data(), static_cast<int64_t>(keep.size()));
            std::vector<int32_t> next(keep.size());
            for (size_t i = 0; i < keep.size(); ++i) next[i] = active[static_cast<size_t>(keep[i])];
            active.swap(next);
        }
        fwd.attend_and_mlp(l, cache, static_cast<int64_t>(active.size()), N);
    }
    fwd.logits(static_cast<int64_t>(active.size()) - 1, I.logits.data());
    cache.n_filled = static_cast<int32_t>(N);

    const double total_ms = ms_between(t_start, clock_type::now());
    st.tokens_recomputed = static_cast<int64_t>(active.size());
    st.recomputed_rows = active;
    st.bytes_loaded = loader.bytes();
    st.load_ms = loader.busy_ms() + lookup_ms;
    st.load_wait_ms = wait_ms;
    st.select_ms = select_ms;
    st.compute_ms = total_ms - wait_ms - select_ms - lookup_ms;
    st.ttft_ms = total_ms;
    // Rates for ratio=auto on the next request.
    if (loader.busy_ms() > 0 && st.bytes_loaded > 0) {
        const double bw = static_cast<double>(st.bytes_loaded) / loader.busy_ms();
        I.load_bytes_per_ms = I.load_bytes_per_ms > 0 ? 0.7 * I.load_bytes_per_ms + 0.3 * bw : bw;
    }
    if (st.compute_ms > 0) {
        // Approximate row-layers computed: all rows before the first check, the active rows after.
        const double row_layers = static_cast<double>(active.size()) * hp.n_layer +
                                  (blending ? static_cast<double>(N - static_cast<int64_t>(active.size())) * (p_.check_layers.back() + 1) : 0.0);
        const double t = st.compute_ms / std::max(1.0, row_layers);
        I.row_layer_ms = I.row_layer_ms > 0 ? 0.7 * I.row_layer_ms + 0.3 * t : t;
    }
    if (out) *out = st;
    return I.logits;
}

void blend_engine::write_back_misses() {
    auto pending = std::move(impl_->pending);
    impl_->pending.clear();
    for (const auto& [pre, chunk] : pending) precompute_chunk(pre, chunk);
}

}  // namespace cacheblend
