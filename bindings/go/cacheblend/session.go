package cacheblend

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// SessionOptions configure a session. The zero value of every field selects the library default.
type SessionOptions struct {
	Threads        int      // compute threads (0 = the runtime's, or all cores)
	Ctx            int      // context length in tokens (0 = the model's training context, at most 8192)
	Mode           Mode     // prefill mode (0 = ModeBlend)
	RecomputeRatio float32  // share of reused tokens recomputed in ModeBlend (0 = 0.15; at most 1)
	AutoRatio      bool     // pick the ratio from measured load and compute rates
	KVFormat       KVFormat // format of the chunk KV the session stores (0 = KVF16)
	// Device is the compute device, "cpu" or "cuda:0" ("" = the runtime's; "cpu" for
	// SessionWith). One this build lacks matches ErrUnsupported, one this machine lacks ErrDevice.
	Device string
}

// toC fills the C options; their device string lives in cs until cs.free.
func (o *SessionOptions) toC(cs *cstrings) C.gocbl_session_opts {
	if o == nil {
		o = &SessionOptions{}
	}
	return C.gocbl_session_opts{
		device:          cs.opt(o.Device),
		n_threads:       C.int32_t(o.Threads),
		n_ctx:           C.int32_t(o.Ctx),
		mode:            C.int32_t(o.Mode),
		recompute_ratio: C.float(o.RecomputeRatio),
		auto_ratio:      C.bool(o.AutoRatio),
		kv_format:       C.int32_t(o.KVFormat),
	}
}

// Session is the per-request state of CacheBlend prefill and generation (cbl_session).
//
// A session serves one call at a time: a second concurrent call, or a token callback calling back
// into its own session, fails with an error matching ErrMisuse. Cancel and Close may be called
// from any goroutine. A session keeps its runtime (or model and KV store) alive, so those may be
// closed first.
//
// Sessions made by NewSession or SessionWith with a store prefill with CacheBlend (Ask,
// PrefillChunks); every session also does plain prefills of a whole prompt (PrefillText,
// PrefillTokens). Each prefill is followed by one Generate.
type Session struct {
	h *handle
	// busy is set while a call runs, so that PromptTokens never reads the prompt under a
	// running call (the library's own check covers only the calls that can fail).
	busy atomic.Bool
}

func newSession(s *C.cbl_session) *Session {
	sess := &Session{h: newHandle(unsafe.Pointer(s), "session",
		func(p unsafe.Pointer) { C.cbl_session_free((*C.cbl_session)(p)) },
		func(p unsafe.Pointer) { C.cbl_session_cancel((*C.cbl_session)(p)) })}
	runtime.SetFinalizer(sess, (*Session).Close)
	return sess
}

// NewSession creates a session over the runtime's model and KV store. opts may be nil.
func (r *Runtime) NewSession(opts *SessionOptions) (*Session, error) {
	const op = "session create"
	p, err := r.acquire(op)
	if err != nil {
		return nil, err
	}
	defer r.h.release()
	var cs cstrings
	defer cs.free()
	o := opts.toC(&cs)
	var s *C.cbl_session
	var msg *C.char
	if err := callError(op, C.gocbl_session_create(p, &o, &s, &msg), msg); err != nil {
		return nil, err
	}
	return newSession(s), nil
}

// SessionWith creates a session over a model and a KV store of your own, for apps with their own
// retrieval: it serves PrefillChunks, the plain prefills and Generate (Ask needs a runtime).
//
// store may be nil: such a session serves the plain prefills (PrefillText, PrefillTokens) and
// Generate only, and PrefillChunks fails with an error matching ErrInvalidArg. opts may be nil.
// The session holds its own references, so model and store may be closed right after.
func SessionWith(model *Model, store *KVStore, opts *SessionOptions) (*Session, error) {
	const op = "session create"
	if model == nil {
		return nil, closedError(op, "model")
	}
	mp, err := model.h.acquire(op)
	if err != nil {
		return nil, err
	}
	defer model.h.release()
	var kp unsafe.Pointer
	if store != nil {
		if kp, err = store.h.acquire(op); err != nil {
			return nil, err
		}
		defer store.h.release()
	}
	var cs cstrings
	defer cs.free()
	o := opts.toC(&cs)
	var s *C.cbl_session
	var msg *C.char
	st := C.gocbl_session_create_with((*C.cbl_model)(mp), (*C.cbl_kvstore)(kp), &o, &s, &msg)
	if err := callError(op, st, msg); err != nil {
		return nil, err
	}
	return newSession(s), nil
}

