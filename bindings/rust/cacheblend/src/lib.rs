//! Safe Rust API for libcacheblend, an embedded RAG runtime that answers questions over your
//! documents and reuses each chunk's KV cache across requests (CacheBlend).
//!
//! ```no_run
//! use cacheblend::{AskOptions, IngestOptions, Runtime, RuntimeOptions, SessionOptions};
//!
//! fn main() -> Result<(), cacheblend::Error> {
//!     let rt = Runtime::open(&RuntimeOptions::new().data_dir("/tmp/cacheblend-demo"))?;
//!     let mut opts = IngestOptions::new().progress(|p| {
//!         if p.phase == "skip" {
//!             eprintln!("skipped {}: {}", p.current, p.message);
//!         }
//!         true
//!     });
//!     rt.ingest_path("docs/", &mut opts)?;
//!     let mut session = rt.session(&SessionOptions::new())?;
//!     let answer = session.ask("What is CacheBlend?", &AskOptions::new().max_tokens(64), |text| {
//!         print!("{}", text);
//!         true // false stops generating
//!     })?;
//!     for (i, hit) in answer.citations.iter().enumerate() {
//!         println!("[{}] {}:{}-{}", i + 1, hit.uri, hit.start, hit.end);
//!     }
//!     println!("TTFT {:.1} ms", answer.stats.ttft_ms);
//!     Ok(())
//! }
//! ```
//!
//! Without retrieval, a session prefills a whole prompt of your own, plain or in the model's chat
//! template, and generates from it; such a session needs only a model:
//!
//! ```no_run
//! use cacheblend::{GenerateOptions, Model, ModelOptions, PromptOptions, Session, SessionOptions};
//!
//! fn main() -> Result<(), cacheblend::Error> {
//!     let model = Model::load_default(&ModelOptions::new())?;
//!     let mut session = Session::with_model(&model, None, &SessionOptions::new().n_ctx(1024))?;
//!     let prompt = PromptOptions::new().chat(true).system("Answer in one line.");
//!     session.prefill_text("Name three rivers.", &prompt)?;
//!     let answer = session.generate(&GenerateOptions::new().max_tokens(32), |text| {
//!         print!("{}", text);
//!         true
//!     })?;
//!     println!("\n({} prompt tokens, {} generated)", session.prompt_tokens().len(), answer.tokens.len());
//!     Ok(())
//! }
//! ```
//!
//! # Handles and threads
//! [`Runtime`], [`Model`] and [`KvStore`] are `Send + Sync`: share them (in an `Arc`) across
//! threads. A [`Session`] is `Send` only and serves one call at a time (`&mut self`); a
//! [`CancelHandle`] stops its running call from any thread. The library reference-counts its
//! objects, so handles have no lifetimes and drop in any order: a session keeps its runtime alive.
//!
//! # Errors
//! Every fallible call returns [`Result`]; an [`Error`] carries the library's [`Status`] (match on
//! [`Error::kind`]) and the message the library left for that call on the calling thread.
//!
//! # Callbacks
//! Progress and token callbacks are closures run on the calling thread during the call. A panic
//! inside one never unwinds into C: the call is stopped and the panic is re-raised when it returns.
//!
//! # Linking
//! `cacheblend-sys` finds the library through `$CBL_BUILD_DIR` (a CMake build tree) or
//! `pkg-config cacheblend`, and adds an rpath for its directory.
#![deny(missing_docs)]
// C params are filled as in C: the *_init helper (zeroed, padding included), then assignments.
#![allow(clippy::field_reassign_with_default)]

mod error;
mod model;
mod options;
mod runtime;
mod session;
mod types;
mod util;

use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;

pub use cacheblend_sys as sys;

pub use error::{Error, ErrorKind, Result, Status};
pub use model::{KvStore, Model};
pub use options::{
    AskOptions, DocFormat, GenerateOptions, IngestOptions, KvFormat, KvStoreOptions, Mode,
    ModelOptions, ProgressFn, PromptOptions, RuntimeOptions, SearchMode, SearchOptions,
    SessionOptions,
};
pub use runtime::Runtime;
pub use session::{CancelHandle, Session};
pub use types::{
    Answer, CorpusStats, Document, Hit, IngestReport, LogLevel, Progress, SearchResults, Stats,
    StopReason, TokenLogprob,
};

fn static_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: the library's version, build-info and device-name strings are static.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// The linked library's version number, `MAJOR * 1000000 + MINOR * 1000 + PATCH`. Compare its
/// major with [`sys::CBL_VERSION_MAJOR`] (the header this binding mirrors).
pub fn version_number() -> i32 {
    // SAFETY: no preconditions.
    unsafe { sys::cbl_version_number() }
}

/// The linked library's version, e.g. `"0.1.0"`.
pub fn version() -> &'static str {
    // SAFETY: no preconditions; static string.
    static_str(unsafe { sys::cbl_version_string() })
}

/// Build facts, e.g. `"cpu_isa=avx512 mimalloc=1 cuda=0"`.
pub fn build_info() -> &'static str {
    // SAFETY: no preconditions; static string.
    static_str(unsafe { sys::cbl_build_info() })
}

/// The compute devices (`"cpu"` first, then e.g. `"cuda:0"`).
pub fn devices() -> Vec<String> {
    // SAFETY: indices in 0..cbl_device_count() name static strings.
    let n = unsafe { sys::cbl_device_count() };
    (0..n)
        .map(|i| static_str(unsafe { sys::cbl_device_name(i) }).to_string())
        .collect()
}

type LogFn = Box<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// The installed log sink. The library holds a pointer to the inner box until `cbl_log_set`
/// replaces it, and it calls the sink under its own lock, so the old sink is dropped only after
/// `cbl_log_set` has returned.
static LOGGER: Mutex<Option<Box<LogFn>>> = Mutex::new(None);

/// Sends the library's log messages to `sink`, from whichever thread logs, replacing any earlier
/// sink (the library is silent by default). The sink must not call into the library; a panic in
/// it is caught and ignored.
pub fn set_logger<F>(sink: F)
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    install_logger(Some(Box::new(Box::new(sink))));
}

/// Silences the library's log again (the default) and drops the sink set by [`set_logger`].
pub fn clear_logger() {
    install_logger(None);
}

fn install_logger(new: Option<Box<LogFn>>) {
    let mut slot = LOGGER.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the user pointer is the heap address of the boxed sink, which stays allocated
    // until a later call replaces it after cbl_log_set has returned.
    unsafe {
        match &new {
            Some(b) => sys::cbl_log_set(Some(log_trampoline), &**b as *const LogFn as *mut c_void),
            None => sys::cbl_log_set(None, std::ptr::null_mut()),
        }
    }
    *slot = new;
}

unsafe extern "C" fn log_trampoline(
    level: sys::cbl_log_level,
    msg: *const c_char,
    user: *mut c_void,
) {
    if user.is_null() || msg.is_null() {
        return;
    }
    // SAFETY: user is the LogFn installed by install_logger, alive while the library uses it.
    let sink = &*(user as *const LogFn);
    let text = CStr::from_ptr(msg).to_string_lossy();
    let _ = panic::catch_unwind(AssertUnwindSafe(|| sink(LogLevel::from_raw(level), &text)));
}
