/*
 * libcacheblend: experimental C API, for evaluation tools and research on blending (the
 * `cacheblend blend` and `eval` commands are written against it).
 *
 * NO ABI PROMISE: names (cbl_x_*), structs and semantics here may change in any release, minor
 * ones included. The conventions of cacheblend.h hold otherwise (status codes, thread-local
 * messages, struct_size, NULL-safety). Stable candidates move to cacheblend.h when they settle.
 *
 * This header is C99.
 */
#ifndef CACHEBLEND_EXPERIMENTAL_H
#define CACHEBLEND_EXPERIMENTAL_H

#include "cacheblend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- blending knobs: replace the session's mode, ratio and selection policy ---- */
/* (docs/ARCHITECTURE.md, 'Blended prefill') */

/* What a check layer compares between the cached and the recomputed KV of a token. */
#define CBL_X_DEVIATION_DEFAULT 0 /* CBL_X_DEVIATION_V */
#define CBL_X_DEVIATION_V       1
#define CBL_X_DEVIATION_K       2
#define CBL_X_DEVIATION_KV      3
#define CBL_X_DEVIATION_RANDOM  4 /* a fixed pseudo-random choice: the control for ablations */

/* Which reused tokens a check layer keeps for recompute (the ratio is the budget). Names for
 * cbl_enum_name / cbl_enum_parse with kind CBL_X_NAMES_SELECT. */
#define CBL_X_SELECT_DEFAULT    0 /* CBL_X_SELECT_HKVD */
#define CBL_X_SELECT_HKVD       1 /* "hkvd": highest KV deviation (CacheBlend) */
#define CBL_X_SELECT_SINK       2 /* "sink": the first tokens of every reused chunk */
#define CBL_X_SELECT_SINK_HKVD  3 /* "sink+hkvd": 4 sink tokens per chunk, the rest by deviation */
#define CBL_X_SELECT_QUERY      4 /* "query": the tokens the question attends to most (CPU only) */
#define CBL_X_SELECT_QUERY_HKVD 5 /* "query+hkvd": half by the question's attention, half by
                                     deviation (CPU only) */
#define CBL_X_NAMES_SELECT 101    /* cbl_enum_name / cbl_enum_parse kind of CBL_X_SELECT_* */

typedef struct cbl_x_blend_params {
    size_t struct_size;           /* set by cbl_x_blend_params_init() */
    int32_t mode;                 /* CBL_MODE_* */
    float recompute_ratio;        /* taken as given, 0 included (init sets 0.15) */
    bool auto_ratio;              /* pick the ratio from measured load and compute rates */
    int32_t kv_format;            /* CBL_KV_* */
    const int32_t *check_layers;  /* layers that select tokens (NULL = layer 1 only) */
    size_t n_check_layers;
    const float *check_ratios;    /* gradual filtering: ratio kept at each check layer,
                                     non-increasing (NULL = recompute_ratio at every one) */
    int32_t deviation;            /* CBL_X_DEVIATION_* */
    bool calibrated_ratio;        /* as in cbl_session_params; a calibration record's policy
                                     replaces select */
    int32_t select;               /* CBL_X_SELECT_* (0 = hkvd) */
    /* new fields are appended here only */
} cbl_x_blend_params;

static inline void cbl_x_blend_params_init(cbl_x_blend_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
    p->mode = CBL_MODE_BLEND;
    p->recompute_ratio = 0.15f;
}

/** Sets how the session's next chunk prefills blend. The arrays are copied. */
CBL_API cbl_status cbl_x_session_set_blend(cbl_session *session, const cbl_x_blend_params *params);

/* ---- prompts of [preamble][chunks...][question] in the model's chat template ---- */

#define CBL_X_PROMPT_CHUNKS  0 /* the layout of cbl_session_prefill_chunks (system and preamble
                                  must be NULL) */
/* 1 was CBL_X_PROMPT_MUSIQUE: dataset layouts now live in the evaluation library (eval/, not
   installed), which passes them as CUSTOM. The number is not reused. */
#define CBL_X_PROMPT_CUSTOM  2 /* system, preamble, chunks and question taken literally */

typedef struct cbl_x_prompt {
    size_t struct_size;          /* set by cbl_x_prompt_init() */
    int32_t format;              /* CBL_X_PROMPT_* */
    const char *system;          /* CUSTOM: system message (NULL = none) */
    const char *preamble;        /* CUSTOM: plain text before the first chunk (NULL = none) */
    const char *const *chunks;   /* in prompt order */
    const size_t *lens;          /* NULL: the chunks are NUL-terminated */
    size_t n_chunks;
    const char *question;
} cbl_x_prompt;

