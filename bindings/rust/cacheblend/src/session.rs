//! Sessions (one request at a time), their cancel handles and token streaming.
use std::cell::Cell;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use cacheblend_sys as sys;

use crate::error::{check, Error, Result};
use crate::model::{KvStore, Model};
use crate::options::{AskOptions, GenerateOptions, PromptOptions, SessionOptions};
use crate::types::{Answer, Stats};
use crate::util::{cstring, opt_cstring, opt_ptr, CPairs, CallbackState};

/// The owned C session; freed when the [`Session`] and all its [`CancelHandle`]s are gone.
#[derive(Debug)]
struct Raw(NonNull<sys::cbl_session>);

// SAFETY: a cbl_session may move between threads. Sharing `Raw` (through the Arc) is sound
// because the only call made through a shared reference is cbl_session_cancel, which the C API
// allows from any thread at any time short of cbl_session_free; free runs in Drop, when no other
// reference exists. Every other call goes through `&mut Session`, and Session is not Sync.
unsafe impl Send for Raw {}
// SAFETY: see above.
unsafe impl Sync for Raw {}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: last reference: no call (cancel included) can race this free.
        unsafe { sys::cbl_session_free(self.0.as_ptr()) }
    }
}

/// A session (`cbl_session`): per-request prefill and generation state over a model and a KV
/// store, serving one call at a time.
///
/// Sessions with a KV store (from [`Runtime::session`](crate::Runtime::session) or
/// [`Session::with_model`] with a store) prefill with CacheBlend ([`ask`](Session::ask),
/// [`prefill_chunks`](Session::prefill_chunks)); every session also prefills a whole prompt of
/// your own ([`prefill_text`](Session::prefill_text), [`prefill_tokens`](Session::prefill_tokens)).
/// Each prefill is followed by one [`generate`](Session::generate).
///
/// `Send` but not `Sync`: move it to another thread, but do not share it. Calls take `&mut self`,
/// so a token callback cannot call back into its own session. To stop a running call from another
/// thread use a [`CancelHandle`]. The session keeps its runtime (or model and store) alive.
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<cacheblend::Session>(); // Session is not Sync
/// ```
#[derive(Debug)]
pub struct Session {
    raw: Arc<Raw>,
    _not_sync: PhantomData<Cell<()>>,
}

/// Cancels the running call of one [`Session`] from any thread (`cbl_session_cancel`).
///
/// `Send + Sync + Clone`. A handle holds a reference to the C session, so it stays valid however
/// long it lives: the C session is freed when the `Session` and every `CancelHandle` are dropped
/// (a handle that outlives its `Session` keeps the session's memory until then, and cancelling
/// through it does nothing). This, rather than a borrow of the session, is what lets the handle
/// move to another thread while the session is busy in [`Session::ask`].
#[derive(Clone, Debug)]
pub struct CancelHandle {
    raw: Arc<Raw>,
}

impl CancelHandle {
    /// Makes the session's running call fail soon (between layers or tokens) with
    /// [`ErrorKind::Aborted`](crate::ErrorKind::Aborted). Without a running call it does nothing:
    /// a cancel belongs to the call it interrupts.
    pub fn cancel(&self) {
        // SAFETY: the session is alive while `self.raw` is; cancel is allowed from any thread.
        unsafe { sys::cbl_session_cancel(self.raw.0.as_ptr()) }
    }
}

impl Session {
    /// Takes ownership of a new session reference; `raw` is non-null after a successful call.
    pub(crate) fn from_raw(raw: *mut sys::cbl_session) -> Session {
        let raw = NonNull::new(raw).expect("cacheblend: the library returned a NULL session");
        Session {
            raw: Arc::new(Raw(raw)),
            _not_sync: PhantomData,
        }
    }

