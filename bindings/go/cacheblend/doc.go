// Package cacheblend is the Go binding of libcacheblend, an embedded RAG runtime that answers
// questions from your documents and reuses the KV cache of retrieved chunks (CacheBlend).
//
// It wraps the stable C ABI (cacheblend.h) with cgo and links through pkg-config:
//
//	export PKG_CONFIG_PATH=/path/to/build/pkgconfig-build   # or an installed cacheblend.pc
//	go test ./...
//
// A minimal app:
//
//	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{DataDir: dir})
//	if err != nil { ... }
//	defer rt.Close()
//	if _, err := rt.IngestPath(ctx, "docs/", nil); err != nil { ... }
//	sess, err := rt.NewSession(nil)
//	if err != nil { ... }
//	defer sess.Close()
//	ans, err := sess.Ask(ctx, "What is CacheBlend?", nil, os.Stdout)
//
// Without retrieval, a session prefills a whole prompt of your own, plain or in the model's chat
// template, and generates from it; such a session needs only a model:
//
//	model, err := cacheblend.LoadModel("") // the default model
//	sess, err := cacheblend.SessionWith(model, nil, nil)
//	_, err = sess.PrefillText(ctx, "Name three rivers.", &cacheblend.PromptOptions{Chat: true})
//	ans, err := sess.Generate(ctx, &cacheblend.GenerateOptions{MaxTokens: 32}, os.Stdout)
//
// Handles: Runtime, Session, Model and KVStore each own one reference to a C object and have an
// idempotent Close. The library reference-counts, so they may be closed in any order (a session
// keeps its runtime alive). A finalizer closes forgotten handles, but only as a safety net: close
// them yourself. Methods called after Close return an error matching ErrClosed and ErrMisuse.
//
// Errors: failed calls return *Error with the library's status and message. The message is
// copied inside the same cgo call that failed, because the library keeps it per OS thread and
// a goroutine may move between threads. Test statuses with errors.Is and the Err* sentinels.
//
// Threads: a Runtime, Model and KVStore are safe for concurrent use. A Session serves one call at
// a time; a concurrent call on it fails with ErrMisuse rather than blocking. Cancellation goes
// through context.Context, Session.Cancel or Runtime.Interrupt.
//
// Callbacks (token streaming, ingest progress) run on the calling goroutine, inside the C call.
// They may call Cancel and Close; calling Ask on the same session from a callback fails with
// ErrMisuse. A panic in a callback is recovered, the C call is stopped, and the panic is raised
// again once the call has returned.
package cacheblend
