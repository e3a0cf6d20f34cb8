//! Typed errors: the library's status code plus the message it left for the failing call.
use std::ffi::CStr;
use std::fmt;

use cacheblend_sys as sys;

use crate::types::IngestReport;

/// A library status code as returned by the C API, extended bits included
/// (`status.primary()` is the primary code, `status.0 & 0xff`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    /// Success (`CBL_OK`).
    pub const OK: Status = Status(sys::CBL_OK);
    /// Generic failure (`CBL_ERROR`).
    pub const ERROR: Status = Status(sys::CBL_ERROR);
    /// An argument is invalid (`CBL_INVALID_ARG`).
    pub const INVALID_ARG: Status = Status(sys::CBL_INVALID_ARG);
    /// Wrong state or thread, or re-entry (`CBL_MISUSE`).
    pub const MISUSE: Status = Status(sys::CBL_MISUSE);
    /// Out of memory (`CBL_NOMEM`).
    pub const NOMEM: Status = Status(sys::CBL_NOMEM);
    /// I/O failure (`CBL_IO`).
    pub const IO: Status = Status(sys::CBL_IO);
    /// Checksum mismatch or truncation (`CBL_CORRUPT`).
    pub const CORRUPT: Status = Status(sys::CBL_CORRUPT);
    /// Unknown version or layout (`CBL_FORMAT`).
    pub const FORMAT: Status = Status(sys::CBL_FORMAT);
    /// Not supported by this build or this call (`CBL_UNSUPPORTED`).
    pub const UNSUPPORTED: Status = Status(sys::CBL_UNSUPPORTED);
    /// Device (CUDA) failure (`CBL_DEVICE`).
    pub const DEVICE: Status = Status(sys::CBL_DEVICE);
    /// Cancelled, interrupted or stopped by a callback (`CBL_ABORTED`).
    pub const ABORTED: Status = Status(sys::CBL_ABORTED);
    /// Index or size out of range (`CBL_RANGE`).
    pub const RANGE: Status = Status(sys::CBL_RANGE);
    /// The SQLite catalog failed (`CBL_CATALOG`).
    pub const CATALOG: Status = Status(sys::CBL_CATALOG);
    /// A library bug (`CBL_INTERNAL`).
    pub const INTERNAL: Status = Status(sys::CBL_INTERNAL);
    /// The runtime's request queue is full: retry later (`CBL_BUSY`).
    pub const BUSY: Status = Status(sys::CBL_BUSY);
    /// A read failed (`CBL_IO_READ`, extended `IO`).
    pub const IO_READ: Status = Status(sys::CBL_IO_READ);
    /// A write failed (`CBL_IO_WRITE`, extended `IO`).
    pub const IO_WRITE: Status = Status(sys::CBL_IO_WRITE);
    /// Device out of memory (`CBL_DEVICE_OOM`, extended `DEVICE`).
    pub const DEVICE_OOM: Status = Status(sys::CBL_DEVICE_OOM);

    /// The primary code (`self.0 & 0xff`).
    pub fn primary(self) -> Status {
        Status(self.0 & 0xff)
    }

    /// The [`ErrorKind`] of the primary code.
    pub fn kind(self) -> ErrorKind {
        match self.primary().0 {
            sys::CBL_ERROR => ErrorKind::Generic,
            sys::CBL_INVALID_ARG => ErrorKind::InvalidArg,
            sys::CBL_MISUSE => ErrorKind::Misuse,
            sys::CBL_NOMEM => ErrorKind::NoMem,
            sys::CBL_IO => ErrorKind::Io,
            sys::CBL_CORRUPT => ErrorKind::Corrupt,
            sys::CBL_FORMAT => ErrorKind::Format,
            sys::CBL_UNSUPPORTED => ErrorKind::Unsupported,
            sys::CBL_DEVICE => ErrorKind::Device,
            sys::CBL_ABORTED => ErrorKind::Aborted,
            sys::CBL_RANGE => ErrorKind::Range,
            sys::CBL_CATALOG => ErrorKind::Catalog,
            sys::CBL_INTERNAL => ErrorKind::Internal,
            sys::CBL_BUSY => ErrorKind::Busy,
            _ => ErrorKind::Other,
        }
    }

    /// The library's static description, e.g. `"invalid argument"` (`cbl_status_str`).
    pub fn description(self) -> &'static str {
        // SAFETY: cbl_status_str returns a static, NUL-terminated string, never NULL.
        unsafe { CStr::from_ptr(sys::cbl_status_str(self.0)) }
            .to_str()
            .unwrap_or("?")
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Status({} {:?})", self.0, self.description())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// The primary status of a failed call, for matching. New library codes become new variants, so
/// match with a `_` arm.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `CBL_ERROR`: generic failure.
    Generic,
    /// `CBL_INVALID_ARG`: an argument is invalid (also: a string with an interior NUL byte).
    InvalidArg,
    /// `CBL_MISUSE`: wrong state or thread, a concurrent call on one session, re-entry.
    Misuse,
    /// `CBL_NOMEM`: out of memory.
    NoMem,
    /// `CBL_IO` and its extended codes (`IO_READ`, `IO_WRITE`).
    Io,
    /// `CBL_CORRUPT`: checksum mismatch or truncation.
    Corrupt,
    /// `CBL_FORMAT`: unknown version or layout.
    Format,
    /// `CBL_UNSUPPORTED`: not supported by this build (e.g. a CUDA device) or this call.
    Unsupported,
    /// `CBL_DEVICE` and `DEVICE_OOM`.
    Device,
    /// `CBL_ABORTED`: cancelled, interrupted, or a callback returned `false`.
    Aborted,
    /// `CBL_RANGE`: index or size out of range.
    Range,
    /// `CBL_CATALOG`: the SQLite catalog failed.
    Catalog,
    /// `CBL_INTERNAL`: a library bug.
    Internal,
    /// `CBL_BUSY`: the runtime's request queue is full; retry later.
    Busy,
    /// A code this binding does not know (a newer library).
    Other,
}

