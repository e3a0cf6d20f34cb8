#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/blend/blend-loader.h"
#include "core/blend/blend-plan.h"
#include "core/blend/blend-select.h"
#include "core/blend/blend.h"
#include "core/blend/device-layers.h"
#include "core/util/error.h"

// The blended prefill (core/blend/blend.h): prefill_once drives the steps in the order a request
// takes them: plan and lookup, ratio, load (a thread streaming stored layers), then per layer
// select and relocate, and last the stats and the rate controller that ratio=auto reads next time.

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Layout: the prompt [P][C1]..[Ck][Q] and where each chunk starts in it.
void lay_out(const blend_request& req, int32_t n_ctx, std::vector<token_id>* tokens,
             std::vector<int64_t>* chunk_start) {
    *tokens = req.preamble;
    chunk_start->resize(req.chunks.size());
    for (size_t c = 0; c < req.chunks.size(); ++c) {
        if (req.chunks[c].empty()) {
            throw error(status::invalid_arg, fmt("blend: chunk %zu is empty", c));
        }
        (*chunk_start)[c] = static_cast<int64_t>(tokens->size());
        tokens->insert(tokens->end(), req.chunks[c].begin(), req.chunks[c].end());
    }
    if (req.question.empty()) throw error(status::invalid_arg, "blend: empty question");
    tokens->insert(tokens->end(), req.question.begin(), req.question.end());
    const int64_t n = static_cast<int64_t>(tokens->size());
    if (n > n_ctx) {
        throw error(status::range,
                    fmt("blend: prompt of %lld tokens exceeds the context of %d tokens",
                        (long long)n, n_ctx));
    }
}

// The loaded layer's cached K and V; a stored chunk found corrupt or of an unknown format
// while streaming becomes blend_chunk_failure (prefill() retries without it).
// hit_readers[h] streams request chunk hit_chunks[h].
kv_layer_rows acquire_layer(int32_t l, layer_loader& loader,
                            const std::vector<chunk_kv_reader*>& hit_readers,
                            const std::vector<size_t>& hit_chunks, double* wait_ms);

}  // namespace

const std::vector<float>& blend_engine::prefill_once(const blend_request& req,
                                                     const std::vector<bool>& forced_miss,
                                                     blend_stats* out) {
    const auto t_start = clock_type::now();
    const model_hparams& hp = s_.get_model().hparams();
    s_.cache().n_filled = 0;
    blend_stats st;
    plan P;
    plan_and_lookup(req, forced_miss, &P, &st);
    layer_state L;
    L.selector = make_token_selector(p_.select);
    P.select_early = !L.selector->needs_deviation() && !L.selector->needs_query();
    resolve_ratio(&P, &st);
    forward_engine& fwd = s_.engine(P.n);  // the session's engine: no second one for blending
    // Load: from here the loader thread reads stored layers while the layers below compute.
    backend& be = s_.get_backend();
    // Keys as the format stores them (f16 ones are not widened on the host), so a device gets
    // them in the fewest bytes; relocation rotates either type to the same bits.
    const dtype k_type = stored_k_type(p_.format);
    layer_loader loader(be, &impl_->load_mem, P.hit_readers, P.hit_offset, P.n_reused(),
                        hp.kv_dim(), k_type, P.load_layers,
                        loader_threads(be, p_.load_threads, P.hit_readers.size()));
    if (!be.host_memory() && !P.load_layers.empty()) {
        L.dev = std::make_unique<device_layers>(be, &impl_->dev_mem, P.n_reused(), hp.kv_dim(),
                                                k_type, [&](int32_t l) {
                                                    return acquire_layer(l, loader, P.hit_readers,
                                                                         P.hit_chunks, &L.wait_ms);
                                                });
    }
    start_active(P, fwd, &L);
    for (int32_t l = 0; l < hp.n_layer; ++l) run_layer(l, P, loader, fwd, &L);
    fwd.logits(static_cast<int64_t>(L.active.size()) - 1, impl_->logits.data());
    s_.cache().n_filled = static_cast<int32_t>(P.n);
    record_stats(P, L, loader, ms_between(t_start, clock_type::now()), &st);
    update_rates(P, L, loader, st);
    if (out) *out = st;
    return impl_->logits;
}

