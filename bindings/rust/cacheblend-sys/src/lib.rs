//! Raw FFI declarations for libcacheblend's C ABI, written by hand to mirror
//! `capi/include/cacheblend.h` exactly (no bindgen). `tests/header.rs` checks them against the
//! header: every function and callback signature, every struct's size, alignment and field
//! offsets, and every constant's value.
//!
//! Everything here is `unsafe` to use; the `cacheblend` crate is the safe API. Conventions are the
//! header's: every fallible function returns [`cbl_status`] and leaves a thread-local message in
//! [`cbl_last_error`]; params structs start with `struct_size`, which the `*_init` helpers below
//! (the Rust versions of the header's `static inline` ones) set to this crate's `size_of`.
//!
//! The library is found by `build.rs`: `$CBL_BUILD_DIR` (a CMake build tree, with
//! `$CBL_INCLUDE_DIR` for the header), else `pkg-config cacheblend`.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::mem::size_of;
pub use std::os::raw::{c_char, c_uint, c_void};

// ---- status codes ----
/// The largest `struct_size` a sized struct may carry; above it a call is `CBL_INVALID_ARG`.
pub const CBL_MAX_STRUCT_SIZE: usize = 4096;
/// `cbl_ingest_params.max_file_bytes` when 0: 16 MiB.
pub const CBL_DEFAULT_MAX_FILE_BYTES: i64 = 16 << 20;

/// Status of every fallible call; `CBL_OK` (0) on success, `(s & 0xff)` is the primary code.
pub type cbl_status = i32;
pub const CBL_OK: cbl_status = 0;
pub const CBL_ERROR: cbl_status = 1;
pub const CBL_INVALID_ARG: cbl_status = 2;
pub const CBL_MISUSE: cbl_status = 3;
pub const CBL_NOMEM: cbl_status = 4;
pub const CBL_IO: cbl_status = 5;
pub const CBL_CORRUPT: cbl_status = 6;
pub const CBL_FORMAT: cbl_status = 7;
pub const CBL_UNSUPPORTED: cbl_status = 8;
pub const CBL_DEVICE: cbl_status = 9;
pub const CBL_ABORTED: cbl_status = 10;
pub const CBL_RANGE: cbl_status = 11;
pub const CBL_CATALOG: cbl_status = 12;
pub const CBL_INTERNAL: cbl_status = 13;
pub const CBL_BUSY: cbl_status = 14;
pub const CBL_IO_READ: cbl_status = CBL_IO | (1 << 8);
pub const CBL_IO_WRITE: cbl_status = CBL_IO | (2 << 8);
pub const CBL_DEVICE_OOM: cbl_status = CBL_DEVICE | (1 << 8);

// ---- versions (of the header these declarations mirror) ----
pub const CBL_VERSION_MAJOR: i32 = 0;
pub const CBL_VERSION_MINOR: i32 = 1;
pub const CBL_VERSION_PATCH: i32 = 0;
pub const CBL_VERSION_NUMBER: i32 =
    CBL_VERSION_MAJOR * 1000000 + CBL_VERSION_MINOR * 1000 + CBL_VERSION_PATCH;
pub const CBL_VERSION_STRING: &str = "0.1.0";

// ---- logging ----
/// `enum cbl_log_level` (an `unsigned int` on the C side: every value is non-negative).
pub type cbl_log_level = c_uint;
pub const CBL_LOG_LEVEL_DEBUG: cbl_log_level = 0;
pub const CBL_LOG_LEVEL_INFO: cbl_log_level = 1;
pub const CBL_LOG_LEVEL_WARN: cbl_log_level = 2;
pub const CBL_LOG_LEVEL_ERROR: cbl_log_level = 3;
pub type cbl_log_fn = Option<
    unsafe extern "C" fn(level: cbl_log_level, message: *const c_char, user_data: *mut c_void),
>;

