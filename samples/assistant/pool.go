package main

import (
	"context"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// sessionPool lends sessions to answers. A cacheblend.Session serves one call at a time (a
// concurrent call fails with ErrMisuse), and each one holds a context's worth of memory, so the
// pool has a fixed number (--sessions, default 1) made on first use; an ask waits for a free one
// or for its request to end.
type sessionPool struct {
	rt    *cacheblend.Runtime
	opts  *cacheblend.SessionOptions
	slots chan *cacheblend.Session // a nil slot is a session not made yet
}

func newSessionPool(rt *cacheblend.Runtime, n int, opts *cacheblend.SessionOptions) *sessionPool {
	p := &sessionPool{rt: rt, opts: opts, slots: make(chan *cacheblend.Session, n)}
	for i := 0; i < n; i++ {
		p.slots <- nil
	}
	return p
}

// get waits for a session; the caller gives it back with put.
func (p *sessionPool) get(ctx context.Context) (*cacheblend.Session, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case s := <-p.slots:
		if s != nil {
			return s, nil
		}
		s, err := p.rt.NewSession(p.opts)
		if err != nil {
			p.slots <- nil
			return nil, err
		}
		return s, nil
	}
}

func (p *sessionPool) put(s *cacheblend.Session) { p.slots <- s }

// close frees the sessions; call it when no ask runs any more (after the HTTP server's Shutdown).
func (p *sessionPool) close() {
	for i := 0; i < cap(p.slots); i++ {
		if s := <-p.slots; s != nil {
			s.Close()
		}
	}
}
