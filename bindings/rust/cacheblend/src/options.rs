//! Builder-style parameters. `Default` (or `new()`) is the library default for every field, as a
//! zeroed C params struct is; each setter fills one field of the sized C struct (`metadata` adds
//! one filter pair per call).
use std::ffi::CString;
use std::fmt;
use std::path::PathBuf;

use cacheblend_sys as sys;

use crate::types::Progress;
use crate::util::opt_ptr;

/// How a session prefills a prompt (`CBL_MODE_*`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Compute every prompt token (the quality oracle).
    Full,
    /// Reuse only the leading chunk's KV (exact prefix caching).
    Prefix,
    /// Reuse every cached chunk's KV as is (no recompute).
    Reuse,
    /// CacheBlend: reuse cached KV and recompute the most deviating tokens (the default).
    Blend,
}

impl Mode {
    pub(crate) fn raw(self) -> i32 {
        match self {
            Mode::Full => sys::CBL_MODE_FULL,
            Mode::Prefix => sys::CBL_MODE_PREFIX,
            Mode::Reuse => sys::CBL_MODE_REUSE,
            Mode::Blend => sys::CBL_MODE_BLEND,
        }
    }

    pub(crate) fn from_raw(v: i32) -> Option<Mode> {
        match v {
            sys::CBL_MODE_FULL => Some(Mode::Full),
            sys::CBL_MODE_PREFIX => Some(Mode::Prefix),
            sys::CBL_MODE_REUSE => Some(Mode::Reuse),
            sys::CBL_MODE_BLEND => Some(Mode::Blend),
            _ => None,
        }
    }
}

/// How chunks are retrieved (`CBL_SEARCH_*`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchMode {
    /// Dense + BM25 with reciprocal-rank fusion (the default).
    Hybrid,
    /// Embedder + FAISS only.
    Dense,
    /// SQLite FTS5 BM25 only.
    Bm25,
}

impl SearchMode {
    pub(crate) fn from_raw(v: i32) -> Option<SearchMode> {
        match v {
            sys::CBL_SEARCH_HYBRID => Some(SearchMode::Hybrid),
            sys::CBL_SEARCH_DENSE => Some(SearchMode::Dense),
            sys::CBL_SEARCH_BM25 => Some(SearchMode::Bm25),
            _ => None,
        }
    }

    fn raw(self) -> i32 {
        match self {
            SearchMode::Hybrid => sys::CBL_SEARCH_HYBRID,
            SearchMode::Dense => sys::CBL_SEARCH_DENSE,
            SearchMode::Bm25 => sys::CBL_SEARCH_BM25,
        }
    }
}

/// KV format of the chunk store (`CBL_KV_*`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvFormat {
    /// 16-bit floats (the default).
    F16,
    /// 8 bits per token and head: half the bytes, a small fidelity cost.
    Q8,
    /// K in 32-bit floats: 1.5x the bytes of `F16`, and a reused chunk's KV is exactly what full
    /// prefill computes.
    Exact,
}

/// Format of a document given to [`Runtime::ingest_text`](crate::Runtime::ingest_text)
/// (`CBL_DOC_*`); files go by their extension, else their content.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DocFormat {
    /// Plain text (the default).
    Text,
    /// Markdown.
    Markdown,
    /// HTML; markup is stripped.
    Html,
}

fn opt_raw<T>(v: Option<T>, raw: impl Fn(T) -> i32) -> i32 {
    v.map_or(0, raw)
}