// ---- enums ----
pub const CBL_MODE_DEFAULT: i32 = 0;
pub const CBL_MODE_FULL: i32 = 1;
pub const CBL_MODE_PREFIX: i32 = 2;
pub const CBL_MODE_REUSE: i32 = 3;
pub const CBL_MODE_BLEND: i32 = 4;
pub const CBL_SEARCH_DEFAULT: i32 = 0;
pub const CBL_SEARCH_HYBRID: i32 = 1;
pub const CBL_SEARCH_DENSE: i32 = 2;
pub const CBL_SEARCH_BM25: i32 = 3;
pub const CBL_KV_DEFAULT: i32 = 0;
pub const CBL_KV_F16: i32 = 1;
pub const CBL_KV_Q8: i32 = 2;
pub const CBL_KV_EXACT: i32 = 3;
pub const CBL_DOC_DEFAULT: i32 = 0;
pub const CBL_DOC_TEXT: i32 = 1;
pub const CBL_DOC_MARKDOWN: i32 = 2;
pub const CBL_DOC_HTML: i32 = 3;
pub const CBL_STOP_NONE: i32 = 0;
pub const CBL_STOP_EOG: i32 = 1;
pub const CBL_STOP_LENGTH: i32 = 2;
pub const CBL_STOP_CONTEXT: i32 = 3;
pub const CBL_STOP_CALLBACK: i32 = 4;

// Kinds for cbl_enum_name / cbl_enum_parse.
pub const CBL_NAMES_MODE: i32 = 1;
pub const CBL_NAMES_SEARCH: i32 = 2;
pub const CBL_NAMES_KV_FORMAT: i32 = 3;
pub const CBL_NAMES_DOC: i32 = 4;
pub const CBL_NAMES_STOP: i32 = 5;