// Close frees the session. A call running on it is cancelled (it returns an ErrAborted error)
// and the session is freed when that call returns. Close is idempotent and always returns nil.
func (s *Session) Close() error {
	if s != nil {
		s.h.close()
	}
	return nil
}

// Cancel makes the session's running call return an ErrAborted error soon (between layers or
// tokens). It is safe from any goroutine; without a running call it does nothing.
func (s *Session) Cancel() {
	p, err := s.acquire("cancel")
	if err != nil {
		return
	}
	defer s.h.release()
	C.cbl_session_cancel(p)
}

func (s *Session) acquire(op string) (*C.cbl_session, error) {
	if s == nil {
		return nil, closedError(op, "session")
	}
	p, err := s.h.acquire(op)
	return (*C.cbl_session)(p), err
}

// enter marks the session busy for one call (an ErrMisuse error if another call runs); pair a
// nil return with leave.
func (s *Session) enter(op string) error {
	if !s.busy.CompareAndSwap(false, true) {
		return &Error{Status: StatusMisuse, Op: op, Msg: "the session is serving another call " +
			"(one call at a time per session; callbacks must not call into their session)"}
	}
	return nil
}

func (s *Session) leave() { s.busy.Store(false) }

// AskOptions configure Session.Ask. The zero value of every field selects the library default.
type AskOptions struct {
	K           int        // chunks to retrieve (0 = 4)
	SearchMode  SearchMode // retrieval mode (0 = hybrid)
	Collection  string     // only this collection ("" = every collection)
	URIPrefix   string     // only documents whose uri starts with it ("" = every document)
	MaxTokens   int        // tokens to generate at most (0 = 128)
	Temperature float32    // sampling temperature (0 = greedy)
	Seed        uint64     // sampling seed for Temperature > 0
	// Sampling as in GenerateOptions, except that Ask's answers default to greedy with a
	// repeat penalty of 1.1 over the last 64 tokens: grounded in the passages' wording, and
	// free of the loops plain greedy decoding falls into. RepeatPenalty 1 gives plain greedy.
	TopK             int     // with Temperature > 0 (0 = 40, < 0 = off)
	TopP             float32 // with Temperature > 0 (0 = 0.95, >= 1 = off)
	MinP             float32 // with Temperature > 0 (0 = 0.05, < 0 = off)
	RepeatPenalty    float32 // 0 = 1.1, 1 = off; negative is an ErrInvalidArg error
	RepeatLastN      int     // penalty window in tokens (0 = 64, -1 = the whole context)
	FrequencyPenalty float32 // 0 = off
	PresencePenalty  float32 // 0 = off
	CompareFull      bool    // also time the same prompt in ModeFull (Stats.FullTTFT)
	TopLogprobs      int     // record the k most likely first tokens in Answer.TopLogprobs (0 = none)
	// Metadata retrieves only from documents whose metadata holds each value under its key
	// (nil = every document), as SearchOptions.Metadata does. When no chunk passes the filters,
	// Ask fails with an ErrInvalidArg error.
	Metadata map[string]string
	// OnToken, when set, receives each token's text as it is generated, on the calling
	// goroutine; returning false stops generating (Stats.StopReason == StopCallback). A piece may
	// end inside a UTF-8 sequence; the pieces concatenate to Answer.Text.
	OnToken func(piece string) bool
}