/// Builder setters: each `/// docs fn name(arg: Type) { field = value }` becomes
/// `#[must_use] pub fn name(mut self, arg: Type) -> Self`, which stores `value` in `self.field`
/// and returns `self`. The doc comments stay on the generated methods.
macro_rules! setters {
    ($($(#[$attr:meta])* fn $name:ident($arg:ident: $ty:ty) { $field:ident = $value:expr })*) => {
        $(
            $(#[$attr])*
            #[must_use]
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}

/// Parameters of [`Runtime::open`](crate::Runtime::open) (`cbl_runtime_params`).
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    pub(crate) model_path: Option<PathBuf>,
    pub(crate) embedder_path: Option<PathBuf>,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) kv_budget_bytes: u64,
    pub(crate) n_threads: i32,
    pub(crate) device: Option<String>,
    pub(crate) no_embedder: bool,
    pub(crate) must_exist: bool,
    pub(crate) kv_remote: Option<String>,
    pub(crate) max_active_requests: i32,
    pub(crate) max_queued_requests: i32,
    pub(crate) session_memory_bytes: u64,
}

impl RuntimeOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// The GGUF model, a file or a model name (default: `$CBL_MODEL`, else
        /// qwen2.5-coder-1.5b in the user cache).
        fn model_path(path: impl Into<PathBuf>) { model_path = Some(path.into()) }
        /// The embedding model (default: `$CBL_EMBED_MODEL`, else the default embedder; when that
        /// file is missing retrieval is BM25-only and [`Runtime::notice`](crate::Runtime::notice)
        /// says so).
        fn embedder_path(path: impl Into<PathBuf>) { embedder_path = Some(path.into()) }
        /// The data directory, created 0700 (default:
        /// `${XDG_DATA_HOME:-~/.local/share}/cacheblend`).
        fn data_dir(dir: impl Into<PathBuf>) { data_dir = Some(dir.into()) }
        /// Bytes of chunk KV kept before the least recently used is evicted (0 = 8 GiB).
        fn kv_budget_bytes(bytes: u64) { kv_budget_bytes = bytes }
        /// Compute threads (0 = all cores).
        fn n_threads(n: i32) { n_threads = n }
        /// The device, e.g. `"cpu"` or `"cuda:0"` (default `"cpu"`; one this build lacks is
        /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)).
        fn device(device: impl Into<String>) { device = Some(device.into()) }
        /// Do not load an embedder: retrieval is BM25-only.
        fn no_embedder(yes: bool) { no_embedder = yes }
        /// Open an existing data directory only: when it holds no catalog, `open` fails with
        /// [`ErrorKind::Io`](crate::ErrorKind::Io) ("no data directory at ...") and creates
        /// nothing. For read-only tools, where a mistyped path must not become an empty corpus.
        fn must_exist(yes: bool) { must_exist = yes }
        /// The shared chunk-KV tier, `"redis://[user:password@]host:port/db"` (default:
        /// `$CBL_KV_REMOTE`, else none). A server that is down, slow or refuses the password
        /// only makes requests use local KV or recompute ([`Stats::notice`](crate::Stats) says
        /// so); a malformed URL is [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
        fn kv_remote(url: impl Into<String>) { kv_remote = Some(url.into()) }
        /// Session calls (ask, prefills, generate) running at once, taking turns on the
        /// runtime's threads (0 = 4).
        fn max_active_requests(n: i32) { max_active_requests = n }
        /// Calls waiting for a turn beyond those, in arrival order (0 = 64, negative = none);
        /// one more fails at once with [`ErrorKind::Busy`](crate::ErrorKind::Busy): retry later.
        fn max_queued_requests(n: i32) { max_queued_requests = n }
        /// RAM for all sessions' working KV caches and compute scratch together (0 = half of
        /// physical memory); a session past it fails with
        /// [`ErrorKind::NoMem`](crate::ErrorKind::NoMem) instead of an OOM kill.
        fn session_memory_bytes(bytes: u64) { session_memory_bytes = bytes }
    }
}

/// Parameters of a [`Session`](crate::Session) (`cbl_session_params`).
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    pub(crate) n_threads: i32,
    pub(crate) n_ctx: i32,
    pub(crate) mode: Option<Mode>,
    pub(crate) recompute_ratio: f32,
    pub(crate) auto_ratio: bool,
    pub(crate) kv_format: Option<KvFormat>,
    pub(crate) device: Option<String>,
}

