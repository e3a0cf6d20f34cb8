//! The runtime: model + KV store + catalog + index in one shareable handle.
use std::os::raw::c_void;
use std::path::Path;
use std::ptr::{self, NonNull};

use cacheblend_sys as sys;

use crate::error::{check, ErrorKind, Result};
use crate::model::Model;
use crate::options::{
    IngestOptions, ProgressFn, RuntimeOptions, SearchMode, SearchOptions, SessionOptions,
};
use crate::session::Session;
use crate::types::{CorpusStats, Document, Hit, IngestReport, Progress, SearchResults};
use crate::util::{
    cstring, opt_cstring, opt_path_cstring, opt_ptr, path_cstring, string_from, CPairs,
    CallbackState, FreeOnDrop,
};

/// An open runtime (`cbl_runtime`): the model, the embedder, the chunk KV store, the catalog and
/// the vector index of one data directory.
///
/// `Send + Sync`: share it across threads (e.g. in an `Arc`); searches run in parallel, ingest and
/// delete calls are serialized inside the library. Sessions made from it keep it alive, so it may
/// be dropped before them.
#[derive(Debug)]
pub struct Runtime {
    raw: NonNull<sys::cbl_runtime>,
}

// SAFETY: the C API documents cbl_runtime as shareable by any number of threads; the handle is
// reference-counted and only freed by Drop.
unsafe impl Send for Runtime {}
// SAFETY: as above; every runtime function locks internally.
unsafe impl Sync for Runtime {}

impl Runtime {
    /// Opens (creating when missing, unless [`RuntimeOptions::must_exist`]) the data directory and loads the model and the embedder.
    pub fn open(options: &RuntimeOptions) -> Result<Runtime> {
        let model = opt_path_cstring("model path", &options.model_path)?;
        let embedder = opt_path_cstring("embedder path", &options.embedder_path)?;
        let data_dir = opt_path_cstring("data dir", &options.data_dir)?;
        let device = opt_cstring("device", &options.device)?;
        let kv_remote = opt_cstring("kv_remote", &options.kv_remote)?;
        let mut p = sys::cbl_runtime_params::default();
        p.model_path = opt_ptr(&model);
        p.embedder_path = opt_ptr(&embedder);
        p.data_dir = opt_ptr(&data_dir);
        p.kv_budget_bytes = options.kv_budget_bytes;
        p.n_threads = options.n_threads;
        p.device = opt_ptr(&device);
        p.no_embedder = options.no_embedder;
        p.must_exist = options.must_exist;
        p.kv_remote = opt_ptr(&kv_remote);
        p.max_active_requests = options.max_active_requests;
        p.max_queued_requests = options.max_queued_requests;
        p.session_memory_bytes = options.session_memory_bytes;
        let mut out = ptr::null_mut();
        // SAFETY: the strings outlive the call; params and out pointer are valid.
        check(unsafe { sys::cbl_runtime_open(&p, &mut out) })?;
        Ok(Runtime {
            raw: NonNull::new(out).expect("cacheblend: the library returned a NULL runtime"),
        })
    }

