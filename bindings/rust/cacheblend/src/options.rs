//! Builder-style parameters. `Default` (or `new()`) is the library default for every field, as a
//! zeroed C params struct is; each setter fills one field of the sized C struct.
use std::fmt;
use std::path::PathBuf;

use cacheblend_sys as sys;

use crate::types::Progress;

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
}

/// Format of a document given to [`Runtime::ingest_text`](crate::Runtime::ingest_text)
/// (`CBL_DOC_*`); files go by their extension.
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
}

impl RuntimeOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// The GGUF model (default: `$CBL_MODEL`, else the default model in the user cache).
    #[must_use]
    pub fn model_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.model_path = Some(path.into());
        self
    }
    /// The embedding model (default: `$CBL_EMBED_MODEL`, else the default embedder; when that file
    /// is missing retrieval is BM25-only and [`Runtime::notice`](crate::Runtime::notice) says so).
    #[must_use]
    pub fn embedder_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.embedder_path = Some(path.into());
        self
    }
    /// The data directory, created 0700 (default: `${XDG_DATA_HOME:-~/.local/share}/cacheblend`).
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }
    /// Bytes of chunk KV kept before the least recently used is evicted (0 = 8 GiB).
    #[must_use]
    pub fn kv_budget_bytes(mut self, bytes: u64) -> Self {
        self.kv_budget_bytes = bytes;
        self
    }
    /// Compute threads (0 = all cores).
    #[must_use]
    pub fn n_threads(mut self, n: i32) -> Self {
        self.n_threads = n;
        self
    }
    /// The device, e.g. `"cpu"` or `"cuda:0"` (default `"cpu"`; one this build lacks is
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)).
    #[must_use]
    pub fn device(mut self, device: impl Into<String>) -> Self {
        self.device = Some(device.into());
        self
    }
    /// Do not load an embedder: retrieval is BM25-only.
    #[must_use]
    pub fn no_embedder(mut self, yes: bool) -> Self {
        self.no_embedder = yes;
        self
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
}

impl SessionOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Compute threads (0 = the runtime's, or all cores).
    #[must_use]
    pub fn n_threads(mut self, n: i32) -> Self {
        self.n_threads = n;
        self
    }
    /// Context length in tokens (0 = the model's training context, at most 8192).
    #[must_use]
    pub fn n_ctx(mut self, n: i32) -> Self {
        self.n_ctx = n;
        self
    }
    /// The prefill mode (default [`Mode::Blend`]).
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }
    /// Share of reused tokens recomputed in [`Mode::Blend`], in (0, 1] (0 = 0.15).
    #[must_use]
    pub fn recompute_ratio(mut self, ratio: f32) -> Self {
        self.recompute_ratio = ratio;
        self
    }
    /// Pick the ratio from measured load and compute rates.
    #[must_use]
    pub fn auto_ratio(mut self, yes: bool) -> Self {
        self.auto_ratio = yes;
        self
    }
    /// KV format of chunks this session stores (default [`KvFormat::F16`]).
    #[must_use]
    pub fn kv_format(mut self, format: KvFormat) -> Self {
        self.kv_format = Some(format);
        self
    }

    pub(crate) fn to_c(&self) -> sys::cbl_session_params {
        let mut p = sys::cbl_session_params::default();
        p.n_threads = self.n_threads;
        p.n_ctx = self.n_ctx;
        p.mode = opt_raw(self.mode, Mode::raw);
        p.recompute_ratio = self.recompute_ratio;
        p.auto_ratio = self.auto_ratio;
        p.kv_format = opt_raw(self.kv_format, |f| match f {
            KvFormat::F16 => sys::CBL_KV_F16,
            KvFormat::Q8 => sys::CBL_KV_Q8,
        });
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
    pub(crate) progress: Option<Box<ProgressFn<'a>>>,
}

impl<'a> IngestOptions<'a> {
    /// All library defaults, no progress callback.
    pub fn new() -> Self {
        Self::default()
    }
    /// The collection the documents join; searches can filter on it.
    #[must_use]
    pub fn collection(mut self, name: impl Into<String>) -> Self {
        self.collection = Some(name.into());
        self
    }
    /// `ingest_text` only: a JSON object stored with the document.
    #[must_use]
    pub fn metadata_json(mut self, json: impl Into<String>) -> Self {
        self.metadata_json = Some(json.into());
        self
    }
    /// `ingest_text` only: the document's format (files go by their extension).
    #[must_use]
    pub fn format(mut self, format: DocFormat) -> Self {
        self.format = Some(format);
        self
    }
    /// LLM tokens per chunk (0 = 512).
    #[must_use]
    pub fn chunk_tokens(mut self, n: i32) -> Self {
        self.chunk_tokens = n;
        self
    }
    /// Compute every new chunk's KV now (else on first use).
    #[must_use]
    pub fn precompute_kv(mut self, yes: bool) -> Self {
        self.precompute_kv = yes;
        self
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
            .field("progress", &self.progress.as_ref().map(|_| "FnMut"))
            .finish()
    }
}

impl IngestOptions<'_> {
    pub(crate) fn format_raw(&self) -> i32 {
        opt_raw(self.format, |f| match f {
            DocFormat::Text => sys::CBL_DOC_TEXT,
            DocFormat::Markdown => sys::CBL_DOC_MARKDOWN,
            DocFormat::Html => sys::CBL_DOC_HTML,
        })
    }
}

