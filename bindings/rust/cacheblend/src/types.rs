//! Owned copies of the library's results: hits, statistics, answers, ingest reports, progress.
use std::borrow::Cow;
use std::ffi::CStr;
use std::mem::size_of;
use std::os::raw::c_char;
use std::ptr::addr_of;

use cacheblend_sys as sys;

use crate::error::{check, Result};
use crate::options::{Mode, SearchMode};
use crate::util::{string_from, FreeOnDrop};

/// One retrieved chunk: a search hit or an answer's citation.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Hit {
    /// The chunk's id in the catalog.
    pub chunk_id: i64,
    /// The document it comes from.
    pub uri: String,
    /// Byte offset of the chunk's start in the source document.
    pub start: i64,
    /// Byte offset of the chunk's end in the source document.
    pub end: i64,
    /// RRF (hybrid), cosine (dense) or -bm25 (bm25): higher is better.
    pub score: f64,
    /// The chunk's text.
    pub text: String,
    /// Its length in LLM tokens.
    pub n_tokens: i32,
    /// The 1-based page of a PDF it is on; 0 when the format has no pages.
    pub page: i32,
    /// The nearest heading before it (HTML, DOCX, ODT); "" when none.
    pub heading: String,
}

impl Hit {
    /// Reads hit `i` through `get` (`cbl_results_hit` or `cbl_answer_citation`).
    pub(crate) fn read(get: impl FnOnce(*mut sys::cbl_hit) -> sys::cbl_status) -> Result<Hit> {
        let mut h = sys::cbl_hit::default();
        check(get(&mut h))?;
        let text = if h.text.is_null() {
            String::new()
        } else {
            // SAFETY: text[0..text_len) lives until the results or answer handle is freed, which
            // the caller has not done yet.
            let bytes = unsafe { std::slice::from_raw_parts(h.text as *const u8, h.text_len) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        Ok(Hit {
            chunk_id: h.chunk_id,
            // SAFETY: as above, for the NUL-terminated uri.
            uri: unsafe { string_from(h.uri) },
            start: h.start,
            end: h.end,
            score: h.score,
            text,
            n_tokens: h.n_tokens,
            page: h.page,
            // SAFETY: as above (NULL from a library older than the field reads as "").
            heading: unsafe { string_from(h.heading) },
        })
    }
}

/// The hits of [`Runtime::search`](crate::Runtime::search), best first, and how they were found.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct SearchResults {
    /// Best-first chunks.
    pub hits: Vec<Hit>,
    /// What the retriever changed, e.g. dense search skipped without an embedder ("" if nothing).
    pub notice: String,
    /// The retrieval mode that ran: [`SearchMode::Hybrid`] falls back to [`SearchMode::Bm25`]
    /// without an embedder. `None` for a code this binding does not know.
    pub mode: Option<SearchMode>,
}

/// Why generation stopped (`CBL_STOP_*`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// No generation ran (e.g. the stats of a prefill).
    NotRun,
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// `max_tokens` was reached.
    MaxTokens,
    /// The session's context is full.
    ContextFull,
    /// The token callback returned `false`.
    Callback,
    /// A code this binding does not know.
    Other(i32),
}

impl StopReason {
    fn from_raw(v: i32) -> StopReason {
        match v {
            sys::CBL_STOP_NONE => StopReason::NotRun,
            sys::CBL_STOP_EOG => StopReason::EndOfGeneration,
            sys::CBL_STOP_LENGTH => StopReason::MaxTokens,
            sys::CBL_STOP_CONTEXT => StopReason::ContextFull,
            sys::CBL_STOP_CALLBACK => StopReason::Callback,
            other => StopReason::Other(other),
        }
    }
}