/// A failed libcacheblend call: its status and the library's message (`cbl_last_error()`, read on
/// the calling thread right after the call failed), and for an aborted ingest what it committed
/// ([`Error::report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
    // Boxed: it is rare, and every `Result` of the crate carries an `Error`'s size.
    report: Option<Box<IngestReport>>,
}

impl Error {
    /// An error with this status and message (the binding's own checks use it, e.g. for strings
    /// with interior NUL bytes).
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            report: None,
        }
    }

    /// The error of the call that just returned `status` on this thread: reads `cbl_last_error()`.
    /// Call it before any other `cbl_` function on the same thread.
    pub(crate) fn last(status: sys::cbl_status) -> Error {
        // SAFETY: cbl_last_error never returns NULL; the string lives until the next cbl_ call
        // on this thread, and it is copied here.
        let msg = unsafe { CStr::from_ptr(sys::cbl_last_error()) };
        Error {
            status: Status(status),
            message: msg.to_string_lossy().into_owned(),
            report: None,
        }
    }

    /// This error carrying the report of what an aborted ingest committed.
    pub(crate) fn with_report(mut self, report: IngestReport) -> Error {
        self.report = Some(Box::new(report));
        self
    }

    /// The primary status as an enum.
    pub fn kind(&self) -> ErrorKind {
        self.status.kind()
    }

    /// The full status, extended bits included (e.g. [`Status::IO_READ`]).
    pub fn status(&self) -> Status {
        self.status
    }

    /// For an ingest that ended with [`ErrorKind::Aborted`] (its progress callback returned
    /// `false`, [`Runtime::interrupt`](crate::Runtime::interrupt), or an `ingest_text` over
    /// [`max_file_seconds`](crate::IngestOptions::max_file_seconds)): what it committed before it
    /// stopped. `None` for every other error.
    pub fn report(&self) -> Option<&IngestReport> {
        self.report.as_deref()
    }

    /// The library's message, e.g. `"cbl_session_create: recompute_ratio 2 is outside (0, 1]"`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    /// `"MESSAGE (STATUS DESCRIPTION)"`, or the description alone when there is no message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "cacheblend: {}", self.status)
        } else {
            write!(f, "cacheblend: {} ({})", self.message, self.status)
        }
    }
}

impl std::error::Error for Error {}

/// `Result<T, cacheblend::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for `CBL_OK`, else the error with this thread's last message.
pub(crate) fn check(status: sys::cbl_status) -> Result<()> {
    if status == sys::CBL_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}
