//! String conversions between Rust and C, and callback plumbing shared by the handles.
use std::any::Any;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr;

use crate::error::{Error, Result, Status};

/// `s` as a C string; an interior NUL byte is `InvalidArg` (the library is never called).
pub(crate) fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| nul_error(what))
}

/// `None` stays `None` (a NULL pointer: the library default).
pub(crate) fn opt_cstring(what: &str, s: &Option<String>) -> Result<Option<CString>> {
    s.as_deref().map(|s| cstring(what, s)).transpose()
}

/// A path as a C string (its bytes on Unix; it must be UTF-8 elsewhere).
pub(crate) fn path_cstring(what: &str, p: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        p.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = p
        .to_str()
        .ok_or_else(|| Error::new(Status::INVALID_ARG, format!("{} is not UTF-8", what)))?
        .as_bytes()
        .to_vec();
    CString::new(bytes).map_err(|_| nul_error(what))
}

pub(crate) fn opt_path_cstring(
    what: &str,
    p: &Option<std::path::PathBuf>,
) -> Result<Option<CString>> {
    p.as_deref().map(|p| path_cstring(what, p)).transpose()
}

/// The pointer to pass for an optional C string.
pub(crate) fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// The C arrays of a metadata filter (`metadata_keys`, `metadata_values`, `n_metadata`). The
/// pointers point into the owned strings, so they stay valid as long as this value lives.
pub(crate) struct CPairs {
    _strings: Vec<CString>,
    keys: Vec<*const c_char>,
    values: Vec<*const c_char>,
}

impl CPairs {
    /// C copies of `pairs`, in order; a NUL byte in a key or value is `InvalidArg`.
    pub(crate) fn new(what: &str, pairs: &[(String, String)]) -> Result<CPairs> {
        let mut strings = Vec::with_capacity(2 * pairs.len());
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for (k, v) in pairs {
            let (k, v) = (cstring(what, k)?, cstring(what, v)?);
            // A CString's bytes stay put when the CString itself moves into `strings`.
            keys.push(k.as_ptr());
            values.push(v.as_ptr());
            strings.push(k);
            strings.push(v);
        }
        Ok(CPairs {
            _strings: strings,
            keys,
            values,
        })
    }

    /// `(keys, values, n)` for the params struct: NULL arrays when there are no pairs.
    pub(crate) fn raw(&self) -> (*const *const c_char, *const *const c_char, usize) {
        if self.keys.is_empty() {
            (ptr::null(), ptr::null(), 0)
        } else {
            (self.keys.as_ptr(), self.values.as_ptr(), self.keys.len())
        }
    }
}

fn nul_error(what: &str) -> Error {
    Error::new(Status::INVALID_ARG, format!("{} contains a NUL byte", what))
}

/// A copy of a borrowed C string ("" for NULL); invalid UTF-8 becomes U+FFFD.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub(crate) unsafe fn string_from(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// What a callback trampoline keeps between calls: the user's closure and the first panic it
/// raised. A panic must never unwind into C, so the trampoline catches it, tells the library to
/// stop (returns `false`), and the wrapper re-raises it with [`CallbackState::resume`] once the C
/// call has returned.
pub(crate) struct CallbackState<F: ?Sized> {
    pub(crate) panic: Option<Box<dyn Any + Send + 'static>>,
    pub(crate) f: F,
}

impl<F: ?Sized> CallbackState<F> {
    /// Runs `call` on the closure unless an earlier call panicked; `false` after a panic.
    pub(crate) fn invoke(&mut self, call: impl FnOnce(&mut F) -> bool) -> bool {
        if self.panic.is_some() {
            return false;
        }
        let f = &mut self.f;
        match panic::catch_unwind(AssertUnwindSafe(move || call(f))) {
            Ok(keep_going) => keep_going,
            Err(payload) => {
                self.panic = Some(payload);
                false
            }
        }
    }

    /// Re-raises the callback's panic on the caller's thread, if there was one.
    pub(crate) fn resume(&mut self) {
        if let Some(payload) = self.panic.take() {
            panic::resume_unwind(payload);
        }
    }
}

/// Frees a library-owned pointer when dropped (results and answers), on every path.
pub(crate) struct FreeOnDrop<T>(pub(crate) *mut T, pub(crate) unsafe extern "C" fn(*mut T));

impl<T> Drop for FreeOnDrop<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer is owned by this guard and freed exactly once (free accepts NULL).
        unsafe { (self.1)(self.0) }
    }
}