    /// A session over a model and, optionally, a KV store of your own (`&store` or `None`).
    ///
    /// With a store it serves [`prefill_chunks`](Session::prefill_chunks), the plain prefills and
    /// [`generate`](Session::generate) (`ask` needs a runtime's retrieval: see
    /// [`Runtime::session`](crate::Runtime::session)). Without one it serves the plain prefills
    /// ([`prefill_text`](Session::prefill_text), [`prefill_tokens`](Session::prefill_tokens)) and
    /// `generate` only; `prefill_chunks` then fails with
    /// [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg). The session keeps the model and
    /// the store alive.
    pub fn with_model<'a>(
        model: &Model,
        store: impl Into<Option<&'a KvStore>>,
        options: &SessionOptions,
    ) -> Result<Session> {
        let store = store.into().map_or(ptr::null_mut(), KvStore::as_ptr);
        let device = opt_cstring("device", &options.device)?;
        let p = options.to_c(&device);
        let mut out = ptr::null_mut();
        // SAFETY: live handles or NULL (the library takes its own references), valid pointers
        // (device's included) for the duration of the call.
        check(unsafe { sys::cbl_session_create_with(model.as_ptr(), store, &p, &mut out) })?;
        Ok(Session::from_raw(out))
    }

    /// The raw handle, still owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::cbl_session {
        self.raw.0.as_ptr()
    }

    /// A handle that cancels this session's running call from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            raw: Arc::clone(&self.raw),
        }
    }

    /// Retrieves the best chunks for `question`, prefills them with the session's mode reusing
    /// stored chunk KV, and generates the answer, streaming its text to `on_text` as it is
    /// generated. Return `false` from `on_text` to stop generating (the answer is still returned,
    /// with [`StopReason::Callback`](crate::StopReason::Callback)).
    ///
    /// `on_text` receives whole UTF-8 characters: a token that ends inside a character is held
    /// back until the rest arrives, and invalid bytes become U+FFFD, so the pieces concatenate to
    /// [`Answer::text`](crate::Answer::text). Use [`ask_bytes`](Session::ask_bytes) for the raw
    /// token pieces. A panic in `on_text` stops the call and is re-raised when it returns.
    pub fn ask<F>(&mut self, question: &str, options: &AskOptions, on_text: F) -> Result<Answer>
    where
        F: FnMut(&str) -> bool,
    {
        let mut text = TextStream::new(on_text);
        let answer = self.ask_bytes(question, options, |piece, _| text.push(piece))?;
        text.finish();
        Ok(answer)
    }

    /// [`ask`](Session::ask) with the raw token pieces: each call gets one token's bytes (possibly
    /// a partial UTF-8 sequence) and its id.
    pub fn ask_bytes<F>(
        &mut self,
        question: &str,
        options: &AskOptions,
        on_piece: F,
    ) -> Result<Answer>
    where
        F: FnMut(&[u8], i32) -> bool,
    {
        let question = cstring("question", question)?;
        let collection = opt_cstring("collection", &options.collection)?;
        let prefix = opt_cstring("uri_prefix", &options.uri_prefix)?;
        let metadata = CPairs::new("metadata filter", &options.metadata)?;
        let mut state = CallbackState {
            panic: None,
            f: on_piece,
        };
        let mut p = sys::cbl_ask_params::default();
        p.k = options.k;
        p.search_mode = options.search_mode_raw();
        p.collection = opt_ptr(&collection);
        p.uri_prefix = opt_ptr(&prefix);
        (p.metadata_keys, p.metadata_values, p.n_metadata) = metadata.raw();
        p.max_tokens = options.max_tokens;
        p.temperature = options.temperature;
        p.seed = options.seed;
        p.compare_full = options.compare_full;
        p.top_logprobs = options.top_logprobs;
        p.top_k = options.top_k;
        p.top_p = options.top_p;
        p.min_p = options.min_p;
        p.repeat_penalty = options.repeat_penalty;
        p.repeat_last_n = options.repeat_last_n;
        p.frequency_penalty = options.frequency_penalty;
        p.presence_penalty = options.presence_penalty;
        p.on_token = Some(token_trampoline::<F>);
        p.user_data = &mut state as *mut CallbackState<F> as *mut c_void;
        let mut out = ptr::null_mut();
        // SAFETY: every pointer outlives the call; `state` is only used by the trampoline, on
        // this thread, during the call.
        let st = unsafe { sys::cbl_session_ask(self.as_ptr(), question.as_ptr(), &p, &mut out) };
        finish(st, out, &mut state)
    }

    /// Prefills `[preamble][chunks...][question]` from your own chunks (in prompt order), reusing
    /// their stored KV and storing the misses. Follow with [`generate`](Session::generate). A
    /// session without a KV store fails with [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
    pub fn prefill_chunks<S: AsRef<str>>(&mut self, chunks: &[S], question: &str) -> Result<Stats> {
        let question = cstring("question", question)?;
        let chunks: Vec<&str> = chunks.iter().map(|c| c.as_ref()).collect();
        let ptrs: Vec<*const c_char> = chunks.iter().map(|c| c.as_ptr() as *const c_char).collect();
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        // SAFETY: chunks[i][0..lens[i]) and the question outlive the call.
        self.prefill(|s, st| unsafe {
            sys::cbl_session_prefill_chunks(
                s,
                ptrs.as_ptr(),
                lens.as_ptr(),
                ptrs.len(),
                question.as_ptr(),
                st,
            )
        })
    }

    /// Prefills a whole prompt from `text`, computing every token (no chunk reuse), from the start
    /// of the session's context. Plain text is tokenized like llama.cpp (BOS/EOS as the model's
    /// flags say); [`PromptOptions::chat`] applies the model's chat template. Follow with
    /// [`generate`](Session::generate); [`prompt_tokens`](Session::prompt_tokens) gives the
    /// prompt's ids. Every session serves it, with or without a KV store.
    pub fn prefill_text(&mut self, text: &str, options: &PromptOptions) -> Result<Stats> {
        let system = opt_cstring("system", &options.system)?;
        let mut p = sys::cbl_prompt_params::default();
        p.chat = options.chat;
        p.system = opt_ptr(&system);
        p.parse_special = options.parse_special;
        // SAFETY: text[0..len) and the system message outlive the call.
        self.prefill(|s, st| unsafe {
            sys::cbl_session_prefill_text(s, text.as_ptr() as *const c_char, text.len(), &p, st)
        })
    }

    /// Prefills a whole prompt from token ids, as [`prefill_text`](Session::prefill_text) does
    /// from text (e.g. the ids of [`Model::tokenize`] or of an earlier
    /// [`prompt_tokens`](Session::prompt_tokens)). An empty prompt or an id outside the
    /// vocabulary is [`ErrorKind::InvalidArg`](crate::ErrorKind::InvalidArg).
    pub fn prefill_tokens(&mut self, tokens: &[i32]) -> Result<Stats> {
        let ids = if tokens.is_empty() {
            ptr::null()
        } else {
            tokens.as_ptr()
        };
        // SAFETY: tokens[0..len) outlives the call.
        self.prefill(|s, st| unsafe { sys::cbl_session_prefill_tokens(s, ids, tokens.len(), st) })
    }

    /// The prompt's token ids from the last prefill of any kind (`ask`, `prefill_chunks`,
    /// `prefill_text`, `prefill_tokens`); empty before the first.
    pub fn prompt_tokens(&self) -> Vec<i32> {
        let mut n = 0usize;
        // SAFETY: no call runs on the session (those take `&mut self`); the array lives until
        // the next call and is copied right away.
        unsafe {
            let ids = sys::cbl_session_prompt_tokens(self.as_ptr(), &mut n);
            if ids.is_null() || n == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(ids, n).to_vec()
            }
        }
    }

    /// Runs one prefill call and copies its statistics.
    fn prefill(
        &mut self,
        call: impl FnOnce(*mut sys::cbl_session, *mut sys::cbl_stats) -> sys::cbl_status,
    ) -> Result<Stats> {
        let mut st = sys::cbl_stats::default();
        check(call(self.as_ptr(), &mut st))?;
        // SAFETY: the notice in `st` stays valid until the next call on the session.
        Ok(unsafe { Stats::from_c(&st) })
    }

    /// Generates from the last prefill ([`prefill_chunks`](Session::prefill_chunks),
    /// [`prefill_text`](Session::prefill_text) or [`prefill_tokens`](Session::prefill_tokens)),
    /// once per prefill ([`ErrorKind::Misuse`](crate::ErrorKind::Misuse) otherwise), streaming
    /// text as [`ask`](Session::ask) does.
    pub fn generate<F>(&mut self, options: &GenerateOptions, on_text: F) -> Result<Answer>
    where
        F: FnMut(&str) -> bool,
    {
        let mut text = TextStream::new(on_text);
        let answer = self.generate_bytes(options, |piece, _| text.push(piece))?;
        text.finish();
        Ok(answer)
    }

    /// [`generate`](Session::generate) with the raw token pieces and ids.
    pub fn generate_bytes<F>(&mut self, options: &GenerateOptions, on_piece: F) -> Result<Answer>
    where
        F: FnMut(&[u8], i32) -> bool,
    {
        let mut state = CallbackState {
            panic: None,
            f: on_piece,
        };
        let mut p = sys::cbl_generate_params::default();
        p.max_tokens = options.max_tokens;
        p.temperature = options.temperature;
        p.seed = options.seed;
        p.top_logprobs = options.top_logprobs;
        p.ignore_eog = options.ignore_eog;
        p.top_k = options.top_k;
        p.top_p = options.top_p;
        p.min_p = options.min_p;
        p.repeat_penalty = options.repeat_penalty;
        p.repeat_last_n = options.repeat_last_n;
        p.frequency_penalty = options.frequency_penalty;
        p.presence_penalty = options.presence_penalty;
        p.on_token = Some(token_trampoline::<F>);
        p.user_data = &mut state as *mut CallbackState<F> as *mut c_void;
        let mut out = ptr::null_mut();
        // SAFETY: as in ask_bytes.
        let st = unsafe { sys::cbl_session_generate(self.as_ptr(), &p, &mut out) };
        finish(st, out, &mut state)
    }
}