impl SessionOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Compute threads (0 = the runtime's, or all cores).
        fn n_threads(n: i32) { n_threads = n }
        /// Context length in tokens (0 = the model's training context, at most 8192).
        fn n_ctx(n: i32) { n_ctx = n }
        /// The prefill mode (default [`Mode::Blend`]).
        fn mode(mode: Mode) { mode = Some(mode) }
        /// Share of reused tokens recomputed in [`Mode::Blend`], in (0, 1] (0 = 0.15).
        fn recompute_ratio(ratio: f32) { recompute_ratio = ratio }
        /// Pick the ratio from measured load and compute rates.
        fn auto_ratio(yes: bool) { auto_ratio = yes }
        /// KV format of chunks this session stores (default [`KvFormat::F16`]).
        fn kv_format(format: KvFormat) { kv_format = Some(format) }
        /// The device, e.g. `"cpu"` or `"cuda:0"` (default: the runtime's; `"cpu"` for
        /// [`Session::with_model`](crate::Session::with_model)). One this build lacks is
        /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported), one this machine lacks
        /// [`ErrorKind::Device`](crate::ErrorKind::Device).
        fn device(device: impl Into<String>) { device = Some(device.into()) }
    }

    /// The C struct; its `device` points into `device`, which must outlive the call.
    pub(crate) fn to_c(&self, device: &Option<CString>) -> sys::cbl_session_params {
        let mut p = sys::cbl_session_params::default();
        p.n_threads = self.n_threads;
        p.n_ctx = self.n_ctx;
        p.mode = opt_raw(self.mode, Mode::raw);
        p.recompute_ratio = self.recompute_ratio;
        p.auto_ratio = self.auto_ratio;
        p.kv_format = opt_raw(self.kv_format, |f| match f {
            KvFormat::F16 => sys::CBL_KV_F16,
            KvFormat::Q8 => sys::CBL_KV_Q8,
            KvFormat::Exact => sys::CBL_KV_EXACT,
        });
        p.device = opt_ptr(device);
        p
    }
}

/// The progress callback of an ingest: return `false` to abort it.
pub type ProgressFn<'a> = dyn FnMut(&Progress<'_>) -> bool + 'a;

/// Parameters of [`Runtime::ingest_text`](crate::Runtime::ingest_text) and
/// [`Runtime::ingest_path`](crate::Runtime::ingest_path) (`cbl_ingest_params`), with an optional
/// progress closure that may borrow local state for `'a`.
#[derive(Default)]
pub struct IngestOptions<'a> {
    pub(crate) collection: Option<String>,
    pub(crate) metadata_json: Option<String>,
    pub(crate) format: Option<DocFormat>,
    pub(crate) chunk_tokens: i32,
    pub(crate) precompute_kv: bool,
    pub(crate) follow_symlinks: bool,
    pub(crate) max_file_bytes: i64,
    pub(crate) max_file_seconds: f64,
    pub(crate) progress: Option<Box<ProgressFn<'a>>>,
}

impl<'a> IngestOptions<'a> {
    /// All library defaults, no progress callback.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// The collection the documents join; searches can filter on it.
        fn collection(name: impl Into<String>) { collection = Some(name.into()) }
        /// `ingest_text` only: a JSON object stored with the document.
        fn metadata_json(json: impl Into<String>) { metadata_json = Some(json.into()) }
        /// `ingest_text` only: the document's format (files go by their extension or content).
        fn format(format: DocFormat) { format = Some(format) }
        /// LLM tokens per chunk (0 = 512).
        fn chunk_tokens(n: i32) { chunk_tokens = n }
        /// Compute every new chunk's KV now (else on first use).
        fn precompute_kv(yes: bool) { precompute_kv = yes }
        /// `ingest_path`: follow a symbolic link met in the folder when its real path stays
        /// inside that folder. By default (and for a link leading out) it is skipped with the
        /// reason `"symbolic link (not followed)"`. A path passed in is followed either way.
        fn follow_symlinks(yes: bool) { follow_symlinks = yes }
        /// Skip larger files with a reason (0 = [`IngestOptions::DEFAULT_MAX_FILE_BYTES`], 16 MiB;
        /// [`IngestOptions::NO_FILE_SIZE_LIMIT`] = none); `ingest_text` of a larger text is
        /// [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
        fn max_file_bytes(bytes: i64) { max_file_bytes = bytes }
        /// Abandon a file not committed within this many seconds (nothing of it is committed),
        /// skip it with `"took longer than N s"` and go on with the next file; `ingest_text`
        /// fails with [`ErrorKind::Aborted`](crate::ErrorKind::Aborted) (0 = no limit).
        fn max_file_seconds(seconds: f64) { max_file_seconds = seconds }
    }
    /// Called on the ingesting thread as work proceeds, including phase `"skip"` for every file
    /// that cannot be ingested. Return `false` to abort ([`ErrorKind::Aborted`](crate::ErrorKind));
    /// documents committed before stay. A panic inside it aborts the ingest and is re-raised
    /// once the library has returned.
    #[must_use]
    pub fn progress<F>(mut self, f: F) -> Self
    where
        F: FnMut(&Progress<'_>) -> bool + 'a,
    {
        self.progress = Some(Box::new(f));
        self
    }
}

