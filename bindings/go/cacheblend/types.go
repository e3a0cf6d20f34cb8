package cacheblend

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unsafe"
)

// Mode is a prefill mode (CBL_MODE_*).
type Mode int32

// Prefill modes. The zero value is the library default, ModeBlend.
const (
	ModeDefault Mode = C.CBL_MODE_DEFAULT // the library default (ModeBlend)
	ModeFull    Mode = C.CBL_MODE_FULL    // compute every prompt token (the quality oracle)
	ModePrefix  Mode = C.CBL_MODE_PREFIX  // reuse only the leading chunk's KV (prefix caching)
	ModeReuse   Mode = C.CBL_MODE_REUSE   // reuse every cached chunk's KV as is
	ModeBlend   Mode = C.CBL_MODE_BLEND   // CacheBlend: reuse, recompute the most deviating tokens
)

// String returns the mode's name, e.g. "blend".
func (m Mode) String() string {
	if m == ModeDefault {
		return "default"
	}
	return enumName(C.CBL_NAMES_MODE, int32(m))
}

// SearchMode is a retrieval mode (CBL_SEARCH_*).
type SearchMode int32

// Retrieval modes. The zero value is the library default, SearchHybrid.
const (
	SearchDefault SearchMode = C.CBL_SEARCH_DEFAULT // the library default (SearchHybrid)
	SearchHybrid  SearchMode = C.CBL_SEARCH_HYBRID  // dense + BM25, reciprocal-rank fusion
	SearchDense   SearchMode = C.CBL_SEARCH_DENSE   // embedder + FAISS only
	SearchBM25    SearchMode = C.CBL_SEARCH_BM25    // SQLite FTS5 only
)

// String returns the retrieval mode's name, e.g. "bm25".
func (m SearchMode) String() string {
	if m == SearchDefault {
		return "default"
	}
	return enumName(C.CBL_NAMES_SEARCH, int32(m))
}

// KVFormat is the storage format of chunk KV (CBL_KV_*).
type KVFormat int32

// KV formats. The zero value is the library default, KVF16.
const (
	KVDefault KVFormat = C.CBL_KV_DEFAULT // the library default (KVF16)
	KVF16     KVFormat = C.CBL_KV_F16     // 16-bit floats
	KVQ8      KVFormat = C.CBL_KV_Q8      // 8-bit: half the bytes, small fidelity cost
	KVExact   KVFormat = C.CBL_KV_EXACT   // K in f32: 1.5x the bytes, reused KV exactly full's
)

// DocFormat is the format of a document given to IngestText (CBL_DOC_*).
type DocFormat int32

// Document formats. The zero value is the library default, DocText.
const (
	DocDefault  DocFormat = C.CBL_DOC_DEFAULT  // the library default (DocText)
	DocText     DocFormat = C.CBL_DOC_TEXT     // plain text
	DocMarkdown DocFormat = C.CBL_DOC_MARKDOWN // Markdown
	DocHTML     DocFormat = C.CBL_DOC_HTML     // HTML; markup is stripped
)

// StopReason tells why generation stopped (CBL_STOP_*).
type StopReason int32

// Stop reasons.
const (
	StopNone     StopReason = C.CBL_STOP_NONE     // no generation ran
	StopEOG      StopReason = C.CBL_STOP_EOG      // end-of-generation token
	StopLength   StopReason = C.CBL_STOP_LENGTH   // MaxTokens reached
	StopContext  StopReason = C.CBL_STOP_CONTEXT  // the session's context is full
	StopCallback StopReason = C.CBL_STOP_CALLBACK // the token callback asked to stop
)

// String returns the reason's name, e.g. "eog".
func (r StopReason) String() string {
	return enumName(C.CBL_NAMES_STOP, int32(r))
}

// Hit is one retrieved chunk: a search result or a citation of an answer.
type Hit struct {
	ChunkID int64   // the chunk's id in the catalog
	URI     string  // the document
	Start   int64   // byte offset of the chunk in the source document
	End     int64   // end byte offset (exclusive)
	Score   float64 // RRF (hybrid), cosine (dense) or -bm25 (BM25): higher is better
	Text    string  // the chunk's text
	Tokens  int     // the chunk's length in LLM tokens
	Page    int     // 1-based page of a PDF; 0 when the format has no pages
	Heading string  // the nearest heading before the chunk (HTML, DOCX, ODT); "" when none
}