// ---- opaque handles ----
macro_rules! opaque {
    ($($name:ident),*) => {$(
        /// Opaque, reference-counted library handle; only ever used behind a pointer.
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}
opaque!(
    cbl_model,
    cbl_runtime,
    cbl_results,
    cbl_documents,
    cbl_kvstore,
    cbl_session,
    cbl_answer
);

// ---- params and output structs ----
/// Zeroes `*p` (padding included, like the header's `memset`) and sets `struct_size`.
macro_rules! init_fn {
    ($($init:ident => $ty:ident),* $(,)?) => {$(
        /// Rust version of the header's `static inline` helper: zeroes the struct (padding
        /// included) and sets `struct_size` to this crate's `size_of`.
        #[inline]
        pub fn $init(p: &mut $ty) {
            // SAFETY: every field of these structs is valid when all bytes are zero (integers,
            // floats, bool, nullable raw pointers and Option<fn>).
            unsafe { std::ptr::write_bytes(p as *mut $ty, 0, 1) };
            p.struct_size = size_of::<$ty>();
        }
        impl Default for $ty {
            /// The struct as its `*_init` helper leaves it: zeroed, `struct_size` set.
            fn default() -> Self {
                // SAFETY: all-zero bytes are a valid value (see above).
                let mut v: $ty = unsafe { std::mem::zeroed() };
                $init(&mut v);
                v
            }
        }
    )*};
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_model_params {
    pub struct_size: usize,
    pub vocab_only: bool,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_runtime_params {
    pub struct_size: usize,
    pub model_path: *const c_char,
    pub embedder_path: *const c_char,
    pub data_dir: *const c_char,
    pub kv_budget_bytes: u64,
    pub n_threads: i32,
    pub device: *const c_char,
    pub no_embedder: bool,
    pub must_exist: bool,
    pub kv_remote: *const c_char,
    pub max_active_requests: i32,
    pub max_queued_requests: i32,
    pub session_memory_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_progress {
    pub struct_size: usize,
    pub phase: *const c_char,
    pub done: i64,
    pub total: i64,
    pub current: *const c_char,
    pub message: *const c_char,
}

pub type cbl_progress_fn =
    Option<unsafe extern "C" fn(progress: *const cbl_progress, user_data: *mut c_void) -> bool>;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_ingest_params {
    pub struct_size: usize,
    pub collection: *const c_char,
    pub metadata_json: *const c_char,
    pub format: i32,
    pub chunk_tokens: i32,
    pub precompute_kv: bool,
    pub progress: cbl_progress_fn,
    pub progress_user_data: *mut c_void,
    pub follow_symlinks: bool,
    pub max_file_bytes: i64,
    pub max_file_seconds: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_ingest_report {
    pub struct_size: usize,
    pub files_seen: i64,
    pub added: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub removed: i64,
    pub skipped: i64,
    pub chunks_added: i64,
    pub chunks_removed: i64,
    pub embedded: i64,
    pub kv_computed: i64,
    pub kv_deleted: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_corpus_stats {
    pub struct_size: usize,
    pub documents: i64,
    pub chunks: i64,
    pub kv_entries: i64,
    pub kv_bytes: u64,
    pub vectors: i64,
    pub catalog_bytes: u64,
    pub index_bytes: u64,
    pub kv_budget_bytes: u64,
    pub disk_free_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_search_params {
    pub struct_size: usize,
    pub k: i32,
    pub mode: i32,
    pub collection: *const c_char,
    pub uri_prefix: *const c_char,
    pub metadata_keys: *const *const c_char,
    pub metadata_values: *const *const c_char,
    pub n_metadata: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_hit {
    pub struct_size: usize,
    pub chunk_id: i64,
    pub uri: *const c_char,
    pub start: i64,
    pub end: i64,
    pub score: f64,
    pub text: *const c_char,
    pub text_len: usize,
    pub n_tokens: i32,
    pub page: i32,
    pub heading: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_document_info {
    pub struct_size: usize,
    pub uri: *const c_char,
    pub kind: *const c_char,
    pub collection: *const c_char,
    pub metadata_json: *const c_char,
    pub n_chunks: i64,
    pub n_kv_chunks: i64,
    pub source_bytes: i64,
    pub mtime_ns: i64,
    pub ingested_at: i64,
    pub kv_bytes: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_kvstore_params {
    pub struct_size: usize,
    pub budget_bytes: u64,
    pub direct_io: bool,
    pub kv_remote: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_session_params {
    pub struct_size: usize,
    pub n_threads: i32,
    pub n_ctx: i32,
    pub mode: i32,
    pub recompute_ratio: f32,
    pub auto_ratio: bool,
    pub kv_format: i32,
    pub calibrated_ratio: bool,
    pub device: *const c_char,
}

pub type cbl_token_fn = Option<
    unsafe extern "C" fn(
        piece: *const c_char,
        len: usize,
        token: i32,
        user_data: *mut c_void,
    ) -> bool,
>;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_generate_params {
    pub struct_size: usize,
    pub max_tokens: i32,
    pub temperature: f32,
    pub seed: u64,
    pub on_token: cbl_token_fn,
    pub user_data: *mut c_void,
    pub top_logprobs: i32,
    pub ignore_eog: bool,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub repeat_last_n: i32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_prompt_params {
    pub struct_size: usize,
    pub chat: bool,
    pub system: *const c_char,
    pub parse_special: bool,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_ask_params {
    pub struct_size: usize,
    pub k: i32,
    pub search_mode: i32,
    pub collection: *const c_char,
    pub uri_prefix: *const c_char,
    pub max_tokens: i32,
    pub temperature: f32,
    pub seed: u64,
    pub on_token: cbl_token_fn,
    pub user_data: *mut c_void,
    pub compare_full: bool,
    pub top_logprobs: i32,
    pub metadata_keys: *const *const c_char,
    pub metadata_values: *const *const c_char,
    pub n_metadata: usize,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub repeat_last_n: i32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cbl_stats {
    pub struct_size: usize,
    pub mode: i32,
    pub ratio: f32,
    pub ttft_ms: f64,
    pub prefill_ms: f64,
    pub load_ms: f64,
    pub load_wait_ms: f64,
    pub select_ms: f64,
    pub compute_ms: f64,
    pub search_ms: f64,
    pub store_ms: f64,
    pub decode_tokens_per_s: f64,
    pub full_ttft_ms: f64,
    pub prompt_tokens: i64,
    pub tokens_reused: i64,
    pub tokens_recomputed: i64,
    pub tokens_missed: i64,
    pub bytes_loaded: u64,
    pub chunks_hit: i32,
    pub chunks_missed: i32,
    pub chunks_used: i32,
    pub chunks_dropped: i32,
    pub generated_tokens: i32,
    pub stop_reason: i32,
    pub search_mode: i32,
    pub n_ctx: i32,
    pub notice: *const c_char,
    pub tokens_remote: i64,
    pub bytes_remote: u64,
    pub dense_ms: f64,
    pub relocate_ms: f64,
    pub queue_ms: f64,
}

init_fn! {
    cbl_model_params_init => cbl_model_params,
    cbl_runtime_params_init => cbl_runtime_params,
    cbl_ingest_params_init => cbl_ingest_params,
    cbl_ingest_report_init => cbl_ingest_report,
    cbl_corpus_stats_init => cbl_corpus_stats,
    cbl_prompt_params_init => cbl_prompt_params,
    cbl_search_params_init => cbl_search_params,
    cbl_hit_init => cbl_hit,
    cbl_document_info_init => cbl_document_info,
    cbl_kvstore_params_init => cbl_kvstore_params,
    cbl_session_params_init => cbl_session_params,
    cbl_generate_params_init => cbl_generate_params,
    cbl_ask_params_init => cbl_ask_params,
    cbl_stats_init => cbl_stats,
}

extern "C" {
    // ---- errors ----
    pub fn cbl_last_error() -> *const c_char;
    pub fn cbl_last_status() -> cbl_status;
    pub fn cbl_status_str(s: cbl_status) -> *const c_char;

    // ---- versions ----
    pub fn cbl_version_number() -> i32;
    pub fn cbl_version_string() -> *const c_char;
    pub fn cbl_build_info() -> *const c_char;

    // ---- logging, memory ----
    pub fn cbl_log_set(fn_: cbl_log_fn, user_data: *mut c_void);
    pub fn cbl_free(p: *mut c_void);

    // ---- models ----
    pub fn cbl_model_load(
        path: *const c_char,
        params: *const cbl_model_params,
        out_model: *mut *mut cbl_model,
    ) -> cbl_status;
    pub fn cbl_model_free(model: *mut cbl_model);
    pub fn cbl_model_n_vocab(model: *const cbl_model) -> i32;
    pub fn cbl_model_n_ctx_train(model: *const cbl_model) -> i32;
    pub fn cbl_tokenize(
        model: *const cbl_model,
        text: *const c_char,
        len: usize,
        add_special: bool,
        parse_special: bool,
        ids: *mut i32,
        cap: usize,
        out_n: *mut usize,
    ) -> cbl_status;

    // ---- devices ----
    pub fn cbl_device_count() -> i32;
    pub fn cbl_device_name(i: i32) -> *const c_char;
    pub fn cbl_enum_name(kind: i32, value: i32) -> *const c_char;
    pub fn cbl_enum_parse(kind: i32, name: *const c_char, out_value: *mut i32) -> cbl_status;

    // ---- runtime ----
    pub fn cbl_runtime_open(
        params: *const cbl_runtime_params,
        out_runtime: *mut *mut cbl_runtime,
    ) -> cbl_status;
    pub fn cbl_runtime_free(runtime: *mut cbl_runtime);
    pub fn cbl_runtime_model(
        runtime: *mut cbl_runtime,
        out_model: *mut *mut cbl_model,
    ) -> cbl_status;
    pub fn cbl_runtime_notice(runtime: *const cbl_runtime) -> *const c_char;
    pub fn cbl_runtime_interrupt(runtime: *mut cbl_runtime);

    // ---- ingest ----
    pub fn cbl_runtime_ingest_text(
        runtime: *mut cbl_runtime,
        uri: *const c_char,
        text: *const c_char,
        len: usize,
        params: *const cbl_ingest_params,
        out_report: *mut cbl_ingest_report,
    ) -> cbl_status;
    pub fn cbl_runtime_ingest_path(
        runtime: *mut cbl_runtime,
        path: *const c_char,
        params: *const cbl_ingest_params,
        out_report: *mut cbl_ingest_report,
    ) -> cbl_status;
    pub fn cbl_runtime_delete(
        runtime: *mut cbl_runtime,
        uri: *const c_char,
        out_found: *mut bool,
    ) -> cbl_status;
    pub fn cbl_runtime_delete_counted(
        runtime: *mut cbl_runtime,
        uri: *const c_char,
        out_report: *mut cbl_ingest_report,
    ) -> cbl_status;
    pub fn cbl_runtime_stats(
        runtime: *mut cbl_runtime,
        out_stats: *mut cbl_corpus_stats,
    ) -> cbl_status;
    pub fn cbl_runtime_check(
        runtime: *mut cbl_runtime,
        out_problems: *mut *mut c_char,
    ) -> cbl_status;
    pub fn cbl_runtime_repair(
        runtime: *mut cbl_runtime,
        params: *const cbl_ingest_params,
        out_report: *mut *mut c_char,
    ) -> cbl_status;

    // ---- search ----
    pub fn cbl_runtime_search(
        runtime: *mut cbl_runtime,
        query: *const c_char,
        params: *const cbl_search_params,
        out_results: *mut *mut cbl_results,
    ) -> cbl_status;
    pub fn cbl_results_count(results: *const cbl_results) -> usize;
    pub fn cbl_results_hit(
        results: *const cbl_results,
        i: usize,
        out_hit: *mut cbl_hit,
    ) -> cbl_status;
    pub fn cbl_results_notice(results: *const cbl_results) -> *const c_char;
    pub fn cbl_results_mode(results: *const cbl_results) -> i32;
    pub fn cbl_results_free(results: *mut cbl_results);

    // ---- documents ----
    pub fn cbl_runtime_documents(
        runtime: *mut cbl_runtime,
        filter: *const cbl_search_params,
        out_documents: *mut *mut cbl_documents,
    ) -> cbl_status;
    pub fn cbl_documents_count(documents: *const cbl_documents) -> usize;
    pub fn cbl_documents_get(
        documents: *const cbl_documents,
        i: usize,
        out_info: *mut cbl_document_info,
    ) -> cbl_status;
    pub fn cbl_documents_free(documents: *mut cbl_documents);

    // ---- chunk KV store ----
    pub fn cbl_kvstore_open(
        dir: *const c_char,
        params: *const cbl_kvstore_params,
        out_store: *mut *mut cbl_kvstore,
    ) -> cbl_status;
    pub fn cbl_kvstore_free(store: *mut cbl_kvstore);

    // ---- sessions ----
    pub fn cbl_session_create(
        runtime: *mut cbl_runtime,
        params: *const cbl_session_params,
        out_session: *mut *mut cbl_session,
    ) -> cbl_status;
    pub fn cbl_session_create_with(
        model: *mut cbl_model,
        store: *mut cbl_kvstore,
        params: *const cbl_session_params,
        out_session: *mut *mut cbl_session,
    ) -> cbl_status;
    pub fn cbl_session_free(session: *mut cbl_session);
    pub fn cbl_session_cancel(session: *mut cbl_session);
    pub fn cbl_session_ask(
        session: *mut cbl_session,
        question: *const c_char,
        params: *const cbl_ask_params,
        out_answer: *mut *mut cbl_answer,
    ) -> cbl_status;
    pub fn cbl_session_prefill_chunks(
        session: *mut cbl_session,
        chunks: *const *const c_char,
        lens: *const usize,
        n_chunks: usize,
        question: *const c_char,
        out_stats: *mut cbl_stats,
    ) -> cbl_status;
    pub fn cbl_session_prefill_text(
        session: *mut cbl_session,
        text: *const c_char,
        len: usize,
        params: *const cbl_prompt_params,
        out_stats: *mut cbl_stats,
    ) -> cbl_status;
    pub fn cbl_session_prefill_tokens(
        session: *mut cbl_session,
        tokens: *const i32,
        n: usize,
        out_stats: *mut cbl_stats,
    ) -> cbl_status;
    pub fn cbl_session_prompt_tokens(session: *const cbl_session, out_n: *mut usize) -> *const i32;
    pub fn cbl_session_generate(
        session: *mut cbl_session,
        params: *const cbl_generate_params,
        out_answer: *mut *mut cbl_answer,
    ) -> cbl_status;

    // ---- answers ----
    pub fn cbl_answer_text(answer: *const cbl_answer) -> *const c_char;
    pub fn cbl_answer_n_citations(answer: *const cbl_answer) -> usize;
    pub fn cbl_answer_citation(
        answer: *const cbl_answer,
        i: usize,
        out_hit: *mut cbl_hit,
    ) -> cbl_status;
    pub fn cbl_answer_tokens(answer: *const cbl_answer, out_n: *mut usize) -> *const i32;
    pub fn cbl_answer_n_top_logprobs(answer: *const cbl_answer) -> usize;
    pub fn cbl_answer_top_logprob(
        answer: *const cbl_answer,
        i: usize,
        out_token: *mut i32,
        out_logprob: *mut f32,
    ) -> cbl_status;
    pub fn cbl_answer_stats(answer: *const cbl_answer, out_stats: *mut cbl_stats) -> cbl_status;
    pub fn cbl_answer_free(answer: *mut cbl_answer);

    // ---- tokens ----
    pub fn cbl_token_to_piece(
        model: *const cbl_model,
        token: i32,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> cbl_status;
}
