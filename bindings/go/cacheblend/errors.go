package cacheblend

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Status is a libcacheblend status code (cbl_status). The low byte is the primary code; extended
// codes such as StatusIORead add detail in the upper bits.
type Status int32

// Status codes, mirroring the CBL_* values of cacheblend.h.
const (
	StatusOK          Status = C.CBL_OK          // success
	StatusError       Status = C.CBL_ERROR       // generic failure
	StatusInvalidArg  Status = C.CBL_INVALID_ARG // a bad argument or option
	StatusMisuse      Status = C.CBL_MISUSE      // wrong state or thread, re-entry, use after Close
	StatusNoMem       Status = C.CBL_NOMEM       // out of memory
	StatusIO          Status = C.CBL_IO          // file or device I/O failed
	StatusCorrupt     Status = C.CBL_CORRUPT     // checksum mismatch or truncation
	StatusFormat      Status = C.CBL_FORMAT      // unknown file version or layout
	StatusUnsupported Status = C.CBL_UNSUPPORTED // not available in this build
	StatusDevice      Status = C.CBL_DEVICE      // CUDA or cuBLASLt failure
	StatusAborted     Status = C.CBL_ABORTED     // cancelled, interrupted or stopped by a callback
	StatusRange       Status = C.CBL_RANGE       // an index or buffer size out of range
	StatusCatalog     Status = C.CBL_CATALOG     // SQLite failure; its code is in the message
	StatusInternal    Status = C.CBL_INTERNAL    // a library bug
	StatusBusy        Status = C.CBL_BUSY        // the runtime's request queue is full: retry later

	StatusIORead    Status = C.CBL_IO_READ    // StatusIO while reading
	StatusIOWrite   Status = C.CBL_IO_WRITE   // StatusIO while writing
	StatusDeviceOOM Status = C.CBL_DEVICE_OOM // StatusDevice: device memory exhausted
)

// Primary returns the primary code of s (s & 0xff).
func (s Status) Primary() Status { return s & 0xff }

// String returns the library's static description of s, e.g. "invalid argument".
func (s Status) String() string { return C.GoString(C.cbl_status_str(C.cbl_status(s))) }

// Error is a failed libcacheblend call: its status, the operation and the library's message,
// captured on the thread that made the call.
//
// Use errors.Is with the Err* sentinels to test the status: errors.Is(err, ErrIO) matches every
// I/O status (StatusIO, StatusIORead, StatusIOWrite), errors.Is(err, ErrIORead) only that one.
// An Error caused by a context cancellation also matches context.Canceled or
// context.DeadlineExceeded, and one caused by a closed handle matches ErrClosed.
type Error struct {
	Status Status // the status the library returned
	Op     string // the operation, e.g. "ask" or "runtime open"
	Msg    string // the library's message (cbl_last_error)

	cause error // what the binding knows beyond the status: ctx.Err(), errClosed
}

// Error formats the error as "cacheblend: OP: MSG (STATUS)".
func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = e.Status.String()
	}
	if e.Op == "" {
		return fmt.Sprintf("cacheblend: %s (%s)", msg, e.Status)
	}
	return fmt.Sprintf("cacheblend: %s: %s (%s)", e.Op, msg, e.Status)
}

// Is reports whether target is an *Error whose status matches e: the same status, or, when
// target's status is a primary code, the same primary code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	if t.Status == e.Status {
		return true
	}
	return t.Status == t.Status.Primary() && e.Status.Primary() == t.Status
}

// Unwrap returns the error's cause when the binding knows one (a context error or ErrClosed).
func (e *Error) Unwrap() error { return e.cause }

// Sentinels for errors.Is, one per status code.
var (
	ErrGeneric     = &Error{Status: StatusError}
	ErrInvalidArg  = &Error{Status: StatusInvalidArg}
	ErrMisuse      = &Error{Status: StatusMisuse}
	ErrNoMem       = &Error{Status: StatusNoMem}
	ErrIO          = &Error{Status: StatusIO}
	ErrCorrupt     = &Error{Status: StatusCorrupt}
	ErrFormat      = &Error{Status: StatusFormat}
	ErrUnsupported = &Error{Status: StatusUnsupported}
	ErrDevice      = &Error{Status: StatusDevice}
	ErrAborted     = &Error{Status: StatusAborted}
	ErrRange       = &Error{Status: StatusRange}
	ErrCatalog     = &Error{Status: StatusCatalog}
	ErrInternal    = &Error{Status: StatusInternal}
	ErrBusy        = &Error{Status: StatusBusy}
	ErrIORead      = &Error{Status: StatusIORead}
	ErrIOWrite     = &Error{Status: StatusIOWrite}
	ErrDeviceOOM   = &Error{Status: StatusDeviceOOM}
)

// ErrClosed is the cause of every error from a method called on a closed (or zero) handle. Such
// errors are *Error values with StatusMisuse, so they match both ErrClosed and ErrMisuse.
var ErrClosed = errors.New("cacheblend: handle is closed")

// callError turns a shim's status and malloc'd message into an *Error (nil for StatusOK) and
// frees the message.
func callError(op string, s C.cbl_status, msg *C.char) error {
	if msg != nil {
		defer C.free(unsafe.Pointer(msg))
	}
	if s == C.CBL_OK {
		return nil
	}
	return &Error{Status: Status(s), Op: op, Msg: C.GoString(msg)}
}

// closedError is the error of a call on a closed handle.
func closedError(op, what string) error {
	return &Error{Status: StatusMisuse, Op: op, Msg: what + " is closed", cause: ErrClosed}
}