func hitFromC(h *C.cbl_hit) Hit {
	return Hit{
		ChunkID: int64(h.chunk_id),
		URI:     C.GoString(h.uri),
		Start:   int64(h.start),
		End:     int64(h.end),
		Score:   float64(h.score),
		Text:    C.GoStringN(h.text, C.int(h.text_len)),
		Tokens:  int(h.n_tokens),
		Page:    int(h.page),
		Heading: C.GoString(h.heading), // "" for NULL (a library older than the field)
	}
}

// Stats are the statistics of one request (cbl_stats).
type Stats struct {
	Mode             Mode          // the prefill mode that ran
	Ratio            float32       // the recompute ratio used
	TTFT             time.Duration // request start to the first sampled token
	Prefill          time.Duration // the blended prefill alone
	Load             time.Duration // loading chunk KV from the store
	LoadWait         time.Duration // time the prefill waited for KV loads
	Select           time.Duration // choosing the tokens to recompute
	Compute          time.Duration // computing the prompt
	Search           time.Duration // Ask: retrieval
	Store            time.Duration // Ask: storing computed chunk KV after the answer (not in TTFT)
	DecodeTokensPerS float64       // generation speed
	FullTTFT         time.Duration // AskOptions.CompareFull only: TTFT of the same prompt in ModeFull
	PromptTokens     int64         // tokens in the prompt
	TokensReused     int64         // prompt tokens whose KV came from the store
	TokensRecomputed int64         // reused tokens recomputed by the blend
	TokensMissed     int64         // tokens of chunks without stored KV
	BytesLoaded      uint64        // chunk KV read from the store
	ChunksHit        int           // chunks whose KV was in the store
	ChunksMissed     int           // chunks computed from scratch (and stored afterwards)
	ChunksUsed       int           // Ask: retrieved chunks in the prompt
	ChunksDropped    int           // Ask: retrieved chunks left out to fit the context
	GeneratedTokens  int           // tokens generated
	StopReason       StopReason    // why generation stopped
	SearchMode       SearchMode    // Ask: the retrieval that ran (hybrid falls back to BM25 without an embedder)
	Ctx              int           // the session's context length
	Notice           string        // what ran differently ("" if nothing)
	TokensRemote     int64         // of TokensReused: read from the shared tier (RuntimeOptions.KVRemote)
	BytesRemote      uint64        // of BytesLoaded: read from the shared tier
	Dense            time.Duration // of Compute: work on every prompt row (blend: the layers before the check layer)
	Relocate         time.Duration // of Compute: rotating stored K into the cache
	Queue            time.Duration // the call's wait for a turn at the runtime's admission (not in TTFT)
}

func ms(v C.double) time.Duration { return time.Duration(float64(v) * float64(time.Millisecond)) }

func statsFromC(s *C.cbl_stats) Stats {
	return Stats{
		Mode:             Mode(s.mode),
		Ratio:            float32(s.ratio),
		TTFT:             ms(s.ttft_ms),
		Prefill:          ms(s.prefill_ms),
		Load:             ms(s.load_ms),
		LoadWait:         ms(s.load_wait_ms),
		Select:           ms(s.select_ms),
		Compute:          ms(s.compute_ms),
		Search:           ms(s.search_ms),
		Store:            ms(s.store_ms),
		DecodeTokensPerS: float64(s.decode_tokens_per_s),
		FullTTFT:         ms(s.full_ttft_ms),
		PromptTokens:     int64(s.prompt_tokens),
		TokensReused:     int64(s.tokens_reused),
		TokensRecomputed: int64(s.tokens_recomputed),
		TokensMissed:     int64(s.tokens_missed),
		BytesLoaded:      uint64(s.bytes_loaded),
		ChunksHit:        int(s.chunks_hit),
		ChunksMissed:     int(s.chunks_missed),
		ChunksUsed:       int(s.chunks_used),
		ChunksDropped:    int(s.chunks_dropped),
		GeneratedTokens:  int(s.generated_tokens),
		StopReason:       StopReason(s.stop_reason),
		SearchMode:       SearchMode(s.search_mode),
		Ctx:              int(s.n_ctx),
		Notice:           C.GoString(s.notice),
		TokensRemote:     int64(s.tokens_remote),
		BytesRemote:      uint64(s.bytes_remote),
		Dense:            ms(s.dense_ms),
		Relocate:         ms(s.relocate_ms),
		Queue:            ms(s.queue_ms),
	}
}

// TokenLogprob is one alternative for the first generated token.
type TokenLogprob struct {
	Token   int32   // the token id (Model.TokenToPiece gives its text)
	Logprob float32 // its natural-log probability
}