    /// The raw handle, still owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::cbl_runtime {
        self.raw.as_ptr()
    }

    /// A new reference to the runtime's model.
    pub fn model(&self) -> Result<Model> {
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid out pointer.
        check(unsafe { sys::cbl_runtime_model(self.raw.as_ptr(), &mut out) })?;
        Ok(Model::from_raw(out))
    }

    /// Why dense retrieval is off ("" when an embedder is loaded).
    pub fn notice(&self) -> String {
        // SAFETY: the string lives until the runtime is freed; it is copied.
        unsafe { string_from(sys::cbl_runtime_notice(self.raw.as_ptr())) }
    }

    /// Aborts the ingest calls running on this runtime now, from any thread: they fail with
    /// [`ErrorKind::Aborted`](crate::ErrorKind::Aborted) after committing whole documents only.
    /// Later calls are not affected.
    pub fn interrupt(&self) {
        // SAFETY: live handle; the C API allows this from any thread.
        unsafe { sys::cbl_runtime_interrupt(self.raw.as_ptr()) }
    }

    /// Ingests `text` as the document `uri`, replacing an older version of it. The document
    /// commits atomically. An [`ErrorKind::Aborted`](crate::ErrorKind::Aborted) error carries the
    /// report of what was committed ([`Error::report`](crate::Error::report)).
    pub fn ingest_text(
        &self,
        uri: &str,
        text: &str,
        options: &mut IngestOptions<'_>,
    ) -> Result<IngestReport> {
        let uri = cstring("uri", uri)?;
        self.ingest(options, |p, report| {
            // SAFETY: uri and text outlive the call (text by pointer and length).
            unsafe {
                sys::cbl_runtime_ingest_text(
                    self.raw.as_ptr(),
                    uri.as_ptr(),
                    text.as_ptr() as *const _,
                    text.len(),
                    p,
                    report,
                )
            }
        })
    }

    /// Ingests a file or, recursively, a folder (.txt, .md, .html). Unchanged files are skipped by
    /// content hash; files that cannot be read are skipped with a reason (progress phase `"skip"`,
    /// counted in [`IngestReport::skipped`]) and the rest go on. Notices, e.g. that chunks are
    /// stored for BM25 only without an embedder, arrive as progress phase `"notice"`. Symbolic
    /// links (unless [`IngestOptions::follow_symlinks`]), special files and files over
    /// [`IngestOptions::max_file_bytes`] are skipped so. Documents committed before an abort or
    /// error stay, and an [`ErrorKind::Aborted`](crate::ErrorKind::Aborted) error carries their
    /// report ([`Error::report`](crate::Error::report)).
    pub fn ingest_path(
        &self,
        path: impl AsRef<Path>,
        options: &mut IngestOptions<'_>,
    ) -> Result<IngestReport> {
        let path = path_cstring("path", path.as_ref())?;
        self.ingest(options, |p, report| {
            // SAFETY: path outlives the call.
            unsafe { sys::cbl_runtime_ingest_path(self.raw.as_ptr(), path.as_ptr(), p, report) }
        })
    }

    fn ingest(
        &self,
        options: &mut IngestOptions<'_>,
        call: impl FnOnce(*const sys::cbl_ingest_params, *mut sys::cbl_ingest_report) -> i32,
    ) -> Result<IngestReport> {
        let collection = opt_cstring("collection", &options.collection)?;
        let metadata = opt_cstring("metadata_json", &options.metadata_json)?;
        let mut p = sys::cbl_ingest_params::default();
        p.collection = opt_ptr(&collection);
        p.metadata_json = opt_ptr(&metadata);
        p.format = options.format_raw();
        p.chunk_tokens = options.chunk_tokens;
        p.precompute_kv = options.precompute_kv;
        p.follow_symlinks = options.follow_symlinks;
        p.max_file_bytes = options.max_file_bytes;
        p.max_file_seconds = options.max_file_seconds;
        let mut state = options.progress.as_mut().map(|f| CallbackState {
            panic: None,
            f: &mut **f,
        });
        if let Some(s) = state.as_mut() {
            p.progress = Some(progress_trampoline);
            p.progress_user_data = s as *mut CallbackState<&mut ProgressFn<'_>> as *mut c_void;
        }
        let mut report = sys::cbl_ingest_report::default();
        let result = check(call(&p, &mut report)); // reads the message before anything else
        if let Some(s) = state.as_mut() {
            s.resume();
        }
        match result {
            Ok(()) => Ok(IngestReport::from_c(&report)),
            // Only an abort fills the report (with what was committed); after other errors it
            // is not written.
            Err(e) if e.kind() == ErrorKind::Aborted => {
                Err(e.with_report(IngestReport::from_c(&report)))
            }
            Err(e) => Err(e),
        }
    }

    /// Removes a document, its vectors and (last reference) its chunks' KV. Returns whether it
    /// existed.
    pub fn delete(&self, uri: &str) -> Result<bool> {
        let uri = cstring("uri", uri)?;
        let mut found = false;
        // SAFETY: valid pointers for the duration of the call.
        check(unsafe { sys::cbl_runtime_delete(self.raw.as_ptr(), uri.as_ptr(), &mut found) })?;
        Ok(found)
    }

    /// [`delete`](Self::delete) that also counts what went: `removed` is 1 when the document
    /// existed (else 0), `chunks_removed` its chunks and `kv_deleted` the chunk KV files whose last
    /// reference went; the other counts are 0.
    pub fn delete_counted(&self, uri: &str) -> Result<IngestReport> {
        let uri = cstring("uri", uri)?;
        let mut report = sys::cbl_ingest_report::default();
        // SAFETY: valid pointers for the duration of the call; `report` has struct_size set.
        check(unsafe {
            sys::cbl_runtime_delete_counted(self.raw.as_ptr(), uri.as_ptr(), &mut report)
        })?;
        Ok(IngestReport::from_c(&report))
    }

    /// Counts the documents, chunks and stored chunk KV of the data directory.
    pub fn stats(&self) -> Result<CorpusStats> {
        let mut st = sys::cbl_corpus_stats::default();
        // SAFETY: live handle; `st` is an output struct with struct_size set.
        check(unsafe { sys::cbl_runtime_stats(self.raw.as_ptr(), &mut st) })?;
        Ok(CorpusStats::from_c(&st))
    }

    /// Checks that the catalog, the vector index and the KV store agree: the problems found, one
    /// per element, or an empty `Vec` when they agree. An `Err` means the check could not run.
    pub fn check(&self) -> Result<Vec<String>> {
        let mut out: *mut std::os::raw::c_char = ptr::null_mut();
        // SAFETY: live handle, valid out pointer.
        check(unsafe { sys::cbl_runtime_check(self.raw.as_ptr(), &mut out) })?;
        if out.is_null() {
            return Ok(Vec::new());
        }
        let guard = FreeOnDrop(out as *mut c_void, sys::cbl_free);
        // SAFETY: a NUL-terminated string the library allocated for us; the guard frees it.
        let text = unsafe { string_from(guard.0 as *const _) };
        Ok(text
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Repairs what [`check`](Self::check) finds where it can: rebuilds the catalog's full-text
    /// index and the vector index from the catalog, embeds chunks without embeddings, deletes
    /// damaged and unreferenced KV files, finishes pending deletes and, with `precompute_kv`,
    /// computes missing chunk KV. A catalog that SQLite finds damaged is left as it is
    /// (re-ingest into a new data directory). Like an ingest, it waits while another process
    /// writes to the data directory.
    ///
    /// Returns the report, one line per item starting with `"repaired: "`, `"not repaired: "`
    /// (still a problem, which `check` lists) or `"note: "`, and `""` when there was nothing to
    /// do. Problems left are not an `Err`, as in the C API (`cbl_runtime_repair` returns
    /// `CBL_OK`): look for `"not repaired: "` lines or call `check`. An `Err` means the repair
    /// could not run.
    pub fn repair(&self, precompute_kv: bool) -> Result<String> {
        let mut p = sys::cbl_ingest_params::default();
        p.precompute_kv = precompute_kv;
        let mut out: *mut std::os::raw::c_char = ptr::null_mut();
        // SAFETY: live handle, valid params and out pointer.
        check(unsafe { sys::cbl_runtime_repair(self.raw.as_ptr(), &p, &mut out) })?;
        if out.is_null() {
            return Ok(String::new());
        }
        let guard = FreeOnDrop(out as *mut c_void, sys::cbl_free);
        // SAFETY: a NUL-terminated string the library allocated for us; the guard frees it.
        Ok(unsafe { string_from(guard.0 as *const _) })
    }

    /// The best chunks for `query`, best first, with the retrieval mode that ran.
    pub fn search(&self, query: &str, options: &SearchOptions) -> Result<SearchResults> {
        let query = cstring("query", query)?;
        let collection = opt_cstring("collection", &options.collection)?;
        let prefix = opt_cstring("uri_prefix", &options.uri_prefix)?;
        let metadata = CPairs::new("metadata filter", &options.metadata)?;
        let mut p = sys::cbl_search_params::default();
        p.k = options.k;
        p.mode = options.mode_raw();
        p.collection = opt_ptr(&collection);
        p.uri_prefix = opt_ptr(&prefix);
        (p.metadata_keys, p.metadata_values, p.n_metadata) = metadata.raw();
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the duration of the call (the strings and arrays they point
        // to are owned by locals that outlive it).
        check(unsafe { sys::cbl_runtime_search(self.raw.as_ptr(), query.as_ptr(), &p, &mut out) })?;
        let res = FreeOnDrop(out, sys::cbl_results_free);
        // SAFETY: res is a live results handle until the guard drops at the end of this function.
        unsafe {
            let n = sys::cbl_results_count(res.0);
            let mut hits = Vec::with_capacity(n);
            for i in 0..n {
                hits.push(Hit::read(|h| sys::cbl_results_hit(res.0, i, h))?);
            }
            Ok(SearchResults {
                hits,
                notice: string_from(sys::cbl_results_notice(res.0)),
                mode: SearchMode::from_raw(sys::cbl_results_mode(res.0)),
            })
        }
    }

    /// The documents a search with `filter` may return (its collection, uri prefix and metadata
    /// filters; `k` and the mode are not read), ordered by uri.
    pub fn documents(&self, filter: &SearchOptions) -> Result<Vec<Document>> {
        let collection = opt_cstring("collection", &filter.collection)?;
        let prefix = opt_cstring("uri_prefix", &filter.uri_prefix)?;
        let metadata = CPairs::new("metadata filter", &filter.metadata)?;
        let mut p = sys::cbl_search_params::default();
        p.collection = opt_ptr(&collection);
        p.uri_prefix = opt_ptr(&prefix);
        (p.metadata_keys, p.metadata_values, p.n_metadata) = metadata.raw();
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the duration of the call (owned by locals that outlive it).
        check(unsafe { sys::cbl_runtime_documents(self.raw.as_ptr(), &p, &mut out) })?;
        let list = FreeOnDrop(out, sys::cbl_documents_free);
        // SAFETY: list is a live handle until the guard drops at the end of this function.
        unsafe {
            let n = sys::cbl_documents_count(list.0);
            let mut docs = Vec::with_capacity(n);
            for i in 0..n {
                docs.push(Document::read(|d| sys::cbl_documents_get(list.0, i, d))?);
            }
            Ok(docs)
        }
    }

    /// A new session over the runtime's model and KV store. It keeps the runtime alive.
    pub fn session(&self, options: &SessionOptions) -> Result<Session> {
        let device = opt_cstring("device", &options.device)?;
        let p = options.to_c(&device);
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers (device's included) for the duration of the call.
        check(unsafe { sys::cbl_session_create(self.raw.as_ptr(), &p, &mut out) })?;
        Ok(Session::from_raw(out))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // SAFETY: this reference is released exactly once; sessions hold their own.
        unsafe { sys::cbl_runtime_free(self.raw.as_ptr()) }
    }
}

/// `cbl_progress_fn` for [`Runtime::ingest`]: `user` is the `CallbackState` on its stack.
unsafe extern "C" fn progress_trampoline(p: *const sys::cbl_progress, user: *mut c_void) -> bool {
    if p.is_null() || user.is_null() {
        return true;
    }
    // SAFETY: user points at the live CallbackState of the ingest call running on this thread
    // (callbacks run on the calling thread); nothing else touches it during the call.
    let state = &mut *(user as *mut CallbackState<&mut ProgressFn<'_>>);
    // SAFETY: *p and its strings are valid during the callback, and the Progress does not
    // escape it.
    state.invoke(|f| f(&Progress::from_c(p)))
}