// Plan and lookup: lays the prompt out and opens the stored KV of each chunk the mode may reuse
// (full: none; prefix: the leading chunk only, the one run that is exact). A chunk whose
// key is not stored, or was found corrupt on an earlier attempt, is a miss: computed now and,
// with write_back, stored afterwards. Keys come from the request's memo (computed once).
void blend_engine::plan_and_lookup(const blend_request& req, const std::vector<bool>& forced_miss,
                                   plan* P, blend_stats* st) {
    lay_out(req, s_.cache().n_ctx(), &P->tokens, &P->chunk_start);
    P->n = static_cast<int64_t>(P->tokens.size());
    P->n_question = static_cast<int64_t>(req.question.size());
    st->mode = p_.mode;
    st->tokens_total = P->n;
    P->reused_index.assign(static_cast<size_t>(P->n), -1);
    impl_->pending.clear();
    const auto t_lookup = clock_type::now();
    for (size_t c = 0; c < req.chunks.size() && p_.mode != blend_mode::full; ++c) {
        if (p_.mode == blend_mode::prefix && c > 0) break;
        const auto& ch = req.chunks[c];
        std::unique_ptr<chunk_kv_reader> r;
        if (!forced_miss[c]) {
            kv_lookup_info info;
            r = store_->lookup_noted(request_key(c), meta_of(static_cast<int32_t>(ch.size())),
                                     &info);
            add_notice(info.notice);
        }
        if (!r) {
            ++st->chunks_missed;
            st->tokens_missed += static_cast<int64_t>(ch.size());
            if (p_.write_back) impl_->pending.push_back(c);
            continue;
        }
        ++st->chunks_hit;
        P->hit_offset.push_back(P->n_reused());
        for (size_t i = 0; i < ch.size(); ++i) {
            const int64_t row = P->chunk_start[c] + static_cast<int64_t>(i);
            P->reused_index[static_cast<size_t>(row)] = static_cast<int32_t>(P->n_reused());
            P->reused_rows.push_back(static_cast<int32_t>(row));
        }
        P->hit_chunks.push_back(c);
        P->hit_readers.push_back(r.get());
        P->readers.push_back(std::move(r));
    }
    P->lookup_ms = ms_between(t_lookup, clock_type::now());
    st->tokens_reused = P->n_reused();
}

// Ratio and layer schedule: full computes all (1), prefix and reuse none of the reused rows (0),
// blend its ratio, or with ratio=auto the largest r whose per-layer recompute hides under the
// per-layer load at the rates measured on earlier requests (paper §5). The loader streams every
// layer from the first check layer on (blending: layer 0 runs in full), else from layer 0.
void blend_engine::resolve_ratio(plan* P, blend_stats* st) const {
    const model_hparams& hp = s_.get_model().hparams();
    const int64_t N = P->n, NR = P->n_reused();
    if (p_.mode == blend_mode::blend && NR == 0) {
        st->fallback_reason = "no cached chunks: computed in full";
    }
    if (!calib_note_.empty()) {
        st->fallback_reason =
            st->fallback_reason.empty() ? calib_note_ : calib_note_ + "; " + st->fallback_reason;
    }
    P->blending = p_.mode == blend_mode::blend && NR > 0;
    P->select_early = P->blending && P->select_early;
    float ratio =
        p_.mode == blend_mode::blend ? p_.ratio : (p_.mode == blend_mode::full ? 1.f : 0.f);
    const impl& I = *impl_;
    if (P->blending && p_.ratio_auto && I.load_bytes_per_ms > 0 && I.row_layer_ms > 0) {
        // Stored bytes per K+V element pair.
        const double pair = p_.format == kv_format::q8      ? 2.0 * (1.0 + 2.0 / hp.head_dim)
                            : p_.format == kv_format::exact ? 6.0
                                                            : 4.0;
        const double load_ms_layer =
            static_cast<double>(NR) * hp.kv_dim() * pair / I.load_bytes_per_ms;
        const double rows = load_ms_layer / I.row_layer_ms - static_cast<double>(N - NR);
        ratio = std::clamp(static_cast<float>(rows / static_cast<double>(NR)), p_.ratio_min,
                           p_.ratio_max);
    }
    st->ratio = ratio;
    P->check_ratio.assign(p_.check_layers.size(), ratio);
    if (!p_.check_ratios.empty() && !p_.ratio_auto) P->check_ratio = p_.check_ratios;
    if (NR > 0) {
        const int32_t first = P->blending && !P->select_early ? p_.check_layers[0] : 0;
        for (int32_t l = first; l < hp.n_layer; ++l) P->load_layers.push_back(l);
    }
}

