package cacheblend

import (
	"context"
	"sync"
	"unsafe"
)

// handle owns one reference to a C object. Calls acquire it for their duration, so Close never
// frees the object under a running call: the free is deferred to the last release. No lock is
// held while C runs, so a callback may call Close, Cancel or (getting StatusMisuse from the
// library) another method of the same object without deadlocking.
type handle struct {
	mu     sync.Mutex
	ptr    unsafe.Pointer
	refs   int
	closed bool
	what   string               // "runtime", "session", ... for error messages
	free   func(unsafe.Pointer) // drops the C reference
	busy   func(unsafe.Pointer) // called by Close while calls run (e.g. cancel); may be nil
}

func newHandle(ptr unsafe.Pointer, what string, free, busy func(unsafe.Pointer)) *handle {
	return &handle{ptr: ptr, what: what, free: free, busy: busy}
}

// acquire returns the C pointer for one call, or an ErrClosed error. Pair with release.
func (h *handle) acquire(op string) (unsafe.Pointer, error) {
	if h == nil {
		return nil, closedError(op, "handle")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.ptr == nil {
		return nil, closedError(op, h.what)
	}
	h.refs++
	return h.ptr, nil
}

// release ends a call started by acquire, freeing the object if Close ran meanwhile.
func (h *handle) release() {
	h.mu.Lock()
	h.refs--
	var p unsafe.Pointer
	if h.refs == 0 && h.closed {
		p, h.ptr = h.ptr, nil
	}
	h.mu.Unlock()
	if p != nil {
		h.free(p)
	}
}

// close marks the handle closed and frees the object now or after its running calls. Idempotent.
func (h *handle) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	var p unsafe.Pointer
	if h.refs == 0 {
		p, h.ptr = h.ptr, nil
	} else if h.busy != nil && h.ptr != nil {
		h.busy(h.ptr) // safe: the running calls keep ptr alive until they release it
	}
	h.mu.Unlock()
	if p != nil {
		h.free(p)
	}
}

// watch runs interrupt once if ctx is done before the returned stop function is called. stop
// waits for the watcher to exit, so interrupt never runs after stop returns.
func watch(ctx context.Context, interrupt func()) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			interrupt()
		case <-stopc:
		}
	}()
	return func() {
		close(stopc)
		<-done
	}
}

// ctxOrBackground returns ctx, or context.Background() for a nil ctx.
func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// refused returns the error of a call not started because ctx is already done, else nil.
func refused(op string, ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &Error{Status: StatusAborted, Op: op, Msg: err.Error(), cause: err}
	}
	return nil
}

// withContext records ctx's error as the cause of an aborted call's error when ctx is done, so
// errors.Is(err, context.Canceled) holds alongside errors.Is(err, ErrAborted).
func withContext(ctx context.Context, err error) error {
	if e, ok := err.(*Error); ok && ctx.Err() != nil && e.Status.Primary() == StatusAborted &&
		e.cause == nil {
		e.cause = ctx.Err()
	}
	return err
}