/// Per-request statistics (`cbl_stats`). Times are in milliseconds.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// The prefill mode that ran (`None` for a code this binding does not know).
    pub mode: Option<Mode>,
    /// The recompute ratio used.
    pub ratio: f32,
    /// Request start to the first sampled token.
    pub ttft_ms: f64,
    /// The blended prefill alone.
    pub prefill_ms: f64,
    /// Loading chunk KV from the store.
    pub load_ms: f64,
    /// Time spent waiting for KV loads.
    pub load_wait_ms: f64,
    /// Selecting the tokens to recompute.
    pub select_ms: f64,
    /// Computing.
    pub compute_ms: f64,
    /// Retrieval (ask only).
    pub search_ms: f64,
    /// Storing computed chunk KV after the answer (ask only; not part of the TTFT).
    pub store_ms: f64,
    /// Decode speed.
    pub decode_tokens_per_s: f64,
    /// With [`AskOptions::compare_full`](crate::AskOptions::compare_full): the full prefill's TTFT.
    pub full_ttft_ms: f64,
    /// Tokens in the prompt.
    pub prompt_tokens: i64,
    /// Prompt tokens whose KV came from the store.
    pub tokens_reused: i64,
    /// Reused tokens recomputed.
    pub tokens_recomputed: i64,
    /// Tokens of chunks with no stored KV.
    pub tokens_missed: i64,
    /// Chunk KV bytes read from the store.
    pub bytes_loaded: u64,
    /// Chunks whose KV was in the store.
    pub chunks_hit: i32,
    /// Chunks computed from scratch.
    pub chunks_missed: i32,
    /// Retrieved chunks in the prompt (ask).
    pub chunks_used: i32,
    /// Retrieved chunks left out of the prompt for lack of context (ask).
    pub chunks_dropped: i32,
    /// Tokens generated.
    pub generated_tokens: i32,
    /// Why generation stopped.
    pub stop_reason: StopReason,
    /// The retrieval mode that ran (ask only; hybrid falls back to BM25 without an embedder).
    /// `None` when no retrieval ran or for a code this binding does not know.
    pub search_mode: Option<SearchMode>,
    /// The session's context length in tokens.
    pub n_ctx: i32,
    /// What ran differently, e.g. `"no cached chunks: computed in full"` ("" if nothing).
    pub notice: String,
    /// Of `tokens_reused`: read from the shared tier (`kv_remote`).
    pub tokens_remote: i64,
    /// Of `bytes_loaded`: read from the shared tier.
    pub bytes_remote: u64,
    /// Of `compute_ms`: work on every prompt row (blend: the layers before the check layer and
    /// its Q/K/V projection; full: all of it).
    pub dense_ms: f64,
    /// Of `compute_ms`: rotating stored K into the cache.
    pub relocate_ms: f64,
    /// The call's wait for a turn at the runtime's admission (not part of `ttft_ms`).
    pub queue_ms: f64,
}

impl Stats {
    /// Copies a filled `cbl_stats`.
    ///
    /// # Safety
    /// `s.notice` is NULL or a live NUL-terminated string.
    pub(crate) unsafe fn from_c(s: &sys::cbl_stats) -> Stats {
        Stats {
            mode: Mode::from_raw(s.mode),
            ratio: s.ratio,
            ttft_ms: s.ttft_ms,
            prefill_ms: s.prefill_ms,
            load_ms: s.load_ms,
            load_wait_ms: s.load_wait_ms,
            select_ms: s.select_ms,
            compute_ms: s.compute_ms,
            search_ms: s.search_ms,
            store_ms: s.store_ms,
            decode_tokens_per_s: s.decode_tokens_per_s,
            full_ttft_ms: s.full_ttft_ms,
            prompt_tokens: s.prompt_tokens,
            tokens_reused: s.tokens_reused,
            tokens_recomputed: s.tokens_recomputed,
            tokens_missed: s.tokens_missed,
            bytes_loaded: s.bytes_loaded,
            chunks_hit: s.chunks_hit,
            chunks_missed: s.chunks_missed,
            chunks_used: s.chunks_used,
            chunks_dropped: s.chunks_dropped,
            generated_tokens: s.generated_tokens,
            stop_reason: StopReason::from_raw(s.stop_reason),
            search_mode: SearchMode::from_raw(s.search_mode),
            n_ctx: s.n_ctx,
            notice: string_from(s.notice),
            tokens_remote: s.tokens_remote,
            bytes_remote: s.bytes_remote,
            dense_ms: s.dense_ms,
            relocate_ms: s.relocate_ms,
            queue_ms: s.queue_ms,
        }
    }
}

/// A generated answer, copied out of the library's `cbl_answer`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Answer {
    /// The answer's text (invalid UTF-8, e.g. a sequence cut by `max_tokens`, becomes U+FFFD).
    pub text: String,
    /// The chunks the prompt used, best first (empty for [`Session::generate`](crate::Session)).
    pub citations: Vec<Hit>,
    /// The generated token ids (no prompt, no stop token).
    pub tokens: Vec<i32>,
    /// With `top_logprobs(k)` in the options: the k most likely first tokens, most likely first.
    pub top_logprobs: Vec<TokenLogprob>,
    /// The request's statistics.
    pub stats: Stats,
}

/// A candidate token and its natural-log probability.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct TokenLogprob {
    /// The token id ([`Model::token_to_piece`](crate::Model::token_to_piece) gives its text).
    pub token: i32,
    /// Its natural-log probability.
    pub logprob: f32,
}