// Layer 0's rows: all of them when blending (the check layer needs fresh KV of reused rows to
// compare), else only the rows not reused; a signal-free policy (P.select_early) chooses its
// reused rows here, before anything is computed. Embeds them at their prompt positions.
void blend_engine::start_active(const plan& P, forward_engine& fwd, layer_state* L) const {
    for (int64_t i = 0; i < P.n; ++i) {
        if (P.blending || P.reused_index[static_cast<size_t>(i)] < 0) {
            L->active.push_back(static_cast<int32_t>(i));
        }
    }
    if (P.select_early) {
        // The final budget at once: what gradual check ratios would leave after the last check.
        const auto t_sel = clock_type::now();
        select_args a;
        a.active = &L->active;
        a.reused_index = &P.reused_index;
        a.hit_offset = &P.hit_offset;
        a.kv_dim = s_.get_model().hparams().kv_dim();
        a.n_reused = P.n_reused();
        a.ratio = P.check_ratio.back();
        select_prepare(s_.get_backend(), a, *L->selector, &impl_->sel, &L->cand, &L->sel_in);
        select_finish(a, *L->selector, L->sel_in, L->cand, &L->keep);
        std::vector<int32_t> kept(L->keep.size());
        for (size_t i = 0; i < L->keep.size(); ++i) {
            kept[i] = L->active[static_cast<size_t>(L->keep[i])];
        }
        L->active.swap(kept);
        L->select_ms += ms_between(t_sel, clock_type::now());
    }
    std::vector<token_id> act_tokens(L->active.size());
    for (size_t i = 0; i < L->active.size(); ++i) {
        act_tokens[i] = P.tokens[static_cast<size_t>(L->active[i])];
    }
    fwd.embed(act_tokens.data(), static_cast<int64_t>(L->active.size()));
    fwd.set_positions(L->active.data(), static_cast<int64_t>(L->active.size()));
    L->is_active.assign(static_cast<size_t>(P.n), 0);
}

// One layer: project the active rows; at a check layer select which reused rows stay computed;
// store fresh KV, relocate the stored KV of reused rows not computed here; drop the rows the
// selection let go; attend over the whole prompt (exact causal mask by position) and run the MLP.
void blend_engine::run_layer(int32_t l, const plan& P, layer_loader& loader, forward_engine& fwd,
                             layer_state* L) {
    s_.throw_if_cancelled();
    kv_cache& cache = s_.cache();
    const int64_t n_act = static_cast<int64_t>(L->active.size());
    // The time of steps on every prompt row: what blending cannot save by recomputing fewer.
    const bool dense = n_act == P.n;
    auto t_step = clock_type::now();
    const auto count_dense = [&] {
        const auto now = clock_type::now();
        if (dense) L->dense_ms += ms_between(t_step, now);
        t_step = now;
    };
    fwd.project_qkv(l, n_act);
    count_dense();
    const bool loaded = !P.load_layers.empty() && l >= P.load_layers.front();
    kv_layer_rows cached;
    if (loaded && L->dev) {
        cached = L->dev->get(l);  // on the device: the check and relocate read it there
    } else if (loaded) {
        cached = acquire_layer(l, loader, P.hit_readers, P.hit_chunks, &L->wait_ms);
    }
    const auto ci = std::find(p_.check_layers.begin(), p_.check_layers.end(), l);
    const bool is_check = P.blending && !P.select_early && ci != p_.check_layers.end();
    select_args a;
    if (is_check) {
        const auto t_sel = clock_type::now();
        a.active = &L->active;
        a.reused_index = &P.reused_index;
        a.hit_offset = &P.hit_offset;
        a.fresh_k = fwd.k();
        a.fresh_v = fwd.v();
        a.cached_k = cached.k;
        a.cached_k_type = cached.k_type;
        a.cached_v = cached.v;
        a.kv_dim = s_.get_model().hparams().kv_dim();
        a.n_reused = P.n_reused();
        a.ratio = P.check_ratio[static_cast<size_t>(ci - p_.check_layers.begin())];
        a.layer = l;
        a.deviation = p_.deviation;
        select_prepare(s_.get_backend(), a, *L->selector, &impl_->sel, &L->cand, &L->sel_in);
        L->select_ms += ms_between(t_sel, clock_type::now());
    }
    t_step = clock_type::now();
    // Fresh KV for every row computed at this layer. Not rope_store_qkv: q stays unrotated until
    // attend_and_mlp, since rows are compacted in between and question_attention copies it.
    fwd.rope_store_kv(l, cache, n_act);
    count_dense();
    if (loaded) {
        const auto t_rel = clock_type::now();
        relocate(l, P, cached, L);
        L->relocate_ms += ms_between(t_rel, clock_type::now());
        if (L->dev) {
            // Layer l's reads are queued: the next layer crosses to the device during this
            // layer's attention and MLP.
            L->dev->retire(l, loader);
            if (l + 1 < s_.get_model().hparams().n_layer) L->dev->prefetch(l + 1, loader);
        } else {
            loader.release(l);
        }
    }
    if (is_check) {
        const auto t_sel = clock_type::now();
        // The question's attention needs this layer's rotated keys of every prompt row: after
        // rope_store_kv and relocate, before the rows are dropped.
        if (L->selector->needs_query()) {
            question_attention(s_.get_backend(), fwd, cache, s_.get_model().hparams(),
                               s_.weights().rope, l, n_act, P.n_question, P.n, &impl_->query,
                               &L->row_query);
            for (int64_t c : L->cand) {
                const int32_t row = L->active[static_cast<size_t>(c)];
                L->sel_in.query.push_back(L->row_query[static_cast<size_t>(row)]);
            }
        }
        select_finish(a, *L->selector, L->sel_in, L->cand, &L->keep);
        L->select_ms += ms_between(t_sel, clock_type::now());
        fwd.compact_rows(L->keep.data(), static_cast<int64_t>(L->keep.size()));
        std::vector<int32_t> next(L->keep.size());
        for (size_t i = 0; i < L->keep.size(); ++i) {
            next[i] = L->active[static_cast<size_t>(L->keep[i])];
        }
        L->active.swap(next);
    }
    const bool dense_attend = static_cast<int64_t>(L->active.size()) == P.n;
    const auto t_attend = clock_type::now();
    fwd.attend_and_mlp(l, cache, static_cast<int64_t>(L->active.size()), P.n);
    if (dense_attend) L->dense_ms += ms_between(t_attend, clock_type::now());
}