/// Turns a finished ask/generate call into a Result: reads the error message first, then
/// re-raises a callback panic (freeing the answer), then copies the answer.
fn finish<F>(
    st: sys::cbl_status,
    out: *mut sys::cbl_answer,
    state: &mut CallbackState<F>,
) -> Result<Answer> {
    let result = if st == sys::CBL_OK {
        Ok(out)
    } else {
        Err(Error::last(st))
    };
    if state.panic.is_some() {
        if let Ok(a) = result {
            // SAFETY: the answer is owned here and not used again.
            unsafe { sys::cbl_answer_free(a) };
        }
        state.resume();
    }
    // SAFETY: a successful call returned a live answer that we own.
    unsafe { Answer::take(result?) }
}

/// `cbl_token_fn` for the closure type `F`: `user` is the `CallbackState<F>` on the caller's stack.
unsafe extern "C" fn token_trampoline<F>(
    piece: *const c_char,
    len: usize,
    token: i32,
    user: *mut c_void,
) -> bool
where
    F: FnMut(&[u8], i32) -> bool,
{
    if user.is_null() {
        return true;
    }
    // SAFETY: user points at the live CallbackState<F> of the call running on this thread
    // (callbacks run on the calling thread); nothing else touches it during the call.
    let state = &mut *(user as *mut CallbackState<F>);
    state.invoke(|f| {
        let bytes = if piece.is_null() || len == 0 {
            &[][..]
        } else {
            // SAFETY: piece[0..len) is valid during the callback.
            std::slice::from_raw_parts(piece as *const u8, len)
        };
        f(bytes, token)
    })
}

