// C ABI: models, tokenization, logging and memory.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "capi/src/guard.h"
#include "capi/src/handles.h"
#include "capi/src/params.h"
#include "core/model/model.h"
#include "core/util/log.h"

extern "C" {

void cbl_free(void* p) { std::free(p); }

void cbl_log_set(cbl_log_fn fn, void* user_data) {
    // The core sink passes the level as int; the trampoline restores the C enum type.
    static std::atomic<cbl_log_fn> c_fn{nullptr};
    c_fn.store(fn);
    if (!fn) {
        cacheblend::log_set_sink(nullptr, nullptr);
        return;
    }
    cacheblend::log_set_sink(
        [](int level, const char* msg, void* user) {
            if (cbl_log_fn f = c_fn.load()) f(static_cast<cbl_log_level>(level), msg, user);
        },
        user_data);
}

cbl_status cbl_model_load(const char* path, const cbl_model_params* params, cbl_model** out_model) {
    if (out_model) *out_model = nullptr;
    return CBL_API_GUARD({
        if (!out_model) {
            return cacheblend::capi::set_error(CBL_INVALID_ARG, "cbl_model_load: out_model is required");
        }
        cbl_model_params p;
        if (cbl_status s = cacheblend::capi::read_params("cbl_model_load", params, &p, cbl_model_params_init); s != CBL_OK) return s;
        cacheblend::model_load_params lp;
        lp.vocab_only = p.vocab_only;
        auto h = std::make_unique<cbl_model>();
        h->m = cacheblend::load_model_or_default(path ? path : "", lp);
        *out_model = h.release();
        return CBL_OK;
    });
}

void cbl_model_free(cbl_model* model) { delete model; }

int32_t cbl_model_n_vocab(const cbl_model* model) {
    return model ? model->m->vocab().n_vocab() : 0;
}

int32_t cbl_model_n_ctx_train(const cbl_model* model) {
    return model && !model->m->vocab_only() ? model->m->hparams().n_ctx_train : 0;
}

cbl_status cbl_tokenize(const cbl_model* model, const char* text, size_t len, bool add_special,
                        bool parse_special, int32_t* ids, size_t cap, size_t* out_n) {
    return CBL_API_GUARD({
        if (!model || !out_n || (!text && len > 0)) {
            return cacheblend::capi::set_error(CBL_INVALID_ARG, "cbl_tokenize: model and out_n are required");
        }
        const auto toks = model->m->vocab().encode(std::string_view(text ? text : "", len),
                                                   add_special, parse_special);
        *out_n = toks.size();
        if (!ids) return CBL_OK;
        if (cap < toks.size()) {
            return cacheblend::capi::set_error(CBL_RANGE, "cbl_tokenize: buffer too small");
        }
        std::copy(toks.begin(), toks.end(), ids);
        return CBL_OK;
    });
}

cbl_status cbl_token_to_piece(const cbl_model* model, int32_t token, char* buf, size_t cap,
                              size_t* out_len) {
    return CBL_API_GUARD({
        if (!model || !out_len) {
            return cacheblend::capi::set_error(CBL_INVALID_ARG, "cbl_token_to_piece: model and out_len are required");
        }
        const auto& vocab = model->m->vocab();
        if (token < 0 || token >= vocab.n_vocab()) {
            return cacheblend::capi::set_error(
                CBL_INVALID_ARG, cacheblend::fmt("cbl_token_to_piece: token %d out of [0, %d)", token,
                                                 vocab.n_vocab()));
        }
        const std::string piece = vocab.token_to_piece(token, true);
        *out_len = piece.size();
        if (!buf) return CBL_OK;
        if (cap < piece.size()) {
            return cacheblend::capi::set_error(CBL_RANGE, "cbl_token_to_piece: buffer too small");
        }
        std::memcpy(buf, piece.data(), piece.size());
        return CBL_OK;
    });
}

}  // extern "C"
