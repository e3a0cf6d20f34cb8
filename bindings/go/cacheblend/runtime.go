package cacheblend

/*
#cgo pkg-config: cacheblend
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// HeaderVersionNumber is CBL_VERSION_NUMBER of the header this package was compiled against.
const HeaderVersionNumber = C.CBL_VERSION_NUMBER

// Version returns the linked library's version string, e.g. "0.1.0".
func Version() string { return C.GoString(C.cbl_version_string()) }

// VersionNumber returns the linked library's version as X*1000000 + Y*1000 + Z.
func VersionNumber() int { return int(C.cbl_version_number()) }

// BuildInfo returns facts about the library build, e.g. "cpu_isa=avx2 mimalloc=1 cuda=0".
func BuildInfo() string { return C.GoString(C.cbl_build_info()) }

// Devices returns the names of the compute devices; the first is always "cpu".
func Devices() []string {
	n := int32(C.cbl_device_count())
	names := make([]string, 0, n)
	for i := int32(0); i < n; i++ {
		if p := C.cbl_device_name(C.int32_t(i)); p != nil {
			names = append(names, C.GoString(p))
		}
	}
	return names
}

// RuntimeOptions configure Open. The zero value of every field selects the library default.
type RuntimeOptions struct {
	// ModelPath is the GGUF model, a file or a model name; "" = $CBL_MODEL, else the default
	// model (qwen2.5-coder-1.5b in the user cache).
	ModelPath string
	// EmbedderPath is the embedding model; "" = $CBL_EMBED_MODEL, else the default embedder. A
	// missing default embedder means BM25-only retrieval, reported by Runtime.Notice.
	EmbedderPath string
	// DataDir holds the catalog, index and KV store; "" = ${XDG_DATA_HOME:-~/.local/share}/cacheblend.
	DataDir string
	// KVBudgetBytes caps the chunk KV store (0 = 8 GiB); least recently used KV is evicted past it.
	KVBudgetBytes uint64
	// Threads is the number of compute threads (0 = all cores).
	Threads int
	// Device is the compute device, "cpu" or "cuda:0" ("" = "cpu").
	Device string
	// NoEmbedder skips loading an embedder (BM25-only retrieval).
	NoEmbedder bool
	// MustExist opens an existing data directory only: Open fails with an ErrIO error ("no data
	// directory at ...") when DataDir holds no catalog, and creates nothing. For read-only tools,
	// where a mistyped path must not become a new, empty corpus.
	MustExist bool
	// KVRemote is the shared chunk-KV tier, "redis://[user:password@]host:port/db"; "" =
	// $CBL_KV_REMOTE, else none. A server that is down, slow or refuses the password only makes
	// requests use local KV or recompute (Stats.Notice says so); a malformed URL is ErrInvalidArg.
	KVRemote string
	// MaxActiveRequests is how many session calls (Ask, Prefill*, Generate) run at once, taking
	// turns on the runtime's threads (0 = 4); MaxQueuedRequests how many more wait for a turn in
	// arrival order (0 = 64, negative = none). A call beyond them fails at once with a
	// StatusBusy error: retry later (an HTTP server answers 503).
	MaxActiveRequests int
	MaxQueuedRequests int
	// SessionMemoryBytes caps the RAM of all sessions' working KV caches and compute scratch
	// together (0 = half of physical memory): a session past it fails with StatusNoMem instead
	// of the process being killed for memory.
	SessionMemoryBytes uint64
}

// Runtime is a model, a KV store, a chunk catalog and a search index in one handle (cbl_runtime).
// It is safe for concurrent use: searches run in parallel, ingests and deletes are serialized.
type Runtime struct {
	h *handle
}

// Open opens (creating when missing, unless MustExist) the data directory and loads the model and the embedder.
// opts may be nil for all defaults.
func Open(opts *RuntimeOptions) (*Runtime, error) {
	const op = "runtime open"
	if lib, hdr := VersionNumber()/1000000, HeaderVersionNumber/1000000; lib != hdr {
		return nil, &Error{Status: StatusUnsupported, Op: op,
			Msg: fmt.Sprintf("library %s has major version %d, this binding was built for %d", Version(), lib, hdr)}
	}
	if opts == nil {
		opts = &RuntimeOptions{}
	}
	var cs cstrings
	defer cs.free()
	var rt *C.cbl_runtime
	var msg *C.char
	o := C.gocbl_runtime_opts{
		model_path:           cs.opt(opts.ModelPath),
		embedder_path:        cs.opt(opts.EmbedderPath),
		data_dir:             cs.opt(opts.DataDir),
		kv_budget_bytes:      C.uint64_t(opts.KVBudgetBytes),
		n_threads:            C.int32_t(opts.Threads),
		device:               cs.opt(opts.Device),
		no_embedder:          C.bool(opts.NoEmbedder),
		must_exist:           C.bool(opts.MustExist),
		kv_remote:            cs.opt(opts.KVRemote),
		max_active_requests:  C.int32_t(opts.MaxActiveRequests),
		max_queued_requests:  C.int32_t(opts.MaxQueuedRequests),
		session_memory_bytes: C.uint64_t(opts.SessionMemoryBytes),
	}
	st := C.gocbl_runtime_open(&o, &rt, &msg)
	if err := callError(op, st, msg); err != nil {
		return nil, err
	}
	r := &Runtime{h: newHandle(unsafe.Pointer(rt), "runtime",
		func(p unsafe.Pointer) { C.cbl_runtime_free((*C.cbl_runtime)(p)) }, nil)}
	runtime.SetFinalizer(r, (*Runtime).Close)
	return r, nil
}

// Close drops this handle's reference to the runtime. Sessions made from it keep working. A
// running ingest or search finishes first; Close does not wait for it. Close is idempotent and
// always returns nil.
func (r *Runtime) Close() error {
	if r != nil {
		r.h.close()
	}
	return nil
}

func (r *Runtime) acquire(op string) (*C.cbl_runtime, error) {
	if r == nil {
		return nil, closedError(op, "runtime")
	}
	p, err := r.h.acquire(op)
	return (*C.cbl_runtime)(p), err
}

// Notice tells why dense retrieval is off ("" when an embedder is loaded or the runtime is
// closed).
func (r *Runtime) Notice() string {
	p, err := r.acquire("notice")
	if err != nil {
		return ""
	}
	defer r.h.release()
	return C.GoString(C.cbl_runtime_notice(p))
}

// Interrupt makes the ingest calls running on this runtime now return an ErrAborted error, after
// committing whole documents only. It is safe from any goroutine; later calls are not affected.
func (r *Runtime) Interrupt() {
	p, err := r.acquire("interrupt")
	if err != nil {
		return
	}
	defer r.h.release()
	C.cbl_runtime_interrupt(p)
}

// Model returns a new handle to the runtime's model.
func (r *Runtime) Model() (*Model, error) {
	const op = "runtime model"
	p, err := r.acquire(op)
	if err != nil {
		return nil, err
	}
	defer r.h.release()
	var m *C.cbl_model
	var msg *C.char
	if err := callError(op, C.gocbl_runtime_model(p, &m, &msg), msg); err != nil {
		return nil, err
	}
	return newModel(m), nil
}

// Progress is one progress report of an ingest call.
//
// Besides the work phases ("scan", "ingest", "chunk", "embed", "kv", "index"), two phases report
// events after the work, numbered Done = 1..Total: "skip", a file that could not be ingested
// (Current, with the reason in Message), and "notice", something the caller may want to know,
// e.g. that chunks were stored for BM25 only or that the vector index was rebuilt (in Message).
// "chunk" (bytes) and "embed" (chunks) also come during one big file, with Current naming it.
// "wait" comes every 50-200 ms while another process holds the data directory's writer lock
// (one writer at a time): Current names the holder, e.g. "pid 1234", and returning false stops
// waiting (ErrAborted).
type Progress struct {
	Phase   string // "scan", "ingest", "chunk", "embed", "kv", "index", "wait", "skip" or "notice"
	Done    int64  // units of the phase done
	Total   int64  // units of the phase in all
	Current string // the file being worked on, or for "wait" the writer ("" when none, and for "notice")
	Message string // phase "skip": why Current was skipped; phase "notice": the notice
}

// DefaultMaxFileBytes is the size above which ingest skips a file when
// IngestOptions.MaxFileBytes is 0 (CBL_DEFAULT_MAX_FILE_BYTES, 16 MiB).
const DefaultMaxFileBytes int64 = C.CBL_DEFAULT_MAX_FILE_BYTES

// NoFileSizeLimit, as IngestOptions.MaxFileBytes, lets ingest read files of any size.
const NoFileSizeLimit int64 = math.MaxInt64

// IngestOptions configure IngestText and IngestPath. The zero value selects the defaults.
type IngestOptions struct {
	Collection   string    // a collection name that searches can filter on ("" = none)
	MetadataJSON string    // IngestText only: a JSON object stored with the document
	Format       DocFormat // IngestText only; files go by their extension, else their content
	ChunkTokens  int       // LLM tokens per chunk (0 = 512)
	PrecomputeKV bool      // compute every new chunk's KV now (else on first use)
	// FollowSymlinks makes IngestPath follow a symbolic link met in the folder when its real
	// path stays inside that folder; by default (and for a link leading out) it is skipped
	// ("symbolic link (not followed)"). A path passed to IngestPath is followed either way.
	FollowSymlinks bool
	// MaxFileBytes skips larger files with a reason (0 = DefaultMaxFileBytes, 16 MiB;
	// NoFileSizeLimit = none); IngestText of a larger text is an ErrInvalidArg error.
	MaxFileBytes int64
	// MaxFileSeconds abandons a file not committed within this many seconds (nothing of it is
	// committed), skips it with "took longer than N s" and goes on with the next file; IngestText
	// returns an ErrAborted error (0 = no limit).
	MaxFileSeconds float64
	// Progress, when set, receives progress reports on the calling goroutine, including the
	// "skip" and "notice" events; returning false aborts the ingest (ErrAborted). It must not
	// call back into the same runtime's ingest.
	Progress func(Progress) bool
}

// IngestReport counts what an ingest call did.
type IngestReport struct {
	FilesSeen     int64 // files found
	Added         int64 // new documents
	Updated       int64 // changed documents re-ingested
	Unchanged     int64 // documents skipped by content hash
	Removed       int64 // documents removed
	Skipped       int64 // files that could not be read (reported with phase "skip")
	ChunksAdded   int64 // chunks added to the catalog
	ChunksRemoved int64 // chunks removed
	Embedded      int64 // chunks embedded for dense search
	KVComputed    int64 // chunks whose KV was precomputed
	KVDeleted     int64 // chunk KV files deleted because their last reference went
}

func reportFromC(r *C.cbl_ingest_report) IngestReport {
	return IngestReport{
		FilesSeen:     int64(r.files_seen),
		Added:         int64(r.added),
		Updated:       int64(r.updated),
		Unchanged:     int64(r.unchanged),
		Removed:       int64(r.removed),
		Skipped:       int64(r.skipped),
		ChunksAdded:   int64(r.chunks_added),
		ChunksRemoved: int64(r.chunks_removed),
		Embedded:      int64(r.embedded),
		KVComputed:    int64(r.kv_computed),
		KVDeleted:     int64(r.kv_deleted),
	}
}

// ingest runs one ingest call with progress and cancellation wired up.
func (r *Runtime) ingest(ctx context.Context, op string, opts *IngestOptions,
	call func(p *C.cbl_runtime, o *C.gocbl_ingest_opts, sink C.uintptr_t, rep *C.cbl_ingest_report, msg **C.char) C.cbl_status,
) (IngestReport, error) {
	ctx = ctxOrBackground(ctx)
	p, err := r.acquire(op)
	if err != nil {
		return IngestReport{}, err
	}
	defer r.h.release()
	if err := refused(op, ctx); err != nil {
		return IngestReport{}, err
	}
	if opts == nil {
		opts = &IngestOptions{}
	}
	var cs cstrings
	defer cs.free()
	o := C.gocbl_ingest_opts{
		collection:    cs.opt(opts.Collection),
		metadata_json: cs.opt(opts.MetadataJSON),
		format:        C.int32_t(opts.Format),
		chunk_tokens:  C.int32_t(opts.ChunkTokens),
		precompute_kv: C.bool(opts.PrecomputeKV),

		follow_symlinks:  C.bool(opts.FollowSymlinks),
		max_file_bytes:   C.int64_t(opts.MaxFileBytes),
		max_file_seconds: C.double(opts.MaxFileSeconds),
	}
	var sinkID C.uintptr_t
	var sink *progressSink
	if opts.Progress != nil || ctx.Done() != nil {
		sink = &progressSink{ctx: ctx, fn: opts.Progress}
		h, id := newSink(sink)
		defer h.Delete()
		sinkID = id
	}
	stop := watch(ctx, func() { C.cbl_runtime_interrupt(p) })
	var rep C.cbl_ingest_report
	var msg *C.char
	st := call(p, &o, sinkID, &rep, &msg)
	stop()
	err = withContext(ctx, callError(op, st, msg))
	if sink != nil {
		sink.rethrow()
	}
	return reportFromC(&rep), err
}

// IngestText ingests text as the document uri, replacing an older version of it. The document
// commits atomically. Cancelling ctx aborts the call with an error matching ErrAborted and
// ctx's error; it interrupts every ingest running on the runtime at that moment. With an
// ErrAborted error (ctx, Runtime.Interrupt, Progress returning false) the report still counts
// what was committed; with other errors it is zero.
func (r *Runtime) IngestText(ctx context.Context, uri, text string, opts *IngestOptions) (IngestReport, error) {
	var cs cstrings
	defer cs.free()
	curi, ctext := cs.str(uri), cs.str(text)
	return r.ingest(ctx, "ingest text", opts, func(p *C.cbl_runtime, o *C.gocbl_ingest_opts, sink C.uintptr_t,
		rep *C.cbl_ingest_report, msg **C.char) C.cbl_status {
		return C.gocbl_ingest_text(p, curi, ctext, C.size_t(len(text)), o, sink, rep, msg)
	})
}

// IngestPath ingests a file or, recursively, a folder (.txt, .md, .html). Unchanged files are
// skipped by content hash; files that cannot be read are skipped with a reason (a Progress report
// with phase "skip") and the rest go on: symbolic links (unless FollowSymlinks), special files
// and files over MaxFileBytes among them. A path that cannot be accessed itself (missing, no
// permission) is an ErrIO error naming it, with nothing ingested. Documents committed before an
// abort or error stay.
// Cancellation and the report of an aborted call work as for IngestText.
func (r *Runtime) IngestPath(ctx context.Context, path string, opts *IngestOptions) (IngestReport, error) {
	var cs cstrings
	defer cs.free()
	cpath := cs.str(path)
	return r.ingest(ctx, "ingest path", opts, func(p *C.cbl_runtime, o *C.gocbl_ingest_opts, sink C.uintptr_t,
		rep *C.cbl_ingest_report, msg **C.char) C.cbl_status {
		return C.gocbl_ingest_path(p, cpath, o, sink, rep, msg)
	})
}

// Delete removes a document, its vectors and (last reference) its chunks' KV. It reports
// whether the document existed.
func (r *Runtime) Delete(uri string) (bool, error) {
	const op = "delete"
	p, err := r.acquire(op)
	if err != nil {
		return false, err
	}
	defer r.h.release()
	var cs cstrings
	defer cs.free()
	var found C.bool
	var msg *C.char
	if err := callError(op, C.gocbl_delete(p, cs.str(uri), &found, &msg), msg); err != nil {
		return false, err
	}
	return bool(found), nil
}

// DeleteCounted is Delete that also counts what went: Removed is 1 when the document existed
// (else 0), ChunksRemoved its chunks and KVDeleted the chunk KV files whose last reference went;
// the other counts are 0.
func (r *Runtime) DeleteCounted(uri string) (IngestReport, error) {
	const op = "delete"
	p, err := r.acquire(op)
	if err != nil {
		return IngestReport{}, err
	}
	defer r.h.release()
	var cs cstrings
	defer cs.free()
	var rep C.cbl_ingest_report
	var msg *C.char
	if err := callError(op, C.gocbl_delete_counted(p, cs.str(uri), &rep, &msg), msg); err != nil {
		return IngestReport{}, err
	}
	return reportFromC(&rep), nil
}

// CorpusStats are counts and sizes of a runtime's data directory (Runtime.Stats).
type CorpusStats struct {
	Documents     int64  // documents in the catalog
	Chunks        int64  // chunks in the catalog
	KVEntries     int64  // chunk KV files in the KV store
	KVBytes       uint64 // bytes of those files
	Vectors       int64  // vectors in the dense index (0 without an embedder)
	CatalogBytes  uint64 // catalog.db with its write-ahead log
	IndexBytes    uint64 // vectors.faiss
	KVBudgetBytes uint64 // the KV store's budget (RuntimeOptions.KVBudgetBytes, 0 resolved to 8 GiB)
	DiskFreeBytes uint64 // free to this user on the data directory's file system
}

// Stats counts the documents, chunks and stored chunk KV of the runtime's data directory.
func (r *Runtime) Stats() (CorpusStats, error) {
	const op = "runtime stats"
	p, err := r.acquire(op)
	if err != nil {
		return CorpusStats{}, err
	}
	defer r.h.release()
	var st C.cbl_corpus_stats
	var msg *C.char
	if err := callError(op, C.gocbl_runtime_stats(p, &st, &msg), msg); err != nil {
		return CorpusStats{}, err
	}
	return CorpusStats{
		Documents: int64(st.documents),
		Chunks:    int64(st.chunks),
		KVEntries: int64(st.kv_entries),
		KVBytes:   uint64(st.kv_bytes),

		Vectors:       int64(st.vectors),
		CatalogBytes:  uint64(st.catalog_bytes),
		IndexBytes:    uint64(st.index_bytes),
		KVBudgetBytes: uint64(st.kv_budget_bytes),
		DiskFreeBytes: uint64(st.disk_free_bytes),
	}, nil
}

// Check verifies that the catalog, the vector index and the KV store agree. It returns the
// problems found, one per element, and none (a nil slice) when they agree; the error is for a
// check that could not run.
func (r *Runtime) Check() ([]string, error) {
	const op = "runtime check"
	p, err := r.acquire(op)
	if err != nil {
		return nil, err
	}
	defer r.h.release()
	var problems, msg *C.char
	if err := callError(op, C.gocbl_runtime_check(p, &problems, &msg), msg); err != nil {
		return nil, err
	}
	if problems == nil {
		return nil, nil
	}
	text := C.GoString(problems)
	C.cbl_free(unsafe.Pointer(problems))
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// Repair fixes what Check finds where it can: it rebuilds the catalog's full-text index and the
// vector index from the catalog, embeds chunks without embeddings, deletes damaged and
// unreferenced KV files, finishes pending deletes and, with precompute, computes missing chunk
// KV. A catalog that SQLite finds damaged is left as it is (re-ingest into a new data
// directory).
//
// It returns the report, one line per item starting with "repaired: ", "not repaired: " (still
// a problem, which Check lists) or "note: ", and "" when there was nothing to do. Problems left
// are not an error, as in the C API (cbl_runtime_repair returns CBL_OK): look for "not
// repaired: " lines or call Check. The error is for a repair that could not run (e.g. an I/O
// error). Like an ingest, it waits while another process writes to the data directory.
func (r *Runtime) Repair(precompute bool) (string, error) {
	const op = "runtime repair"
	p, err := r.acquire(op)
	if err != nil {
		return "", err
	}
	defer r.h.release()
	var report, msg *C.char
	if err := callError(op, C.gocbl_runtime_repair(p, C.bool(precompute), &report, &msg), msg); err != nil {
		return "", err
	}
	if report == nil {
		return "", nil
	}
	defer C.cbl_free(unsafe.Pointer(report))
	return C.GoString(report), nil
}

// SearchOptions configure Search and SearchResults. The zero value selects the defaults.
type SearchOptions struct {
	K          int        // hits to return (0 = 5)
	Mode       SearchMode // retrieval mode (0 = hybrid)
	Collection string     // only this collection ("" = every collection)
	URIPrefix  string     // only documents whose uri starts with it ("" = every document)
	// Metadata keeps only documents whose metadata holds each value under its key (nil = every
	// document). A document's metadata is the JSON object given as IngestOptions.MetadataJSON;
	// ingested files carry "kind" ("text", "markdown" or "html") and "path". Values compare as
	// text, so "2021" matches the JSON number 2021. Keys are 1 to 128 of [A-Za-z0-9_.-] and
	// name top-level fields ("a.b" is the key "a.b", not a nested field); another key is an
	// ErrInvalidArg error.
	Metadata map[string]string
}

// SearchResults are what a search returned (Runtime.SearchResults).
type SearchResults struct {
	Hits []Hit // the best chunks, best first
	// Notice tells what the retriever changed, e.g. dense search skipped without an embedder
	// ("" if nothing).
	Notice string
	// Mode is the retrieval that ran: SearchHybrid falls back to SearchBM25 without an embedder.
	Mode SearchMode
}

// Search returns the best chunks for query, best first, and a notice telling what the retriever
// changed (e.g. dense search skipped without an embedder; "" if nothing). SearchResults also
// tells which retrieval mode ran.
func (r *Runtime) Search(query string, opts *SearchOptions) ([]Hit, string, error) {
	res, err := r.SearchResults(query, opts)
	if err != nil {
		return nil, "", err
	}
	return res.Hits, res.Notice, nil
}

// SearchResults is Search returning the hits and the notice together with the retrieval mode
// that ran.
func (r *Runtime) SearchResults(query string, opts *SearchOptions) (*SearchResults, error) {
	const op = "search"
	p, err := r.acquire(op)
	if err != nil {
		return nil, err
	}
	defer r.h.release()
	if opts == nil {
		opts = &SearchOptions{}
	}
	var cs cstrings
	defer cs.free()
	o := C.gocbl_search_opts{
		k:          C.int32_t(opts.K),
		mode:       C.int32_t(opts.Mode),
		collection: cs.opt(opts.Collection),
		uri_prefix: cs.opt(opts.URIPrefix),
	}
	if o.metadata_keys, o.metadata_values, o.n_metadata, err = cs.metadata(op, opts.Metadata); err != nil {
		return nil, err
	}
	var res *C.cbl_results
	var msg *C.char
	if err := callError(op, C.gocbl_search(p, cs.str(query), &o, &res, &msg), msg); err != nil {
		return nil, err
	}
	defer C.cbl_results_free(res)
	n := C.cbl_results_count(res)
	out := &SearchResults{
		Hits:   make([]Hit, 0, int(n)),
		Notice: C.GoString(C.cbl_results_notice(res)),
		Mode:   SearchMode(C.cbl_results_mode(res)),
	}
	for i := C.size_t(0); i < n; i++ {
		var h C.cbl_hit
		var hmsg *C.char
		if err := callError(op, C.gocbl_results_hit(res, i, &h, &hmsg), hmsg); err != nil {
			return nil, err
		}
		out.Hits = append(out.Hits, hitFromC(&h))
	}
	return out, nil
}

// DocumentFilter selects documents as SearchOptions do ("" and nil select every document).
type DocumentFilter struct {
	Collection string            // only this collection
	URIPrefix  string            // only documents whose uri starts with it
	Metadata   map[string]string // only documents whose metadata holds each value under its key
}

// Document is one document of a data directory (Runtime.Documents).
type Document struct {
	URI          string // a file's absolute path, or the uri given to IngestText
	Kind         string // "text", "markdown" or "html" ("" when its metadata has none, e.g. IngestText)
	Collection   string // "" when none
	MetadataJSON string // the document's metadata, a JSON object
	Chunks       int64  // chunks in the catalog
	KVChunks     int64  // chunks whose KV is stored
	SourceBytes  int64  // size of the source text when ingested
	KVBytes      int64  // bytes of its chunks' stored KV files
	// Modified is the file's modification time when it was ingested (the zero time for
	// IngestText documents).
	Modified time.Time
	// IngestedAt is when the document was last (re)ingested, to the second.
	IngestedAt time.Time
}

// Documents lists the documents a search with filter may return, ordered by uri; filter may be
// nil for every document.
func (r *Runtime) Documents(filter *DocumentFilter) ([]Document, error) {
	const op = "documents"
	p, err := r.acquire(op)
	if err != nil {
		return nil, err
	}
	defer r.h.release()
	if filter == nil {
		filter = &DocumentFilter{}
	}
	var cs cstrings
	defer cs.free()
	o := C.gocbl_search_opts{collection: cs.opt(filter.Collection), uri_prefix: cs.opt(filter.URIPrefix)}
	if o.metadata_keys, o.metadata_values, o.n_metadata, err = cs.metadata(op, filter.Metadata); err != nil {
		return nil, err
	}
	var list *C.cbl_documents
	var msg *C.char
	if err := callError(op, C.gocbl_documents(p, &o, &list, &msg), msg); err != nil {
		return nil, err
	}
	defer C.cbl_documents_free(list)
	n := C.cbl_documents_count(list)
	out := make([]Document, 0, int(n))
	for i := C.size_t(0); i < n; i++ {
		var d C.cbl_document_info
		var dmsg *C.char
		if err := callError(op, C.gocbl_documents_get(list, i, &d, &dmsg), dmsg); err != nil {
			return nil, err
		}
		doc := Document{
			URI:          C.GoString(d.uri),
			Kind:         C.GoString(d.kind),
			Collection:   C.GoString(d.collection),
			MetadataJSON: C.GoString(d.metadata_json),
			Chunks:       int64(d.n_chunks),
			KVChunks:     int64(d.n_kv_chunks),
			SourceBytes:  int64(d.source_bytes),
			KVBytes:      int64(d.kv_bytes),
		}
		if d.mtime_ns > 0 {
			doc.Modified = time.Unix(0, int64(d.mtime_ns))
		}
		if d.ingested_at > 0 {
			doc.IngestedAt = time.Unix(int64(d.ingested_at), 0)
		}
		out = append(out, doc)
	}
	return out, nil
}