impl Answer {
    /// Copies `a` and frees it (also on failure).
    ///
    /// # Safety
    /// `a` is a live answer handle the caller owns; it must not be used afterwards.
    pub(crate) unsafe fn take(a: *mut sys::cbl_answer) -> Result<Answer> {
        let a = FreeOnDrop(a, sys::cbl_answer_free);
        let text = string_from(sys::cbl_answer_text(a.0));
        let n = sys::cbl_answer_n_citations(a.0);
        let mut citations = Vec::with_capacity(n);
        for i in 0..n {
            citations.push(Hit::read(|h| sys::cbl_answer_citation(a.0, i, h))?);
        }
        let mut n_tokens = 0usize;
        let ids = sys::cbl_answer_tokens(a.0, &mut n_tokens);
        let tokens = if ids.is_null() || n_tokens == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(ids, n_tokens).to_vec()
        };
        let n = sys::cbl_answer_n_top_logprobs(a.0);
        let mut top_logprobs = Vec::with_capacity(n);
        for i in 0..n {
            let (mut token, mut logprob) = (0i32, 0f32);
            check(sys::cbl_answer_top_logprob(
                a.0,
                i,
                &mut token,
                &mut logprob,
            ))?;
            top_logprobs.push(TokenLogprob { token, logprob });
        }
        let mut st = sys::cbl_stats::default();
        check(sys::cbl_answer_stats(a.0, &mut st))?;
        let stats = Stats::from_c(&st);
        Ok(Answer {
            text,
            citations,
            tokens,
            top_logprobs,
            stats,
        })
    }
}

/// What [`Runtime::ingest_text`](crate::Runtime::ingest_text) and
/// [`Runtime::ingest_path`](crate::Runtime::ingest_path) did (`cbl_ingest_report`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestReport {
    /// Files looked at.
    pub files_seen: i64,
    /// New documents.
    pub added: i64,
    /// Documents whose content changed.
    pub updated: i64,
    /// Documents skipped because their content hash is unchanged.
    pub unchanged: i64,
    /// Documents removed.
    pub removed: i64,
    /// Files that could not be ingested (each reported through progress phase `"skip"`).
    pub skipped: i64,
    /// Chunks added.
    pub chunks_added: i64,
    /// Chunks removed.
    pub chunks_removed: i64,
    /// Chunks embedded.
    pub embedded: i64,
    /// Chunks whose KV was computed.
    pub kv_computed: i64,
    /// Chunk KV files deleted because their last reference went (updated or removed chunks).
    pub kv_deleted: i64,
}

impl IngestReport {
    pub(crate) fn from_c(r: &sys::cbl_ingest_report) -> IngestReport {
        IngestReport {
            files_seen: r.files_seen,
            added: r.added,
            updated: r.updated,
            unchanged: r.unchanged,
            removed: r.removed,
            skipped: r.skipped,
            chunks_added: r.chunks_added,
            chunks_removed: r.chunks_removed,
            embedded: r.embedded,
            kv_computed: r.kv_computed,
            kv_deleted: r.kv_deleted,
        }
    }
}

/// Counts of a runtime's data directory ([`Runtime::stats`](crate::Runtime::stats),
/// `cbl_corpus_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CorpusStats {
    /// Documents in the catalog.
    pub documents: i64,
    /// Chunks in the catalog.
    pub chunks: i64,
    /// Chunk KV files in the KV store.
    pub kv_entries: i64,
    /// Bytes of those files.
    pub kv_bytes: u64,
    /// Vectors in the dense index (0 without an embedder).
    pub vectors: i64,
    /// Bytes of catalog.db with its write-ahead log.
    pub catalog_bytes: u64,
    /// Bytes of vectors.faiss.
    pub index_bytes: u64,
    /// The KV store's budget ([`RuntimeOptions::kv_budget_bytes`](crate::RuntimeOptions::kv_budget_bytes), 0 resolved to 8 GiB).
    pub kv_budget_bytes: u64,
    /// Bytes free to this user on the data directory's file system.
    pub disk_free_bytes: u64,
}

impl CorpusStats {
    pub(crate) fn from_c(s: &sys::cbl_corpus_stats) -> CorpusStats {
        CorpusStats {
            documents: s.documents,
            chunks: s.chunks,
            kv_entries: s.kv_entries,
            kv_bytes: s.kv_bytes,
            vectors: s.vectors,
            catalog_bytes: s.catalog_bytes,
            index_bytes: s.index_bytes,
            kv_budget_bytes: s.kv_budget_bytes,
            disk_free_bytes: s.disk_free_bytes,
        }
    }
}