impl fmt::Debug for IngestOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IngestOptions")
            .field("collection", &self.collection)
            .field("metadata_json", &self.metadata_json)
            .field("format", &self.format)
            .field("chunk_tokens", &self.chunk_tokens)
            .field("precompute_kv", &self.precompute_kv)
            .field("follow_symlinks", &self.follow_symlinks)
            .field("max_file_bytes", &self.max_file_bytes)
            .field("max_file_seconds", &self.max_file_seconds)
            .field("progress", &self.progress.as_ref().map(|_| "FnMut"))
            .finish()
    }
}

impl IngestOptions<'_> {
    /// The size above which a file is skipped when [`max_file_bytes`](Self::max_file_bytes) is 0
    /// (`CBL_DEFAULT_MAX_FILE_BYTES`, 16 MiB).
    pub const DEFAULT_MAX_FILE_BYTES: i64 = sys::CBL_DEFAULT_MAX_FILE_BYTES;
    /// As [`max_file_bytes`](Self::max_file_bytes): files of any size are read.
    pub const NO_FILE_SIZE_LIMIT: i64 = i64::MAX;

    pub(crate) fn format_raw(&self) -> i32 {
        opt_raw(self.format, |f| match f {
            DocFormat::Text => sys::CBL_DOC_TEXT,
            DocFormat::Markdown => sys::CBL_DOC_MARKDOWN,
            DocFormat::Html => sys::CBL_DOC_HTML,
        })
    }
}

/// Parameters of [`Runtime::search`](crate::Runtime::search) (`cbl_search_params`).
///
/// The filters combine: a chunk is returned only if its document passes every one that is set
/// ([`collection`](SearchOptions::collection), [`uri_prefix`](SearchOptions::uri_prefix) and each
/// [`metadata`](SearchOptions::metadata) pair).
#[derive(Clone, Debug, Default)]
pub struct SearchOptions {
    pub(crate) k: i32,
    pub(crate) mode: Option<SearchMode>,
    pub(crate) collection: Option<String>,
    pub(crate) uri_prefix: Option<String>,
    pub(crate) metadata: Vec<(String, String)>,
}

impl SearchOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Hits to return (0 = 5).
        fn k(k: i32) { k = k }
        /// The retrieval mode (default [`SearchMode::Hybrid`]).
        fn mode(mode: SearchMode) { mode = Some(mode) }
        /// Only chunks of this collection.
        fn collection(name: impl Into<String>) { collection = Some(name.into()) }
        /// Only documents whose uri starts with `prefix`.
        fn uri_prefix(prefix: impl Into<String>) { uri_prefix = Some(prefix.into()) }
    }
    /// Only documents whose metadata holds `value` under `key`; repeat for more pairs, which must
    /// all hold. A document's metadata is the JSON object given to
    /// [`IngestOptions::metadata_json`]; ingested files carry `"kind"` (`"text"`, `"markdown"` or
    /// `"html"`) and `"path"`. Values compare as text, so `"2021"` matches the JSON number 2021.
    /// Keys are 1 to 128 of `[A-Za-z0-9_.-]` and name top-level fields (`"a.b"` is the key
    /// `"a.b"`, not a nested field); another key, or a NUL byte in a key or value, makes the
    /// search fail with [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }
    pub(crate) fn mode_raw(&self) -> i32 {
        opt_raw(self.mode, SearchMode::raw)
    }
}