static inline void cbl_x_prompt_init(cbl_x_prompt *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** Tokens the prompt has (preamble + chunks + question, template included): for sizing a
 *  session's n_ctx before prefilling. */
CBL_API cbl_status cbl_x_prompt_tokens(const cbl_model *model, const cbl_x_prompt *prompt,
                                       size_t *out_n);

/** Blended prefill of the prompt with the session's store, as cbl_session_prefill_chunks does
 *  (misses stored before returning, outside the timed part). Follow with cbl_session_generate. */
CBL_API cbl_status cbl_x_session_prefill_prompt(cbl_session *session, const cbl_x_prompt *prompt,
                                                cbl_stats *out_stats);

/** Stores the KV of every chunk of the prompt that the store lacks (in the session's KV format);
 *  *out_computed (may be NULL) gets how many were computed. */
CBL_API cbl_status cbl_x_session_precompute_prompt(cbl_session *session,
                                                   const cbl_x_prompt *prompt,
                                                   size_t *out_computed);

/** The next-token logits after the last prefill of any kind (n_vocab floats, the first answer
 *  token's distribution), still there after cbl_session_generate; valid until the next call on
 *  the session. NULL (and *out_n = 0) before any prefill. */
CBL_API const float *cbl_x_session_logits(const cbl_session *session, size_t *out_n);

/* ---- calibration (quality guard): the smallest ratio that met a fidelity target ---- */

typedef struct cbl_x_calibration {
    size_t struct_size;  /* set by cbl_x_calibration_init() */
    float ratio;         /* the smallest measured ratio that met the target (1 when none did) */
    bool met;            /* false: no ratio below 1 met it, so calibrated sessions run full */
    char metric[32];     /* "fidelity", "agreement" or "kl" (NUL-terminated, [a-z_]) */
    double target;       /* fidelity and agreement: at least this; kl: at most this */
    double value;        /* the metric measured at ratio */
    int32_t records;     /* records measured */
    int32_t select;      /* CBL_X_SELECT_* the ratio was measured with (0 = hkvd) */
    /* new fields are appended here only */
} cbl_x_calibration;

static inline void cbl_x_calibration_init(cbl_x_calibration *c) {
    memset(c, 0, sizeof(*c));
    c->struct_size = sizeof(*c);
}

/** Records a calibration for (model, kv_format) in the store's folder (atomic replace; other
 *  models' records are kept). */
CBL_API cbl_status cbl_x_kvstore_set_calibration(cbl_kvstore *store, const cbl_model *model,
                                                 int32_t kv_format, const cbl_x_calibration *c);
/** The record for (model, kv_format): *out_found false when there is none. A damaged record file
 *  is an error (CBL_CORRUPT / CBL_FORMAT). */
CBL_API cbl_status cbl_x_kvstore_calibration(cbl_kvstore *store, const cbl_model *model,
                                             int32_t kv_format, cbl_x_calibration *out,
                                             bool *out_found);

/** Where cbl_model_load(NULL, ...) looks: $CBL_MODEL (a path or a model name), else the default
 *  model (qwen2.5-coder-1.5b) in the cache folder. Free *out with cbl_free. */
CBL_API cbl_status cbl_x_default_model_path(char **out);

/* ---- named models: the library's registry (core/model/model-registry.tsv in the source tree) ----
 * A name such as "qwen2.5-coder-1.5b" works wherever a model path does (cbl_model_load,
 * cbl_runtime_params.model_path, CBL_MODEL): an existing file of that name wins, otherwise it means
 * the model's file in the cache folder, which cacheblend-fetch-model NAME fills (the library never
 * downloads). */

typedef struct cbl_x_registry_model {
    size_t struct_size;      /* set by cbl_x_registry_model_init() */
    const char *name;        /* "qwen2.5-coder-1.5b" */
    const char *file;        /* the file's name in the cache folder (see cbl_x_model_path) */
    uint64_t bytes;          /* the file's size */
    const char *sha256;      /* the file's sha256, 64 lowercase hex digits */
    const char *licence;     /* as the registry states it, e.g. "Apache-2.0" */
    const char *description; /* one line */
    bool is_default;         /* what a NULL model path loads when CBL_MODEL is not set */
} cbl_x_registry_model;

static inline void cbl_x_registry_model_init(cbl_x_registry_model *m) {
    memset(m, 0, sizeof(*m));
    m->struct_size = sizeof(*m);
}

/** How many named models the library knows. */
CBL_API size_t cbl_x_model_registry_count(void);
/** The named model at index (registry order); CBL_RANGE when index >= the count. The strings are
 *  static: valid for the life of the process. */
CBL_API cbl_status cbl_x_model_registry_get(size_t index, cbl_x_registry_model *out);
/** The file cbl_model_load(name_or_path, ...) opens: NULL or "" = the default (as
 *  cbl_x_default_model_path); a model name = its file in the cache folder unless a file of that
 *  name exists; anything else as given. Does not check that the file exists. Free *out with
 *  cbl_free. */
CBL_API cbl_status cbl_x_model_path(const char *name_or_path, char **out);
/** The cache folder of named models, ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models. Free *out
 *  with cbl_free. */
CBL_API cbl_status cbl_x_model_cache_dir(char **out);
/** The KV store `blend`, `eval` and `calibrate` use without --store or --data,
 *  ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/kv (a data directory keeps its own, DIR/kv). Free
 *  *out with cbl_free. */
CBL_API cbl_status cbl_x_default_kv_store_dir(char **out);

#ifdef __cplusplus
}
#endif

#endif /* CACHEBLEND_EXPERIMENTAL_H */