/// Turns token pieces (which may split UTF-8 sequences) into whole-character `&str` pieces, the
/// way `String::from_utf8_lossy` would decode their concatenation.
struct TextStream<F> {
    on_text: F,
    pending: Vec<u8>,
    stopped: bool,
}

impl<F: FnMut(&str) -> bool> TextStream<F> {
    fn new(on_text: F) -> Self {
        TextStream {
            on_text,
            pending: Vec::new(),
            stopped: false,
        }
    }

    fn emit(&mut self, s: &str) -> bool {
        if !s.is_empty() && !self.stopped && !(self.on_text)(s) {
            self.stopped = true;
        }
        !self.stopped
    }

    /// Decodes one more piece; `false` once the callback asked to stop.
    fn push(&mut self, piece: &[u8]) -> bool {
        if self.stopped {
            return false;
        }
        let mut owned = std::mem::take(&mut self.pending);
        owned.extend_from_slice(piece);
        let mut rest: &[u8] = &owned;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => return self.emit(s),
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // SAFETY: from_utf8 validated the first valid_up_to bytes.
                    if !self.emit(unsafe { std::str::from_utf8_unchecked(valid) }) {
                        return false;
                    }
                    match e.error_len() {
                        Some(n) => {
                            if !self.emit("\u{FFFD}") {
                                return false;
                            }
                            rest = &after[n..];
                        }
                        None => {
                            self.pending = after.to_vec(); // an incomplete character: wait
                            return true;
                        }
                    }
                }
            }
        }
    }

    /// Flushes an incomplete character left at the end as U+FFFD.
    fn finish(&mut self) {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.emit("\u{FFFD}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TextStream;

    fn decode(pieces: &[&[u8]]) -> (Vec<String>, String) {
        let mut out = Vec::new();
        {
            let mut t = TextStream::new(|s: &str| {
                out.push(s.to_string());
                true
            });
            for p in pieces {
                assert!(t.push(p));
            }
            t.finish();
        }
        let all: Vec<u8> = pieces.concat();
        (out, String::from_utf8_lossy(&all).into_owned())
    }

    #[test]
    fn text_stream_matches_lossy_decoding_of_the_concatenation() {
        let euro = "€".as_bytes(); // 3 bytes
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![b"hello", b" world"],
            vec![&euro[..1], &euro[1..2], &euro[2..], b"!"],
            vec![b"a\xff", b"b"],
            vec![&euro[..2]],                    // cut at the end
            vec![&euro[..2], b"x", euro],        // a broken sequence, then a good one
            vec![b"", b"\xf0\x9f", b"\x98\x80"], // an emoji split in two
        ];
        for pieces in cases {
            let (out, whole) = decode(&pieces);
            assert_eq!(out.concat(), whole, "pieces {:?}", pieces);
            assert!(out.iter().all(|s| !s.is_empty()));
        }
    }

    #[test]
    fn text_stream_stops_when_the_callback_says_so() {
        let mut n = 0;
        let mut t = TextStream::new(|_: &str| {
            n += 1;
            false
        });
        assert!(!t.push(b"a"));
        assert!(!t.push(b"b"));
        t.finish();
        drop(t);
        assert_eq!(n, 1);
    }
}