/// Parameters of [`Session::ask`](crate::Session::ask) (`cbl_ask_params`; the token callback is
/// the closure given to `ask`).
#[derive(Clone, Debug, Default)]
pub struct AskOptions {
    pub(crate) k: i32,
    pub(crate) search_mode: Option<SearchMode>,
    pub(crate) collection: Option<String>,
    pub(crate) uri_prefix: Option<String>,
    pub(crate) max_tokens: i32,
    pub(crate) temperature: f32,
    pub(crate) seed: u64,
    pub(crate) compare_full: bool,
    pub(crate) top_logprobs: i32,
    pub(crate) metadata: Vec<(String, String)>,
    pub(crate) top_k: i32,
    pub(crate) top_p: f32,
    pub(crate) min_p: f32,
    pub(crate) repeat_penalty: f32,
    pub(crate) repeat_last_n: i32,
    pub(crate) frequency_penalty: f32,
    pub(crate) presence_penalty: f32,
}

impl AskOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Chunks to retrieve (0 = 4).
        fn k(k: i32) { k = k }
        /// The retrieval mode (default [`SearchMode::Hybrid`]).
        fn search_mode(mode: SearchMode) { search_mode = Some(mode) }
        /// Retrieve only from this collection.
        fn collection(name: impl Into<String>) { collection = Some(name.into()) }
        /// Retrieve only from documents whose uri starts with `prefix`.
        fn uri_prefix(prefix: impl Into<String>) { uri_prefix = Some(prefix.into()) }
        /// Most tokens to generate (0 = 128).
        fn max_tokens(n: i32) { max_tokens = n }
        /// Sampling temperature (0 = greedy).
        fn temperature(t: f32) { temperature = t }
        /// Sampling seed, used when the temperature is above 0.
        fn seed(seed: u64) { seed = seed }
        /// Also time the same prompt in [`Mode::Full`] ([`Stats::full_ttft_ms`](crate::Stats)).
        fn compare_full(yes: bool) { compare_full = yes }
        /// Record the `k` most likely first tokens in [`Answer::top_logprobs`](crate::Answer)
        /// (0 = none).
        fn top_logprobs(k: i32) { top_logprobs = k }
        /// As [`GenerateOptions::top_k`].
        fn top_k(k: i32) { top_k = k }
        /// As [`GenerateOptions::top_p`].
        fn top_p(p: f32) { top_p = p }
        /// As [`GenerateOptions::min_p`].
        fn min_p(p: f32) { min_p = p }
        /// As [`GenerateOptions::repeat_penalty`], but 0 is ask's default, 1.1: answers are
        /// greedy with this penalty over the last 64 tokens, which keeps them on the passages'
        /// wording and ends the loops plain greedy decoding falls into. 1 = plain greedy.
        fn repeat_penalty(p: f32) { repeat_penalty = p }
        /// As [`GenerateOptions::repeat_last_n`].
        fn repeat_last_n(n: i32) { repeat_last_n = n }
        /// As [`GenerateOptions::frequency_penalty`].
        fn frequency_penalty(p: f32) { frequency_penalty = p }
        /// As [`GenerateOptions::presence_penalty`].
        fn presence_penalty(p: f32) { presence_penalty = p }
    }
    /// Retrieve only from documents whose metadata holds `value` under `key`; repeat for more
    /// pairs, which must all hold. Keys and values work as in [`SearchOptions::metadata`]. When no
    /// chunk passes the filters, [`Session::ask`](crate::Session::ask) fails with
    /// [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }
    pub(crate) fn search_mode_raw(&self) -> i32 {
        opt_raw(self.search_mode, SearchMode::raw)
    }
}

/// Parameters of [`Session::generate`](crate::Session::generate) (`cbl_generate_params`).
///
/// [`top_k`](GenerateOptions::top_k), [`top_p`](GenerateOptions::top_p) and
/// [`min_p`](GenerateOptions::min_p) filter the candidates when the temperature is above 0
/// (greedy decoding ignores them). Each defaults to the library's value and has an "off" value.
#[derive(Clone, Debug, Default)]
pub struct GenerateOptions {
    pub(crate) max_tokens: i32,
    pub(crate) temperature: f32,
    pub(crate) seed: u64,
    pub(crate) top_logprobs: i32,
    pub(crate) ignore_eog: bool,
    pub(crate) top_k: i32,
    pub(crate) top_p: f32,
    pub(crate) min_p: f32,
    pub(crate) repeat_penalty: f32,
    pub(crate) repeat_last_n: i32,
    pub(crate) frequency_penalty: f32,
    pub(crate) presence_penalty: f32,
}