/// One document of a data directory ([`Runtime::documents`](crate::Runtime::documents),
/// `cbl_document_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Document {
    /// A file's absolute path, or the uri given to `ingest_text`.
    pub uri: String,
    /// `"text"`, `"markdown"` or `"html"` (`""` when its metadata has none, e.g. `ingest_text`).
    pub kind: String,
    /// The collection (`""` when none).
    pub collection: String,
    /// The document's metadata, a JSON object.
    pub metadata_json: String,
    /// Chunks in the catalog.
    pub chunks: i64,
    /// Chunks whose KV is stored.
    pub kv_chunks: i64,
    /// Size of the source text when ingested.
    pub source_bytes: i64,
    /// The file's modification time when it was ingested (`None` for `ingest_text` documents).
    pub modified: Option<std::time::SystemTime>,
    /// Bytes of its chunks' stored KV files.
    pub kv_bytes: i64,
    /// When the document was last (re)ingested, to the second.
    pub ingested_at: Option<std::time::SystemTime>,
}

impl Document {
    /// Reads document `i` through `get` (`cbl_documents_get`).
    pub(crate) fn read(
        get: impl FnOnce(*mut sys::cbl_document_info) -> sys::cbl_status,
    ) -> Result<Document> {
        let mut d = sys::cbl_document_info::default();
        check(get(&mut d))?;
        let modified = u64::try_from(d.mtime_ns)
            .ok()
            .filter(|&ns| ns > 0)
            .map(|ns| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns));
        let ingested_at = u64::try_from(d.ingested_at)
            .ok()
            .filter(|&s| s > 0)
            .map(|s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s));
        // SAFETY: the strings live until the list is freed, which the caller has not done yet.
        unsafe {
            Ok(Document {
                uri: string_from(d.uri),
                kind: string_from(d.kind),
                collection: string_from(d.collection),
                metadata_json: string_from(d.metadata_json),
                chunks: d.n_chunks,
                kv_chunks: d.n_kv_chunks,
                source_bytes: d.source_bytes,
                modified,
                kv_bytes: d.kv_bytes,
                ingested_at,
            })
        }
    }
}

/// An ingest progress report, borrowed for the duration of the callback.
///
/// Besides the work phases (`"scan"`, `"ingest"`, `"chunk"`, `"embed"`, `"kv"`, `"index"`), two
/// phases report events after the work, numbered `done` = 1..=`total`: `"skip"`, a file that
/// could not be ingested (`current`, with the reason in `message`), and `"notice"`, something
/// worth telling the caller, e.g. that chunks were stored for BM25 only or that the vector index
/// was rebuilt (in `message`). `"chunk"` (bytes) and `"embed"` (chunks) also come during one big
/// file, with `current` naming it. `"wait"` comes every 50-200 ms while another process holds
/// the data directory's writer lock (one writer at a time): `current` names the holder, e.g.
/// `"pid 1234"`, and returning `false` stops waiting
/// ([`ErrorKind::Aborted`](crate::ErrorKind::Aborted)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Progress<'a> {
    /// `"scan"`, `"ingest"`, `"chunk"`, `"embed"`, `"kv"`, `"index"`, `"wait"`, `"skip"` or
    /// `"notice"`.
    pub phase: Cow<'a, str>,
    /// Work done in this phase.
    pub done: i64,
    /// Work in this phase.
    pub total: i64,
    /// The file being worked on, or for `"wait"` the writer ("" when none, and for `"notice"`).
    pub current: Cow<'a, str>,
    /// Phase `"skip"`: why `current` was skipped; phase `"notice"`: the notice ("" otherwise).
    pub message: Cow<'a, str>,
}

impl<'a> Progress<'a> {
    /// Borrows the library's report. Fields past the library's `struct_size` read as empty.
    ///
    /// # Safety
    /// `p` points at a live `cbl_progress` whose strings outlive `'a`.
    pub(crate) unsafe fn from_c(p: *const sys::cbl_progress) -> Progress<'a> {
        let size = (*p).struct_size;
        let has = |field: *const u8, len: usize| field as usize - p as usize + len <= size;
        let text = |field: *const *const c_char| -> Cow<'a, str> {
            if has(field as *const u8, size_of::<*const c_char>()) && !(*field).is_null() {
                CStr::from_ptr(*field).to_string_lossy()
            } else {
                Cow::Borrowed("")
            }
        };
        let int = |field: *const i64| {
            if has(field as *const u8, 8) {
                *field
            } else {
                0
            }
        };
        Progress {
            phase: text(addr_of!((*p).phase)),
            done: int(addr_of!((*p).done)),
            total: int(addr_of!((*p).total)),
            current: text(addr_of!((*p).current)),
            message: text(addr_of!((*p).message)),
        }
    }
}

/// Severity of a library log message.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Debug detail.
    Debug,
    /// Information.
    Info,
    /// Warnings.
    Warn,
    /// Errors.
    Error,
}

impl LogLevel {
    pub(crate) fn from_raw(v: sys::cbl_log_level) -> LogLevel {
        match v {
            sys::CBL_LOG_LEVEL_DEBUG => LogLevel::Debug,
            sys::CBL_LOG_LEVEL_INFO => LogLevel::Info,
            sys::CBL_LOG_LEVEL_WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}
