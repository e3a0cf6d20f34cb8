//! Models (weights + tokenizer) and chunk KV stores: shareable, thread-safe handles.
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};

use cacheblend_sys as sys;

use crate::error::{check, Error, Result};
use crate::options::{KvStoreOptions, ModelOptions};
use crate::util::path_cstring;

/// A loaded GGUF model: immutable weights and tokenizer (`cbl_model`).
///
/// `Send + Sync`: the model is immutable and shared freely. Dropping it drops this reference only;
/// sessions using the model keep it alive.
#[derive(Debug)]
pub struct Model {
    raw: NonNull<sys::cbl_model>,
}

// SAFETY: cbl_model is immutable and reference-counted; the C API allows use from any thread.
unsafe impl Send for Model {}
// SAFETY: as above; every function taking a model is safe to call concurrently.
unsafe impl Sync for Model {}

impl Model {
    /// Loads a GGUF model from `path`: a file, or a model name such as `"qwen2.5-coder-1.5b"`
    /// (its file in the user cache, fetched by `cacheblend-fetch-model NAME`).
    pub fn load(path: impl AsRef<Path>, options: &ModelOptions) -> Result<Model> {
        let path = path_cstring("model path", path.as_ref())?;
        Model::load_raw(path.as_ptr(), options)
    }

    /// Loads the default model: `$CBL_MODEL`, else qwen2.5-coder-1.5b in the user cache (the one
    /// [`Runtime::open`](crate::Runtime::open) loads without a model path).
    pub fn load_default(options: &ModelOptions) -> Result<Model> {
        Model::load_raw(ptr::null(), options)
    }

    fn load_raw(path: *const c_char, options: &ModelOptions) -> Result<Model> {
        let mut p = sys::cbl_model_params::default();
        p.vocab_only = options.vocab_only;
        let mut out = ptr::null_mut();
        // SAFETY: path is NULL or a C string, valid with params and out for the call.
        check(unsafe { sys::cbl_model_load(path, &p, &mut out) })?;
        Ok(Model::from_raw(out))
    }

    /// Takes ownership of a new reference. `raw` is non-null after a successful call.
    pub(crate) fn from_raw(raw: *mut sys::cbl_model) -> Model {
        Model {
            raw: NonNull::new(raw).expect("cacheblend: the library returned a NULL model"),
        }
    }

    /// The raw handle, still owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::cbl_model {
        self.raw.as_ptr()
    }

    /// Vocabulary size.
    pub fn n_vocab(&self) -> i32 {
        // SAFETY: live handle.
        unsafe { sys::cbl_model_n_vocab(self.raw.as_ptr()) }
    }

    /// Training context length (0 for vocabulary-only models).
    pub fn n_ctx_train(&self) -> i32 {
        // SAFETY: live handle.
        unsafe { sys::cbl_model_n_ctx_train(self.raw.as_ptr()) }
    }

    /// Token ids of `text`. `add_special` adds BOS/EOS as the model's flags say;
    /// `parse_special` matches control-token text.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<i32>> {
        let call = |ids: &mut [i32], n: &mut usize| {
            // SAFETY: text[0..len) and ids[0..cap) are valid; the library writes at most cap ids.
            unsafe {
                sys::cbl_tokenize(
                    self.raw.as_ptr(),
                    text.as_ptr() as *const _,
                    text.len(),
                    add_special,
                    parse_special,
                    if ids.is_empty() {
                        ptr::null_mut()
                    } else {
                        ids.as_mut_ptr()
                    },
                    ids.len(),
                    n,
                )
            }
        };
        let mut ids: Vec<i32> = Vec::new();
        loop {
            let mut n = 0usize;
            match call(&mut ids, &mut n) {
                sys::CBL_OK if n <= ids.len() => {
                    ids.truncate(n);
                    return Ok(ids);
                }
                // The size query (ids empty) or a buffer that turned out too small.
                sys::CBL_OK | sys::CBL_RANGE if n > ids.len() => ids.resize(n, 0),
                st => return Err(Error::last(st)),
            }
        }
    }

    /// The text of one token (special tokens as their text); bytes, since a token may hold part
    /// of a UTF-8 character.
    pub fn token_to_piece(&self, token: i32) -> Result<Vec<u8>> {
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let mut n = 0usize;
            // SAFETY: buf[0..len) is writable; the library writes at most cap bytes.
            let st = unsafe {
                sys::cbl_token_to_piece(
                    self.raw.as_ptr(),
                    token,
                    if buf.is_empty() {
                        ptr::null_mut()
                    } else {
                        buf.as_mut_ptr() as *mut _
                    },
                    buf.len(),
                    &mut n,
                )
            };
            match st {
                sys::CBL_OK if n <= buf.len() => {
                    buf.truncate(n);
                    return Ok(buf);
                }
                sys::CBL_OK | sys::CBL_RANGE if n > buf.len() => buf.resize(n, 0),
                st => return Err(Error::last(st)),
            }
        }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: this reference is released exactly once.
        unsafe { sys::cbl_model_free(self.raw.as_ptr()) }
    }
}

/// A chunk KV store on disk, for apps with their own retrieval (`cbl_kvstore`).
///
/// `Send + Sync`: the store locks internally and processes may share its directory.
#[derive(Debug)]
pub struct KvStore {
    raw: NonNull<sys::cbl_kvstore>,
}

// SAFETY: cbl_kvstore is thread-safe (internally locked) and reference-counted.
unsafe impl Send for KvStore {}
// SAFETY: as above.
unsafe impl Sync for KvStore {}

impl KvStore {
    /// Opens (creating 0700) the chunk KV store in `dir`.
    pub fn open(dir: impl AsRef<Path>, options: &KvStoreOptions) -> Result<KvStore> {
        let dir = path_cstring("kvstore dir", dir.as_ref())?;
        let mut p = sys::cbl_kvstore_params::default();
        p.budget_bytes = options.budget_bytes;
        p.direct_io = options.direct_io;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the duration of the call.
        check(unsafe { sys::cbl_kvstore_open(dir.as_ptr(), &p, &mut out) })?;
        Ok(KvStore {
            raw: NonNull::new(out).expect("cacheblend: the library returned a NULL kvstore"),
        })
    }

    /// The raw handle, still owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::cbl_kvstore {
        self.raw.as_ptr()
    }
}

impl Drop for KvStore {
    fn drop(&mut self) {
        // SAFETY: this reference is released exactly once.
        unsafe { sys::cbl_kvstore_free(self.raw.as_ptr()) }
    }
}
