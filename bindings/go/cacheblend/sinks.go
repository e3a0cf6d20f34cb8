package cacheblend

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"io"
	"runtime/cgo"
	"sync"
)

// tokenSink receives one call's token pieces (callbacks.go, goCblOnToken).
type tokenSink struct {
	ctx    context.Context
	cancel func() // cancels the running call (cbl_session_cancel)
	w      io.Writer
	fn     func(piece string) bool

	writeErr error
	panicked bool
	panicVal interface{}
}

// onToken handles one piece; false stops generating. A panic in user code is recovered here
// (it must not unwind through C frames) and re-raised by rethrow after the C call returns.
func (s *tokenSink) onToken(b []byte) (cont bool) {
	defer func() {
		if r := recover(); r != nil {
			s.panicked, s.panicVal, cont = true, r, false
		}
	}()
	if s.w != nil {
		if _, err := s.w.Write(b); err != nil {
			s.writeErr = err
			return false
		}
	}
	if s.fn != nil && !s.fn(string(b)) {
		return false
	}
	if s.ctx.Err() != nil {
		// The watcher's cancel may have landed before the call began; cancelling from the
		// callback makes the call return StatusAborted.
		s.cancel()
	}
	return true
}

func (s *tokenSink) rethrow() {
	if s.panicked {
		panic(s.panicVal)
	}
}

// progressSink receives one ingest call's progress reports (goCblOnProgress).
type progressSink struct {
	ctx context.Context
	fn  func(Progress) bool

	panicked bool
	panicVal interface{}
}

func (s *progressSink) onProgress(p Progress) (cont bool) {
	defer func() {
		if r := recover(); r != nil {
			s.panicked, s.panicVal, cont = true, r, false
		}
	}()
	if s.ctx.Err() != nil {
		return false
	}
	return s.fn == nil || s.fn(p)
}

func (s *progressSink) rethrow() {
	if s.panicked {
		panic(s.panicVal)
	}
}

// newSink registers v for one C call; the caller deletes the handle when the call returns.
func newSink(v interface{}) (cgo.Handle, C.uintptr_t) {
	h := cgo.NewHandle(v)
	return h, C.uintptr_t(h)
}

// LogLevel is the severity of a library log message.
type LogLevel int32

// Log levels (cbl_log_level).
const (
	LogDebug LogLevel = C.CBL_LOG_LEVEL_DEBUG
	LogInfo  LogLevel = C.CBL_LOG_LEVEL_INFO
	LogWarn  LogLevel = C.CBL_LOG_LEVEL_WARN
	LogError LogLevel = C.CBL_LOG_LEVEL_ERROR
)

// String returns "debug", "info", "warn" or "error".
func (l LogLevel) String() string {
	switch l {
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	}
	return "unknown"
}

// logSink is the process-wide log receiver; it is registered once and never deleted, because
// library threads may still be logging through an older registration.
type logSink struct {
	mu sync.RWMutex
	fn func(level LogLevel, message string)
}

func (s *logSink) log(level LogLevel, message string) {
	s.mu.RLock()
	fn := s.fn
	s.mu.RUnlock()
	if fn != nil {
		defer func() { _ = recover() }() // a logger must not unwind through C frames
		fn(level, message)
	}
}

var (
	logOnce   sync.Once
	theLogger = &logSink{}
	logHandle cgo.Handle
)

// SetLogger installs a process-wide receiver for the library's log messages (cbl_log_set); nil
// silences the library again (the default). fn may be called from any thread, concurrently, and
// must not call back into the library.
func SetLogger(fn func(level LogLevel, message string)) {
	logOnce.Do(func() { logHandle = cgo.NewHandle(theLogger) })
	theLogger.mu.Lock()
	theLogger.fn = fn
	theLogger.mu.Unlock()
	if fn == nil {
		C.gocbl_log_set(0)
	} else {
		C.gocbl_log_set(C.uintptr_t(logHandle))
	}
}