// GenerateOptions configure Session.Generate. The zero value selects the defaults.
//
// TopK, TopP and MinP filter the candidates when Temperature > 0 (greedy decoding ignores
// them); the zero value of each is its default and each has an "off" value.
type GenerateOptions struct {
	MaxTokens   int     // tokens to generate at most (0 = 128)
	Temperature float32 // sampling temperature (0 = greedy)
	Seed        uint64  // sampling seed for Temperature > 0
	TopLogprobs int     // record the k most likely first tokens in Answer.TopLogprobs (0 = none)
	// IgnoreEOG keeps generating past end-of-generation tokens, so that exactly MaxTokens
	// tokens come out unless the context fills (for benchmarks).
	IgnoreEOG bool
	TopK      int     // keep the k most likely tokens (0 = 40, < 0 = off)
	TopP      float32 // nucleus: keep the most likely tokens up to this mass (0 = 0.95, >= 1 = off)
	MinP      float32 // drop tokens below MinP times the best one's probability (0 = 0.05, < 0 = off)
	// Repetition penalties (llama.cpp's), applied before greedy selection too, over the last
	// RepeatLastN tokens of the context, the prompt included; end-of-generation tokens are never
	// penalized. A seen token's logit is divided by RepeatPenalty when positive (multiplied
	// when not), then lowered by its count times FrequencyPenalty and by PresencePenalty.
	RepeatPenalty    float32 // 0 = 1 (off); negative is an ErrInvalidArg error
	RepeatLastN      int     // penalty window in tokens (0 = 64, -1 = the whole context)
	FrequencyPenalty float32 // 0 = off
	PresencePenalty  float32 // 0 = off
	// OnToken works as AskOptions.OnToken.
	OnToken func(piece string) bool
}

// Ask retrieves the best chunks for question, assembles the prompt within the session's
// context, prefills it reusing the store's chunk KV and generates the answer. Each token's text
// is written to w as it arrives (w may be nil) and passed to opts.OnToken. opts may be nil.
//
// Cancelling ctx (or calling Cancel or Close) aborts the call with an error matching ErrAborted,
// and, for ctx, ctx's error too. If w returns an error, generation stops and Ask returns the
// answer so far together with that error.
func (s *Session) Ask(ctx context.Context, question string, opts *AskOptions, w io.Writer) (*Answer, error) {
	const op = "ask"
	if opts == nil {
		opts = &AskOptions{}
	}
	var cs cstrings
	defer cs.free()
	o := &C.gocbl_ask_opts{
		k:            C.int32_t(opts.K),
		search_mode:  C.int32_t(opts.SearchMode),
		collection:   cs.opt(opts.Collection),
		uri_prefix:   cs.opt(opts.URIPrefix),
		max_tokens:   C.int32_t(opts.MaxTokens),
		temperature:  C.float(opts.Temperature),
		seed:         C.uint64_t(opts.Seed),
		compare_full: C.bool(opts.CompareFull),
		top_logprobs: C.int32_t(opts.TopLogprobs),
		top_k:        C.int32_t(opts.TopK),
		top_p:        C.float(opts.TopP),
		min_p:        C.float(opts.MinP),

		repeat_penalty:    C.float(opts.RepeatPenalty),
		repeat_last_n:     C.int32_t(opts.RepeatLastN),
		frequency_penalty: C.float(opts.FrequencyPenalty),
		presence_penalty:  C.float(opts.PresencePenalty),
	}
	var err error
	if o.metadata_keys, o.metadata_values, o.n_metadata, err = cs.metadata(op, opts.Metadata); err != nil {
		return nil, err
	}
	cq := cs.str(question)
	return s.stream(ctx, op, w, opts.OnToken,
		func(p *C.cbl_session, sink C.uintptr_t, out **C.cbl_answer, msg **C.char) C.cbl_status {
			return C.gocbl_session_ask(p, cq, o, sink, out, msg)
		})
}