// Answer is the result of Session.Ask or Session.Generate, copied out of the library.
type Answer struct {
	Text      string  // the generated text
	Tokens    []int32 // the generated token ids (no prompt, no stop token)
	Citations []Hit   // the chunks the prompt used, best first (none for Generate)
	Stats     Stats   // the request's statistics
	// TopLogprobs are the most likely first tokens, most likely first, when the options'
	// TopLogprobs asked for them.
	TopLogprobs []TokenLogprob
}

// answerFromC copies a C answer; it does not free it.
func answerFromC(op string, a *C.cbl_answer) (*Answer, error) {
	ans := &Answer{Text: C.GoString(C.cbl_answer_text(a))}
	var nt C.size_t
	if ids := C.cbl_answer_tokens(a, &nt); ids != nil && nt > 0 {
		ans.Tokens = make([]int32, int(nt))
		for i, id := range unsafe.Slice(ids, int(nt)) {
			ans.Tokens[i] = int32(id)
		}
	}
	for i, n := C.size_t(0), C.cbl_answer_n_top_logprobs(a); i < n; i++ {
		var tok C.int32_t
		var lp C.float
		var msg *C.char
		if err := callError(op, C.gocbl_answer_top_logprob(a, i, &tok, &lp, &msg), msg); err != nil {
			return nil, err
		}
		ans.TopLogprobs = append(ans.TopLogprobs, TokenLogprob{Token: int32(tok), Logprob: float32(lp)})
	}
	n := C.cbl_answer_n_citations(a)
	for i := C.size_t(0); i < n; i++ {
		var h C.cbl_hit
		var msg *C.char
		if err := callError(op, C.gocbl_answer_citation(a, i, &h, &msg), msg); err != nil {
			return nil, err
		}
		ans.Citations = append(ans.Citations, hitFromC(&h))
	}
	var st C.cbl_stats
	var msg *C.char
	if err := callError(op, C.gocbl_answer_stats(a, &st, &msg), msg); err != nil {
		return nil, err
	}
	ans.Stats = statsFromC(&st)
	return ans, nil
}

// cstrings allocates C strings for one call and frees them together.
type cstrings []unsafe.Pointer

// str returns a C copy of s.
func (c *cstrings) str(s string) *C.char {
	p := C.CString(s)
	*c = append(*c, unsafe.Pointer(p))
	return p
}

// opt returns a C copy of s, or NULL (the library default) for "".
func (c *cstrings) opt(s string) *C.char {
	if s == "" {
		return nil
	}
	return c.str(s)
}

// metadata returns C arrays of m's keys and values, in key order, for the metadata_keys,
// metadata_values and n_metadata fields of a search or ask (NULL, NULL, 0 for an empty m). The
// arrays and strings are C memory freed with the rest, so the params hold no Go pointers. A key
// or value with a NUL byte is an ErrInvalidArg error: C would see it cut short.
func (c *cstrings) metadata(op string, m map[string]string) (keys, values **C.char, n C.size_t, err error) {
	if len(m) == 0 {
		return nil, nil, 0, nil
	}
	names := make([]string, 0, len(m))
	for k, v := range m {
		if strings.IndexByte(k, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return nil, nil, 0, &Error{Status: StatusInvalidArg, Op: op,
				Msg: fmt.Sprintf("metadata filter %q contains a NUL byte", k)}
		}
		names = append(names, k)
	}
	sort.Strings(names)
	keys, values = c.array(len(names)), c.array(len(names))
	ks, vs := unsafe.Slice(keys, len(names)), unsafe.Slice(values, len(names))
	for i, k := range names {
		ks[i], vs[i] = c.str(k), c.str(m[k])
	}
	return keys, values, C.size_t(len(names)), nil
}

// array returns a C array of n C string pointers (n > 0), freed with the rest.
func (c *cstrings) array(n int) **C.char {
	p := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil)))) // cgo's malloc never returns NULL
	*c = append(*c, p)
	return (**C.char)(p)
}

func (c *cstrings) free() {
	for _, p := range *c {
		C.free(p)
	}
	*c = nil
}

// enumName is the library's name of a CBL_* constant (cbl_enum_name): Go prints the words the C
// API and the CLI use. "unknown" for a value the library does not have.
func enumName(kind C.int32_t, v int32) string {
	if p := C.cbl_enum_name(kind, C.int32_t(v)); p != nil {
		return C.GoString(p)
	}
	return "unknown"
}