// Relocate: reused rows not computed at this layer take their stored KV, K rotated to their
// position in this prompt (stored K is before RoPE, so a chunk is reusable at any offset). On a
// host backend `cached` is the loader's slot and the rows are gathered here; on a device it is
// the layer's device copy (core/blend/device-layers.h) and the rows are gathered there, so only
// their indices and positions cross from the host.
void blend_engine::relocate(int32_t l, const plan& P, const kv_layer_rows& cached, layer_state* L) {
    const model_hparams& hp = s_.get_model().hparams();
    const int64_t kd = hp.kv_dim(), NR = P.n_reused();
    kv_cache& cache = s_.cache();
    std::fill(L->is_active.begin(), L->is_active.end(), 0);
    for (int32_t a : L->active) L->is_active[static_cast<size_t>(a)] = 1;
    L->gpos.clear();
    L->gidx.clear();
    for (int64_t r = 0; r < NR; ++r) {
        const int32_t row = P.reused_rows[static_cast<size_t>(r)];
        if (L->is_active[static_cast<size_t>(row)]) continue;
        L->gidx.push_back(static_cast<int32_t>(r));
        L->gpos.push_back(row);
    }
    if (L->gpos.empty()) return;
    backend& be = s_.get_backend();
    const size_t n = L->gpos.size(), kb = static_cast<size_t>(kd);
    const size_t k_row = dtype_row_bytes(cached.k_type, kd);  // f16 or f32, as stored
    const auto* ck = static_cast<const uint8_t*>(cached.k);
    const void* gk = nullptr;
    const uint16_t* gv = nullptr;
    const int32_t* gpos = L->gpos.data();
    if (L->dev) {
        uint8_t* dk = grow_buffer<uint8_t>(be, &impl_->gk_d, n * k_row);
        uint16_t* dv = grow_buffer<uint16_t>(be, &impl_->gv_d, n * kb);
        const int32_t* idx = impl_->gidx_b.in(be, L->gidx.data(), n);
        be.gather_rows(ck, k_row, idx, static_cast<int64_t>(n), k_row, dk, k_row);
        be.gather_rows(cached.v, kb * sizeof(uint16_t), idx, static_cast<int64_t>(n),
                       kb * sizeof(uint16_t), dv, kb * sizeof(uint16_t));
        gk = dk;
        gv = dv;
        gpos = impl_->gpos_b.in(be, L->gpos.data(), n);
    } else {
        L->gk.resize((n * k_row + sizeof(float) - 1) / sizeof(float));  // k_row bytes per row
        L->gv.resize(n * kb);
        auto* hk = reinterpret_cast<uint8_t*>(L->gk.data());
        for (size_t g = 0; g < n; ++g) {
            const auto r = static_cast<size_t>(L->gidx[g]);
            std::memcpy(hk + g * k_row, ck + r * k_row, k_row);
            std::memcpy(L->gv.data() + g * kb, cached.v + r * kb, kb * sizeof(uint16_t));
        }
        gk = L->gk.data();
        gv = L->gv.data();
    }
    be.relocate_kv(gk, cached.k_type, gv, static_cast<int64_t>(n), kd, gpos, hp.n_head_kv,
                   hp.head_dim, s_.weights().rope, cache.k(l), cache.v(l), cache.row_elems());
}