// Generate generates from the last prefill (PrefillChunks, PrefillText or PrefillTokens), once
// per prefill (a second call fails with ErrMisuse), streaming to w and opts.OnToken as Ask does.
// opts may be nil.
func (s *Session) Generate(ctx context.Context, opts *GenerateOptions, w io.Writer) (*Answer, error) {
	const op = "generate"
	if opts == nil {
		opts = &GenerateOptions{}
	}
	o := &C.gocbl_generate_opts{
		max_tokens:   C.int32_t(opts.MaxTokens),
		temperature:  C.float(opts.Temperature),
		seed:         C.uint64_t(opts.Seed),
		top_logprobs: C.int32_t(opts.TopLogprobs),
		ignore_eog:   C.bool(opts.IgnoreEOG),
		top_k:        C.int32_t(opts.TopK),
		top_p:        C.float(opts.TopP),
		min_p:        C.float(opts.MinP),

		repeat_penalty:    C.float(opts.RepeatPenalty),
		repeat_last_n:     C.int32_t(opts.RepeatLastN),
		frequency_penalty: C.float(opts.FrequencyPenalty),
		presence_penalty:  C.float(opts.PresencePenalty),
	}
	return s.stream(ctx, op, w, opts.OnToken,
		func(p *C.cbl_session, sink C.uintptr_t, out **C.cbl_answer, msg **C.char) C.cbl_status {
			return C.gocbl_session_generate(p, o, sink, out, msg)
		})
}

// stream runs one generating call with token streaming and cancellation wired up.
func (s *Session) stream(ctx context.Context, op string, w io.Writer, fn func(string) bool,
	call func(p *C.cbl_session, sink C.uintptr_t, out **C.cbl_answer, msg **C.char) C.cbl_status,
) (*Answer, error) {
	ctx = ctxOrBackground(ctx)
	p, err := s.acquire(op)
	if err != nil {
		return nil, err
	}
	defer s.h.release()
	if err := s.enter(op); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := refused(op, ctx); err != nil {
		return nil, err
	}
	cancel := func() { C.cbl_session_cancel(p) }
	var sinkID C.uintptr_t
	var sink *tokenSink
	if w != nil || fn != nil || ctx.Done() != nil {
		sink = &tokenSink{ctx: ctx, cancel: cancel, w: w, fn: fn}
		h, id := newSink(sink)
		defer h.Delete()
		sinkID = id
	}
	stop := watch(ctx, cancel)
	var a *C.cbl_answer
	var msg *C.char
	st := call(p, sinkID, &a, &msg)
	stop()
	if a != nil {
		defer C.cbl_answer_free(a)
	}
	err = withContext(ctx, callError(op, st, msg))
	if sink != nil {
		sink.rethrow()
	}
	if err != nil {
		return nil, err
	}
	ans, err := answerFromC(op, a)
	if err != nil {
		return nil, err
	}
	if sink != nil && sink.writeErr != nil {
		return ans, fmt.Errorf("cacheblend: %s: writing the answer: %w", op, sink.writeErr)
	}
	return ans, nil
}

// prefill runs one prefill call with the session marked busy and cancellation wired up.
func (s *Session) prefill(ctx context.Context, op string,
	call func(p *C.cbl_session, st *C.cbl_stats, msg **C.char) C.cbl_status,
) (Stats, error) {
	ctx = ctxOrBackground(ctx)
	p, err := s.acquire(op)
	if err != nil {
		return Stats{}, err
	}
	defer s.h.release()
	if err := s.enter(op); err != nil {
		return Stats{}, err
	}
	defer s.leave()
	if err := refused(op, ctx); err != nil {
		return Stats{}, err
	}
	stop := watch(ctx, func() { C.cbl_session_cancel(p) })
	var st C.cbl_stats
	var msg *C.char
	status := call(p, &st, &msg)
	stop()
	if err := withContext(ctx, callError(op, status, msg)); err != nil {
		return Stats{}, err
	}
	return statsFromC(&st), nil
}