impl GenerateOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Most tokens to generate (0 = 128).
        fn max_tokens(n: i32) { max_tokens = n }
        /// Sampling temperature (0 = greedy).
        fn temperature(t: f32) { temperature = t }
        /// Sampling seed, used when the temperature is above 0.
        fn seed(seed: u64) { seed = seed }
        /// Record the `k` most likely first tokens in [`Answer::top_logprobs`](crate::Answer)
        /// (0 = none).
        fn top_logprobs(k: i32) { top_logprobs = k }
        /// Keep generating past end-of-generation tokens, so that exactly
        /// [`max_tokens`](GenerateOptions::max_tokens) tokens come out unless the context fills
        /// (for benchmarks).
        fn ignore_eog(yes: bool) { ignore_eog = yes }
        /// Sample among the `k` most likely tokens (0 = 40, negative = off).
        fn top_k(k: i32) { top_k = k }
        /// Nucleus sampling: keep the most likely tokens up to probability mass `p` (0 = 0.95,
        /// 1 or more = off; negative is [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg)).
        fn top_p(p: f32) { top_p = p }
        /// Drop tokens less likely than `p` times the most likely one (0 = 0.05, negative = off).
        fn min_p(p: f32) { min_p = p }
        /// Repetition penalty (llama.cpp's), applied before greedy selection too: the logit of a
        /// token seen in the last [`repeat_last_n`](GenerateOptions::repeat_last_n) tokens of the
        /// context (the prompt included) is divided by `p` when positive, multiplied when not.
        /// End-of-generation tokens are never penalized. 0 = 1 = off; negative is
        /// [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
        fn repeat_penalty(p: f32) { repeat_penalty = p }
        /// The penalties' window in tokens (0 = 64, -1 = the whole context).
        fn repeat_last_n(n: i32) { repeat_last_n = n }
        /// Lower a token's logit by `p` times its count in the window (0 = off).
        fn frequency_penalty(p: f32) { frequency_penalty = p }
        /// Lower the logit of every token in the window by `p` (0 = off).
        fn presence_penalty(p: f32) { presence_penalty = p }
    }
}

/// Parameters of [`Session::prefill_text`](crate::Session::prefill_text) (`cbl_prompt_params`).
/// The default prefills the text as it is.
#[derive(Clone, Debug, Default)]
pub struct PromptOptions {
    pub(crate) chat: bool,
    pub(crate) system: Option<String>,
    pub(crate) parse_special: bool,
}

impl PromptOptions {
    /// A plain prompt: the text as it is.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Render the text as a user message in the model's chat template, ready for the
        /// assistant's reply.
        fn chat(yes: bool) { chat = yes }
        /// A system message before the user's (chat prompts only: without
        /// [`chat`](PromptOptions::chat) it is
        /// [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg)).
        fn system(message: impl Into<String>) { system = Some(message.into()) }
        /// Match control-token text such as `<|im_start|>` in a plain prompt (chat prompts always
        /// do).
        fn parse_special(yes: bool) { parse_special = yes }
    }
}

/// Parameters of [`Model::load`](crate::Model::load) (`cbl_model_params`).
#[derive(Clone, Debug, Default)]
pub struct ModelOptions {
    pub(crate) vocab_only: bool,
}

impl ModelOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Load only the tokenizer (vocabulary GGUFs).
        fn vocab_only(yes: bool) { vocab_only = yes }
    }
}

/// Parameters of [`KvStore::open`](crate::KvStore::open) (`cbl_kvstore_params`).
#[derive(Clone, Debug, Default)]
pub struct KvStoreOptions {
    pub(crate) budget_bytes: u64,
    pub(crate) direct_io: bool,
}

impl KvStoreOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Bytes kept before the least recently used chunk KV is evicted (0 = 8 GiB).
        fn budget_bytes(bytes: u64) { budget_bytes = bytes }
        /// Read with O_DIRECT (bypassing the page cache).
        fn direct_io(yes: bool) { direct_io = yes }
    }
}
