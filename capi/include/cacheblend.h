/*
 * libcacheblend: embedded RAG runtime with CacheBlend KV fusion. The stable C ABI.
 *
 * Conventions (see STYLE.md in the design notes):
 *  - Every fallible function returns cbl_status (CBL_OK = 0). On failure it records a
 *    thread-local message, readable with cbl_last_error() until the next cbl_ call on the same
 *    thread, and sets every out_* handle to NULL. Success does not clear the message.
 *  - (s & 0xff) is the primary status; extended codes add detail in the upper bits.
 *  - Handles are opaque and reference-counted; cbl_x_free(NULL) is a no-op.
 *  - Params structs start with struct_size; call the *_init() helper (it records your sizeof),
 *    then set fields. Zero means "library default" for every field. NULL params = all defaults.
 *  - Strings are UTF-8, copied before return. The library never aborts, exits or prints.
 *  - Thread safety: models are immutable and shareable; one call at a time per session.
 *
 * This header is C99; it compiles with -Wall -Wextra -Werror -pedantic.
 */
#ifndef CACHEBLEND_H
#define CACHEBLEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  if defined(CBL_BUILD)
#    define CBL_API __declspec(dllexport)
#  elif defined(CBL_SHARED)
#    define CBL_API __declspec(dllimport)
#  else
#    define CBL_API
#  endif
#else
#  define CBL_API __attribute__((visibility("default")))
#endif

#define CBL_VERSION_MAJOR 0
#define CBL_VERSION_MINOR 1
#define CBL_VERSION_PATCH 0
#define CBL_VERSION_NUMBER (CBL_VERSION_MAJOR * 1000000 + CBL_VERSION_MINOR * 1000 + CBL_VERSION_PATCH)
#define CBL_VERSION_STRING "0.1.0"

/* ---- status codes ---- */
typedef int32_t cbl_status;
#define CBL_OK           0
#define CBL_ERROR        1   /* generic */
#define CBL_INVALID_ARG  2
#define CBL_MISUSE       3   /* wrong state or thread, re-entry */
#define CBL_NOMEM        4
#define CBL_IO           5
#define CBL_CORRUPT      6   /* checksum, truncation */
#define CBL_FORMAT       7   /* unknown version or layout */
#define CBL_UNSUPPORTED  8
#define CBL_DEVICE       9   /* CUDA, cuBLASLt */
#define CBL_ABORTED     10
#define CBL_RANGE       11
#define CBL_CATALOG     12   /* SQLite; its code is in the message */
#define CBL_INTERNAL    13
#define CBL_IO_READ     (CBL_IO | (1 << 8))
#define CBL_IO_WRITE    (CBL_IO | (2 << 8))
#define CBL_DEVICE_OOM  (CBL_DEVICE | (1 << 8))

/** Message of the last failed call on this thread; never NULL. @since 0.1 */
CBL_API const char *cbl_last_error(void);
/** Status of the last failed call on this thread (CBL_OK if none). @since 0.1 */
CBL_API cbl_status cbl_last_status(void);
/** Static description of a status code; never NULL. @since 0.1 */
CBL_API const char *cbl_status_str(cbl_status s);

/* ---- versions ---- */
/** CBL_VERSION_NUMBER of the linked library. @since 0.1 */
CBL_API int32_t cbl_version_number(void);
/** CBL_VERSION_STRING of the linked library. @since 0.1 */
CBL_API const char *cbl_version_string(void);
/** Build facts, e.g. "cpu_isa=avx512 mimalloc=1 cuda=0". Static string. @since 0.1 */
CBL_API const char *cbl_build_info(void);

/* ---- logging ---- */
typedef enum cbl_log_level {
    CBL_LOG_LEVEL_DEBUG = 0,
    CBL_LOG_LEVEL_INFO = 1,
    CBL_LOG_LEVEL_WARN = 2,
    CBL_LOG_LEVEL_ERROR = 3
} cbl_log_level;
typedef void (*cbl_log_fn)(cbl_log_level level, const char *message, void *user_data);
/** Installs a process-wide log sink (NULL = silent, the default). @since 0.1 */
CBL_API void cbl_log_set(cbl_log_fn fn, void *user_data);

/* ---- memory ---- */
/** Frees memory the library handed to the caller (char*, void*). NULL is a no-op. @since 0.1 */
CBL_API void cbl_free(void *p);

/* ---- models ---- */
typedef struct cbl_model cbl_model;

typedef struct cbl_model_params {
    size_t struct_size;  /* set by cbl_model_params_init() */
    bool vocab_only;     /* load only the tokenizer (vocabulary GGUFs) */
    /* new fields are appended here only */
} cbl_model_params;

static inline void cbl_model_params_init(cbl_model_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

/** Loads a GGUF model. On failure *out_model is NULL. @since 0.1 */
CBL_API cbl_status cbl_model_load(const char *path, const cbl_model_params *params,
                                  cbl_model **out_model);
/** Drops the caller's reference. NULL is a no-op. @since 0.1 */
CBL_API void cbl_model_free(cbl_model *model);
/** Vocabulary size (0 for NULL). @since 0.1 */
CBL_API int32_t cbl_model_n_vocab(const cbl_model *model);
/** Training context length (0 for NULL or vocab-only models). @since 0.1 */
CBL_API int32_t cbl_model_n_ctx_train(const cbl_model *model);

/**
 * Tokenizes text[0..len). add_special adds BOS/EOS as the model's flags say; parse_special
 * matches control-token text. Size-query pattern: with ids == NULL or cap too small, returns
 * CBL_OK / CBL_RANGE respectively and sets *out_n to the number of ids needed. @since 0.1
 */
CBL_API cbl_status cbl_tokenize(const cbl_model *model, const char *text, size_t len,
                                bool add_special, bool parse_special, int32_t *ids, size_t cap,
                                size_t *out_n);

#ifdef __cplusplus
}
#endif

#endif /* CACHEBLEND_H */