/// Parameters of [`Runtime::search`](crate::Runtime::search) (`cbl_search_params`).
#[derive(Clone, Debug, Default)]
pub struct SearchOptions {
    pub(crate) k: i32,
    pub(crate) mode: Option<SearchMode>,
    pub(crate) collection: Option<String>,
    pub(crate) uri_prefix: Option<String>,
}

impl SearchOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Hits to return (0 = 5).
    #[must_use]
    pub fn k(mut self, k: i32) -> Self {
        self.k = k;
        self
    }
    /// The retrieval mode (default [`SearchMode::Hybrid`]).
    #[must_use]
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = Some(mode);
        self
    }
    /// Only chunks of this collection.
    #[must_use]
    pub fn collection(mut self, name: impl Into<String>) -> Self {
        self.collection = Some(name.into());
        self
    }
    /// Only documents whose uri starts with `prefix`.
    #[must_use]
    pub fn uri_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.uri_prefix = Some(prefix.into());
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
}

impl AskOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Chunks to retrieve (0 = 4).
    #[must_use]
    pub fn k(mut self, k: i32) -> Self {
        self.k = k;
        self
    }
    /// The retrieval mode (default [`SearchMode::Hybrid`]).
    #[must_use]
    pub fn search_mode(mut self, mode: SearchMode) -> Self {
        self.search_mode = Some(mode);
        self
    }
    /// Retrieve only from this collection.
    #[must_use]
    pub fn collection(mut self, name: impl Into<String>) -> Self {
        self.collection = Some(name.into());
        self
    }
    /// Retrieve only from documents whose uri starts with `prefix`.
    #[must_use]
    pub fn uri_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.uri_prefix = Some(prefix.into());
        self
    }
    /// Most tokens to generate (0 = 128).
    #[must_use]
    pub fn max_tokens(mut self, n: i32) -> Self {
        self.max_tokens = n;
        self
    }
    /// Sampling temperature (0 = greedy).
    #[must_use]
    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = t;
        self
    }
    /// Sampling seed, used when the temperature is above 0.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Also time the same prompt in [`Mode::Full`] ([`Stats::full_ttft_ms`](crate::Stats)).
    #[must_use]
    pub fn compare_full(mut self, yes: bool) -> Self {
        self.compare_full = yes;
        self
    }
    /// Record the `k` most likely first tokens in [`Answer::top_logprobs`](crate::Answer)
    /// (0 = none).
    #[must_use]
    pub fn top_logprobs(mut self, k: i32) -> Self {
        self.top_logprobs = k;
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
}

impl GenerateOptions {
    /// All library defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Most tokens to generate (0 = 128).
    #[must_use]
    pub fn max_tokens(mut self, n: i32) -> Self {
        self.max_tokens = n;
        self
    }
    /// Sampling temperature (0 = greedy).
    #[must_use]
    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = t;
        self
    }
    /// Sampling seed, used when the temperature is above 0.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Record the `k` most likely first tokens in [`Answer::top_logprobs`](crate::Answer)
    /// (0 = none).
    #[must_use]
    pub fn top_logprobs(mut self, k: i32) -> Self {
        self.top_logprobs = k;
        self
    }
    /// Keep generating past end-of-generation tokens, so that exactly
    /// [`max_tokens`](GenerateOptions::max_tokens) tokens come out unless the context fills
    /// (for benchmarks).
    #[must_use]
    pub fn ignore_eog(mut self, yes: bool) -> Self {
        self.ignore_eog = yes;
        self
    }
    /// Sample among the `k` most likely tokens (0 = 40, negative = off).
    #[must_use]
    pub fn top_k(mut self, k: i32) -> Self {
        self.top_k = k;
        self
    }
    /// Nucleus sampling: keep the most likely tokens up to probability mass `p` (0 = 0.95,
    /// 1 or more = off; negative is [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg)).
    #[must_use]
    pub fn top_p(mut self, p: f32) -> Self {
        self.top_p = p;
        self
    }
    /// Drop tokens less likely than `p` times the most likely one (0 = 0.05, negative = off).
    #[must_use]
    pub fn min_p(mut self, p: f32) -> Self {
        self.min_p = p;
        self
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
    /// Render the text as a user message in the model's chat template, ready for the
    /// assistant's reply.
    #[must_use]
    pub fn chat(mut self, yes: bool) -> Self {
        self.chat = yes;
        self
    }
    /// A system message before the user's (chat prompts only: without
    /// [`chat`](PromptOptions::chat) it is [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg)).
    #[must_use]
    pub fn system(mut self, message: impl Into<String>) -> Self {
        self.system = Some(message.into());
        self
    }
    /// Match control-token text such as `<|im_start|>` in a plain prompt (chat prompts always
    /// do).
    #[must_use]
    pub fn parse_special(mut self, yes: bool) -> Self {
        self.parse_special = yes;
        self
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
    /// Load only the tokenizer (vocabulary GGUFs).
    #[must_use]
    pub fn vocab_only(mut self, yes: bool) -> Self {
        self.vocab_only = yes;
        self
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
    /// Bytes kept before the least recently used chunk KV is evicted (0 = 8 GiB).
    #[must_use]
    pub fn budget_bytes(mut self, bytes: u64) -> Self {
        self.budget_bytes = bytes;
        self
    }
    /// Read with O_DIRECT (bypassing the page cache).
    #[must_use]
    pub fn direct_io(mut self, yes: bool) -> Self {
        self.direct_io = yes;
        self
    }
}