// PrefillChunks prefills [preamble][chunks...][question] from your own chunks, in prompt order,
// reusing their stored KV and storing the misses. Follow it with Generate. Cancelling ctx aborts
// the prefill with an error matching ErrAborted and ctx's error. A session without a KV store
// (SessionWith(model, nil, ...)) fails with an error matching ErrInvalidArg.
func (s *Session) PrefillChunks(ctx context.Context, chunks []string, question string) (Stats, error) {
	var cs cstrings
	defer cs.free()
	var ptrs **C.char
	var lens *C.size_t
	if n := len(chunks); n > 0 {
		// C memory for the arrays, so that nothing handed to C lives in the Go heap.
		pa := unsafe.Slice((**C.char)(C.malloc(C.size_t(n)*C.size_t(unsafe.Sizeof((*C.char)(nil))))), n)
		la := unsafe.Slice((*C.size_t)(C.malloc(C.size_t(n)*C.size_t(unsafe.Sizeof(C.size_t(0))))), n)
		defer C.free(unsafe.Pointer(&pa[0]))
		defer C.free(unsafe.Pointer(&la[0]))
		for i, c := range chunks {
			pa[i] = cs.str(c)
			la[i] = C.size_t(len(c))
		}
		ptrs, lens = &pa[0], &la[0]
	}
	cq := cs.str(question)
	return s.prefill(ctx, "prefill chunks", func(p *C.cbl_session, st *C.cbl_stats, msg **C.char) C.cbl_status {
		return C.gocbl_session_prefill_chunks(p, ptrs, lens, C.size_t(len(chunks)), cq, st, msg)
	})
}

// PromptOptions configure PrefillText. The zero value (or nil) prefills the text as it is.
type PromptOptions struct {
	// Chat renders the text as a user message in the model's chat template, ready for the
	// assistant's reply.
	Chat bool
	// System is a system message for a Chat prompt ("" = none; an error without Chat).
	System string
	// ParseSpecial matches control-token text such as "<|im_start|>" in a plain prompt (a Chat
	// prompt always does).
	ParseSpecial bool
}

// PrefillText prefills a whole prompt from text, computing every token (no chunk reuse), from
// the start of the session's context. Plain text is tokenized like llama.cpp (BOS/EOS as the
// model's flags say); opts.Chat applies the model's chat template. opts may be nil. Follow it
// with Generate; PromptTokens gives the prompt's ids. Cancelling ctx aborts the prefill with an
// error matching ErrAborted and ctx's error. Every session serves it, with or without a store.
func (s *Session) PrefillText(ctx context.Context, text string, opts *PromptOptions) (Stats, error) {
	if opts == nil {
		opts = &PromptOptions{}
	}
	var cs cstrings
	defer cs.free()
	ctext, csystem := cs.str(text), cs.opt(opts.System)
	chat, parse := C.bool(opts.Chat), C.bool(opts.ParseSpecial)
	return s.prefill(ctx, "prefill text", func(p *C.cbl_session, st *C.cbl_stats, msg **C.char) C.cbl_status {
		return C.gocbl_session_prefill_text(p, ctext, C.size_t(len(text)), chat, csystem, parse, st, msg)
	})
}

// PrefillTokens prefills a whole prompt from token ids, as PrefillText does from text (e.g. the
// ids of Model.Tokenize or of an earlier PromptTokens). An empty prompt or an id outside the
// vocabulary fails with an error matching ErrInvalidArg.
func (s *Session) PrefillTokens(ctx context.Context, tokens []int32) (Stats, error) {
	var ptr *C.int32_t
	if len(tokens) > 0 {
		ptr = (*C.int32_t)(unsafe.Pointer(&tokens[0])) // read during the call only; no Go pointers in it
	}
	return s.prefill(ctx, "prefill tokens", func(p *C.cbl_session, st *C.cbl_stats, msg **C.char) C.cbl_status {
		return C.gocbl_session_prefill_tokens(p, ptr, C.size_t(len(tokens)), st, msg)
	})
}

// PromptTokens returns a copy of the prompt's token ids from the session's last prefill of any
// kind (Ask, PrefillChunks, PrefillText, PrefillTokens). It returns nil before the first prefill,
// once the session is closed, and while another call runs on the session (from a token callback
// too).
func (s *Session) PromptTokens() []int32 {
	const op = "prompt tokens"
	p, err := s.acquire(op)
	if err != nil {
		return nil
	}
	defer s.h.release()
	if s.enter(op) != nil {
		return nil
	}
	defer s.leave()
	var n C.size_t
	ids := C.cbl_session_prompt_tokens(p, &n)
	if ids == nil || n == 0 {
		return nil
	}
	out := make([]int32, int(n))
	for i, id := range unsafe.Slice(ids, int(n)) {
		out[i] = int32(id)
	}
	return out
}