// Stats of the request: rows computed in the last layer, bytes and time of the load, and the
// time split (compute is what remains after waiting, selecting and looking up).
void blend_engine::record_stats(const plan& P, const layer_state& L, const layer_loader& loader,
                                double total_ms, blend_stats* st) const {
    st->tokens_recomputed = static_cast<int64_t>(L.active.size());
    st->recomputed_rows = L.active;
    st->bytes_loaded = loader.bytes();
    for (const auto& r : P.readers) {
        if (!r->is_remote()) continue;
        st->tokens_remote += r->meta().n_tokens;
        st->bytes_remote += r->bytes_read();
    }
    for (const std::string& n : impl_->notices) {
        st->fallback_reason = st->fallback_reason.empty() ? n : st->fallback_reason + "; " + n;
    }
    st->load_ms = loader.busy_ms() + P.lookup_ms;
    st->load_wait_ms = L.wait_ms;
    st->select_ms = L.select_ms;
    st->compute_ms = total_ms - L.wait_ms - L.select_ms - P.lookup_ms;
    st->dense_ms = L.dense_ms;
    st->relocate_ms = L.relocate_ms;
    st->ttft_ms = total_ms;
}

// The rate controller: load bandwidth and compute time per row-layer, as moving averages
// (0.7 old, 0.3 new), for ratio=auto on the next request.
void blend_engine::update_rates(const plan& P, const layer_state& L, const layer_loader& loader,
                                const blend_stats& st) {
    impl& I = *impl_;
    if (loader.busy_ms() > 0 && st.bytes_loaded > 0) {
        const double bw = static_cast<double>(st.bytes_loaded) / loader.busy_ms();
        I.load_bytes_per_ms = I.load_bytes_per_ms > 0 ? 0.7 * I.load_bytes_per_ms + 0.3 * bw : bw;
    }
    if (st.compute_ms > 0) {
        // Approximate row-layers computed: all rows before the first check, the active rows after.
        const auto n_act = static_cast<int64_t>(L.active.size());
        const double row_layers =
            static_cast<double>(n_act) * s_.get_model().hparams().n_layer +
            (P.blending && !P.select_early
                 ? static_cast<double>(P.n - n_act) * (p_.check_layers.back() + 1)
                 : 0.0);
        const double t = st.compute_ms / std::max(1.0, row_layers);
        I.row_layer_ms = I.row_layer_ms > 0 ? 0.7 * I.row_layer_ms + 0.3 * t : t;
    }
}

namespace {

kv_layer_rows acquire_layer(int32_t l, layer_loader& loader,
                            const std::vector<chunk_kv_reader*>& hit_readers,
                            const std::vector<size_t>& hit_chunks, double* wait_ms) {
    try {
        return loader.acquire(l, wait_ms);
    } catch (const error& e) {
        const auto* bad = loader.failed_reader();
        const bool damaged = e.code() == status::corrupt || e.code() == status::format;
        // The shared tier down or slow mid-stream: recompute the chunk, keep its value.
        const bool network = !damaged && bad && bad->is_remote();
        if (!damaged && !network) throw;
        for (size_t h = 0; h < hit_readers.size(); ++h) {
            if (hit_readers[h] != bad) continue;
            blend_chunk_failure f;
            f.chunk = hit_chunks[h];
            f.remove = damaged;
            if (bad->is_remote()) f.notice = std::string(e.what()) + ": recomputed";
            throw f;
        }
        throw;
    }
}

}  // namespace

}  // namespace cacheblend
