package cacheblend_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

var docs = []struct{ uri, text string }{
	{"mem://amazon", "The Amazon river flows through Brazil, Peru and Colombia. It carries more " +
		"water than any other river on Earth."},
	{"mem://kilimanjaro", "Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, " +
		"Uhuru, rises 5,895 metres above sea level and was first climbed in 1889."},
	{"mem://sourdough", "Sourdough bread is leavened by a culture of wild yeast and lactic acid " +
		"bacteria. The dough rises slowly, which gives the bread its sour taste."},
}

// modelPath returns the suite's model (CBL_MODEL, else SmolLM2 in the user cache: the library's
// own default is qwen2.5-coder-1.5b), skipping the test when it is missing unless
// CBL_REQUIRE_MODEL=1.
func modelPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CBL_MODEL")
	if path == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			if home := os.Getenv("HOME"); home != "" {
				base = filepath.Join(home, ".cache")
			} else {
				base = "/tmp"
			}
		}
		path = filepath.Join(base, "cacheblend", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CBL_REQUIRE_MODEL") == "1" {
			t.Fatalf("default model missing: %s", path)
		}
		t.Skipf("default model missing: %s", path)
	}
	return path
}

// openRuntime opens a runtime in a temporary data directory with the three documents ingested
// into the collection "facts".
func openRuntime(t *testing.T) (*cacheblend.Runtime, string) {
	t.Helper()
	return openRuntimeWith(t, cacheblend.RuntimeOptions{Threads: 2})
}

// openRuntimeWith is openRuntime with other options (ModelPath and DataDir are set here).
func openRuntimeWith(t *testing.T, opts cacheblend.RuntimeOptions) (*cacheblend.Runtime, string) {
	t.Helper()
	dir := t.TempDir()
	opts.ModelPath = modelPath(t)
	opts.DataDir = filepath.Join(dir, "data")
	rt, err := cacheblend.Open(&opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	for _, d := range docs {
		rep, err := rt.IngestText(context.Background(), d.uri, d.text,
			&cacheblend.IngestOptions{Collection: "facts"})
		if err != nil {
			t.Fatalf("IngestText %s: %v", d.uri, err)
		}
		if rep.Added != 1 {
			t.Errorf("IngestText %s: report %+v, want Added 1", d.uri, rep)
		}
	}
	return rt, dir
}

func newSession(t *testing.T, rt *cacheblend.Runtime, opts *cacheblend.SessionOptions) *cacheblend.Session {
	t.Helper()
	if opts == nil {
		opts = &cacheblend.SessionOptions{}
	}
	opts.Ctx, opts.Threads = 1024, 2
	s, err := rt.NewSession(opts)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestVersionAndBuildInfo(t *testing.T) {
	if cacheblend.Version() == "" || cacheblend.BuildInfo() == "" {
		t.Fatalf("Version %q, BuildInfo %q", cacheblend.Version(), cacheblend.BuildInfo())
	}
	if cacheblend.VersionNumber()/1000000 != cacheblend.HeaderVersionNumber/1000000 {
		t.Errorf("library %d, header %d", cacheblend.VersionNumber(), cacheblend.HeaderVersionNumber)
	}
	if devs := cacheblend.Devices(); len(devs) == 0 || devs[0] != "cpu" {
		t.Errorf("Devices() = %v", devs)
	}
	if got := cacheblend.StatusInvalidArg.String(); got != "invalid argument" {
		t.Errorf("StatusInvalidArg.String() = %q", got)
	}
}

// The names come from the library's one table (cbl_enum_name), the words the CLI prints.
func TestEnumNamesComeFromTheLibrary(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{cacheblend.ModeFull.String(), "full"},
		{cacheblend.ModeBlend.String(), "blend"},
		{cacheblend.ModeDefault.String(), "default"},
		{cacheblend.Mode(77).String(), "unknown"},
		{cacheblend.SearchDense.String(), "dense"},
		{cacheblend.SearchDefault.String(), "default"},
		{cacheblend.StopNone.String(), "none"},
		{cacheblend.StopEOG.String(), "eog"},
		{cacheblend.StopCallback.String(), "callback"},
		{cacheblend.StopReason(9).String(), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestErrorIsMatchesPrimaryAndExtendedStatus(t *testing.T) {
	err := error(&cacheblend.Error{Status: cacheblend.StatusIORead, Op: "x", Msg: "read failed"})
	if !errors.Is(err, cacheblend.ErrIO) || !errors.Is(err, cacheblend.ErrIORead) {
		t.Error("an IO_READ error must match ErrIO and ErrIORead")
	}
	if errors.Is(err, cacheblend.ErrIOWrite) || errors.Is(err, cacheblend.ErrCorrupt) {
		t.Error("an IO_READ error must not match ErrIOWrite or ErrCorrupt")
	}
	if errors.Is(&cacheblend.Error{Status: cacheblend.StatusIO}, cacheblend.ErrIORead) {
		t.Error("a plain IO error must not match ErrIORead")
	}
	if got := err.Error(); got != "cacheblend: x: read failed (i/o error)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestOpenBadModelPathFailsWithMessage(t *testing.T) {
	_, err := cacheblend.Open(&cacheblend.RuntimeOptions{
		ModelPath: "/nonexistent/model.gguf",
		DataDir:   filepath.Join(t.TempDir(), "data"),
	})
	if !errors.Is(err, cacheblend.ErrIO) {
		t.Fatalf("Open: %v, want ErrIO", err)
	}
	var e *cacheblend.Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "/nonexistent/model.gguf") || e.Op != "runtime open" {
		t.Errorf("Open error %#v: want the path in Msg and Op \"runtime open\"", e)
	}
}

func TestSearchWithFiltersAndDelete(t *testing.T) {
	rt, _ := openRuntime(t)
	bm25 := &cacheblend.SearchOptions{K: 3, Mode: cacheblend.SearchBM25}
	hits, _, err := rt.Search("volcano in Tanzania", bm25)
	if err != nil || len(hits) == 0 {
		t.Fatalf("Search: %v, %d hits", err, len(hits))
	}
	h := hits[0]
	if h.URI != "mem://kilimanjaro" || h.Start != 0 || h.End != int64(len(docs[1].text)) ||
		h.Text != docs[1].text || h.Tokens <= 10 || h.ChunkID == 0 && h.Score == 0 {
		t.Errorf("first hit %+v", h)
	}

	hits, _, err = rt.Search("volcano in Tanzania",
		&cacheblend.SearchOptions{Mode: cacheblend.SearchBM25, Collection: "other"})
	if err != nil || len(hits) != 0 {
		t.Errorf("collection filter: %v, %d hits", err, len(hits))
	}
	hits, _, err = rt.Search("river", &cacheblend.SearchOptions{Mode: cacheblend.SearchBM25,
		Collection: "facts", URIPrefix: "mem://amaz"})
	if err != nil || len(hits) != 1 || hits[0].URI != "mem://amazon" {
		t.Errorf("uri prefix filter: %v, %+v", err, hits)
	}

	// The default (hybrid) search works with or without an embedder; without one it says so.
	hits, notice, err := rt.Search("Which river carries the most water?", nil)
	if err != nil || len(hits) == 0 {
		t.Errorf("hybrid search: %v, %d hits", err, len(hits))
	}
	if rt.Notice() != "" && notice == "" {
		t.Errorf("no embedder (%q) but the search has no notice", rt.Notice())
	}

	_, _, err = rt.Search("river", &cacheblend.SearchOptions{Mode: 99})
	var e *cacheblend.Error
	if !errors.Is(err, cacheblend.ErrInvalidArg) || !errors.As(err, &e) || !strings.Contains(e.Msg, "search mode") {
		t.Errorf("bad search mode: %v", err)
	}

	found, err := rt.Delete("mem://amazon")
	if err != nil || !found {
		t.Errorf("Delete: %v, found %v", err, found)
	}
	found, err = rt.Delete("mem://amazon")
	if err != nil || found {
		t.Errorf("second Delete: %v, found %v", err, found)
	}
	hits, _, _ = rt.Search("river", &cacheblend.SearchOptions{Mode: cacheblend.SearchBM25, URIPrefix: "mem://amaz"})
	if len(hits) != 0 {
		t.Errorf("deleted document still found: %+v", hits)
	}
}

// ingestWithMetadata adds two river documents with different metadata to openRuntime's three
// (which have none).
func ingestWithMetadata(t *testing.T, rt *cacheblend.Runtime) {
	t.Helper()
	for _, d := range []struct{ uri, text, meta string }{
		{"mem://rivers-en", "Rivers: the Amazon carries more water than any other river.", `{"lang":"en","year":2020}`},
		{"mem://rivers-de", "Rivers: the Danube flows through ten countries of Europe.", `{"lang":"de","year":2021}`},
	} {
		if _, err := rt.IngestText(context.Background(), d.uri, d.text,
			&cacheblend.IngestOptions{MetadataJSON: d.meta}); err != nil {
			t.Fatalf("IngestText %s: %v", d.uri, err)
		}
	}
}

func uris(hits []cacheblend.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.URI)
	}
	return out
}

func TestMetadataFilterAndSearchMode(t *testing.T) {
	rt, dir := openRuntime(t)
	ingestWithMetadata(t, rt)

	bm25 := func(meta map[string]string) *cacheblend.SearchOptions {
		return &cacheblend.SearchOptions{K: 10, Mode: cacheblend.SearchBM25, Metadata: meta}
	}
	res, err := rt.SearchResults("rivers", bm25(nil))
	if err != nil || len(res.Hits) < 2 || res.Mode != cacheblend.SearchBM25 {
		t.Fatalf("unfiltered: %v, %v, mode %v", err, uris(res.Hits), res.Mode)
	}
	res, err = rt.SearchResults("rivers", bm25(map[string]string{"lang": "de"}))
	if err != nil || len(res.Hits) != 1 || res.Hits[0].URI != "mem://rivers-de" || res.Mode != cacheblend.SearchBM25 {
		t.Errorf("lang=de: %v, %v, mode %v", err, uris(res.Hits), res.Mode)
	}
	// Every pair must hold; values compare as text, so "2021" matches the JSON number.
	hits, _, err := rt.Search("rivers", bm25(map[string]string{"lang": "de", "year": "2021"}))
	if err != nil || len(hits) != 1 || hits[0].URI != "mem://rivers-de" {
		t.Errorf("lang=de year=2021: %v, %v", err, uris(hits))
	}
	hits, _, err = rt.Search("rivers", bm25(map[string]string{"lang": "en", "year": "2021"}))
	if err != nil || len(hits) != 0 {
		t.Errorf("lang=en year=2021: %v, %v, want none", err, uris(hits))
	}
	// It combines with the other filters.
	hits, _, err = rt.Search("rivers", &cacheblend.SearchOptions{Mode: cacheblend.SearchBM25,
		URIPrefix: "mem://rivers-e", Metadata: map[string]string{"lang": "de"}})
	if err != nil || len(hits) != 0 {
		t.Errorf("uri prefix + metadata: %v, %v, want none", err, uris(hits))
	}

	// Ingested files carry "kind" and "path".
	folder := filepath.Join(dir, "notes")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"a.md": "# Rivers\n\nThe Nile is long.\n", "b.txt": "Rivers: the Nile is long.\n"} {
		if err := os.WriteFile(filepath.Join(folder, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.IngestPath(context.Background(), folder, nil); err != nil {
		t.Fatalf("IngestPath: %v", err)
	}
	hits, _, err = rt.Search("Nile", bm25(map[string]string{"kind": "markdown"}))
	if err != nil || len(hits) != 1 || !strings.HasSuffix(hits[0].URI, "a.md") {
		t.Errorf("kind=markdown: %v, %v", err, uris(hits))
	}

	// The mode that ran: hybrid with an embedder, else BM25 (and a notice).
	res, err = rt.SearchResults("Which river flows through Europe?",
		&cacheblend.SearchOptions{Metadata: map[string]string{"lang": "de"}})
	want := cacheblend.SearchHybrid
	if rt.Notice() != "" {
		want = cacheblend.SearchBM25
	}
	if err != nil || len(res.Hits) != 1 || res.Hits[0].URI != "mem://rivers-de" || res.Mode != want {
		t.Errorf("default search: %v, %v, mode %v, want %v (runtime notice %q)", err, uris(res.Hits), res.Mode, want, rt.Notice())
	}

	var e *cacheblend.Error
	for _, key := range []string{"la ng", "", strings.Repeat("k", 129), `a"b`} {
		_, _, err = rt.Search("rivers", bm25(map[string]string{key: "de"}))
		if !errors.Is(err, cacheblend.ErrInvalidArg) || !errors.As(err, &e) || !strings.Contains(e.Msg, "metadata key") {
			t.Errorf("bad key %q: %v, want ErrInvalidArg about the metadata key", key, err)
		}
	}
	_, err = rt.SearchResults("rivers", bm25(map[string]string{"lang": "d\x00e"}))
	if !errors.Is(err, cacheblend.ErrInvalidArg) || !errors.As(err, &e) || !strings.Contains(e.Msg, "NUL") {
		t.Errorf("NUL in a value: %v, want ErrInvalidArg", err)
	}
}

func TestSearchFallsBackToBM25WithoutAnEmbedder(t *testing.T) {
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: modelPath(t),
		DataDir: filepath.Join(t.TempDir(), "data"), Threads: 2, NoEmbedder: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rt.Close()
	if _, err := rt.IngestText(context.Background(), docs[0].uri, docs[0].text, nil); err != nil {
		t.Fatalf("IngestText: %v", err)
	}
	res, err := rt.SearchResults("river", &cacheblend.SearchOptions{Mode: cacheblend.SearchHybrid})
	if err != nil || len(res.Hits) != 1 || res.Mode != cacheblend.SearchBM25 || res.Notice == "" {
		t.Errorf("hybrid without an embedder: %v, %v, mode %v, notice %q", err, uris(res.Hits), res.Mode, res.Notice)
	}
	if got := res.Mode.String(); got != "bm25" {
		t.Errorf("SearchBM25.String() = %q", got)
	}
}

func TestAskWithMetadataFilterCitesOnlyMatches(t *testing.T) {
	rt, _ := openRuntime(t)
	ingestWithMetadata(t, rt)
	s := newSession(t, rt, nil)
	opts := &cacheblend.AskOptions{SearchMode: cacheblend.SearchBM25, MaxTokens: 4,
		Metadata: map[string]string{"lang": "de"}}
	ans, err := s.Ask(context.Background(), "Which river flows through Europe?", opts, nil)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if got := uris(ans.Citations); len(got) != 1 || got[0] != "mem://rivers-de" {
		t.Errorf("citations %v, want only mem://rivers-de", got)
	}
	if ans.Stats.SearchMode != cacheblend.SearchBM25 {
		t.Errorf("stats search mode %v", ans.Stats.SearchMode)
	}
	// Nothing to retrieve: the library refuses to answer without context.
	opts.Metadata = map[string]string{"lang": "fr"}
	_, err = s.Ask(context.Background(), "Which river flows through Europe?", opts, nil)
	if !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("no document matches: %v, want ErrInvalidArg", err)
	}
	opts.Metadata = map[string]string{"la ng": "de"}
	_, err = s.Ask(context.Background(), "Which river flows through Europe?", opts, nil)
	var e *cacheblend.Error
	if !errors.Is(err, cacheblend.ErrInvalidArg) || !errors.As(err, &e) || !strings.Contains(e.Msg, "metadata key") {
		t.Errorf("bad key: %v, want ErrInvalidArg", err)
	}
}

func TestIngestFolderReportsSkipsAndAborts(t *testing.T) {
	rt, dir := openRuntime(t)
	folder := filepath.Join(dir, "docs")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(folder, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		write("doc"+string(rune('0'+i))+".txt", "Document number "+string(rune('0'+i))+" talks about lighthouses.\n")
	}
	write("bad.txt", "invalid \x81\x9d utf-8\n")

	var phases []string
	var skipped []cacheblend.Progress
	opts := &cacheblend.IngestOptions{Collection: "folder", Progress: func(p cacheblend.Progress) bool {
		phases = append(phases, p.Phase)
		if p.Phase == "skip" {
			skipped = append(skipped, p)
		}
		return true
	}}
	rep, err := rt.IngestPath(context.Background(), folder, opts)
	if err != nil {
		t.Fatalf("IngestPath: %v", err)
	}
	if rep.Added != 4 || rep.Skipped != 1 {
		t.Errorf("report %+v, want Added 4, Skipped 1", rep)
	}
	if len(skipped) != 1 || !strings.HasSuffix(skipped[0].Current, "bad.txt") || skipped[0].Message == "" {
		t.Errorf("skip reports %+v (phases %v)", skipped, phases)
	}
	hits, _, err := rt.Search("lighthouses", &cacheblend.SearchOptions{K: 10, Mode: cacheblend.SearchBM25, Collection: "folder"})
	if err != nil || len(hits) != 4 {
		t.Errorf("search in the folder's collection: %v, %d hits", err, len(hits))
	}

	// Unchanged files are skipped by content hash.
	same := &cacheblend.IngestOptions{Collection: "folder"}
	rep, err = rt.IngestPath(context.Background(), folder, same)
	if err != nil || rep.Added != 0 || rep.Unchanged != 4 {
		t.Errorf("re-ingest: %v, %+v", err, rep)
	}

	for i := 4; i < 8; i++ {
		write("doc"+string(rune('0'+i))+".txt", "Document number "+string(rune('0'+i))+" talks about harbours.\n")
	}
	// A progress callback returning false aborts.
	_, err = rt.IngestPath(context.Background(), folder, &cacheblend.IngestOptions{Collection: "folder",
		Progress: func(p cacheblend.Progress) bool { return p.Phase != "ingest" }})
	if !errors.Is(err, cacheblend.ErrAborted) || errors.Is(err, context.Canceled) {
		t.Errorf("progress abort: %v, want ErrAborted only", err)
	}
	// So does cancelling the context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = rt.IngestPath(ctx, folder, &cacheblend.IngestOptions{Collection: "folder", Progress: func(p cacheblend.Progress) bool {
		if p.Phase == "ingest" {
			cancel()
		}
		return true
	}})
	if !errors.Is(err, cacheblend.ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Errorf("context cancel: %v, want ErrAborted and context.Canceled", err)
	}
	// A re-run finishes the job; nothing was lost or duplicated.
	rep, err = rt.IngestPath(context.Background(), folder, same)
	if err != nil || rep.Added+rep.Unchanged != 8 || rep.Unchanged < 4 {
		t.Errorf("final ingest: %v, %+v", err, rep)
	}
	hits, _, err = rt.Search("Document number", &cacheblend.SearchOptions{K: 20, Mode: cacheblend.SearchBM25, URIPrefix: folder})
	if err != nil || len(hits) != 8 {
		t.Errorf("after the aborts: %v, %d hits, want 8", err, len(hits))
	}
}

func TestAskStreamsIntoWriterWithCitations(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, nil)
	var buf bytes.Buffer
	var pieces []string
	opts := &cacheblend.AskOptions{K: 2, MaxTokens: 12, TopLogprobs: 3, OnToken: func(p string) bool {
		pieces = append(pieces, p)
		return true
	}}
	ans, err := s.Ask(context.Background(), "Where is Mount Kilimanjaro?", opts, &buf)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if ans.Text == "" || buf.String() != ans.Text || strings.Join(pieces, "") != ans.Text {
		t.Errorf("streamed %q / %q, answer %q", buf.String(), strings.Join(pieces, ""), ans.Text)
	}
	if len(ans.Citations) == 0 || ans.Citations[0].URI != "mem://kilimanjaro" {
		t.Fatalf("citations %+v", ans.Citations)
	}
	st := ans.Stats
	if st.Mode != cacheblend.ModeBlend || st.PromptTokens <= 40 || st.ChunksUsed != len(ans.Citations) ||
		st.ChunksMissed != st.ChunksUsed || st.GeneratedTokens != len(pieces) || st.TTFT <= 0 ||
		(st.StopReason != cacheblend.StopEOG && st.StopReason != cacheblend.StopLength) {
		t.Errorf("stats %+v", st)
	}
	if st.SearchMode == cacheblend.SearchDefault || st.Ctx != 1024 {
		t.Errorf("stats: search mode %v, ctx %d", st.SearchMode, st.Ctx)
	}
	if len(ans.Tokens) != st.GeneratedTokens && !(st.StopReason == cacheblend.StopEOG && len(ans.Tokens) == st.GeneratedTokens-1) {
		t.Errorf("%d token ids for %d generated tokens", len(ans.Tokens), st.GeneratedTokens)
	}
	if len(ans.TopLogprobs) != 3 || ans.TopLogprobs[0].Logprob < ans.TopLogprobs[1].Logprob ||
		len(ans.Tokens) > 0 && ans.TopLogprobs[0].Token != ans.Tokens[0] {
		t.Errorf("top logprobs %+v, tokens %v", ans.TopLogprobs, ans.Tokens)
	}

	// The same question again: every chunk's KV comes from the store; no writer this time.
	ans, err = s.Ask(context.Background(), "Where is Mount Kilimanjaro?", &cacheblend.AskOptions{K: 2, MaxTokens: 12}, nil)
	if err != nil {
		t.Fatalf("second Ask: %v", err)
	}
	st = ans.Stats
	if st.ChunksMissed != 0 || st.ChunksHit != st.ChunksUsed || st.TokensReused <= 0 || st.BytesLoaded == 0 {
		t.Errorf("second ask stats %+v", st)
	}

	// OnToken returning false stops generating.
	calls := 0
	ans, err = s.Ask(context.Background(), "Tell me about sourdough bread.", &cacheblend.AskOptions{K: 2, MaxTokens: 32,
		OnToken: func(string) bool { calls++; return calls < 2 }}, nil)
	if err != nil {
		t.Fatalf("stopped Ask: %v", err)
	}
	if ans.Stats.StopReason != cacheblend.StopEOG && (ans.Stats.StopReason != cacheblend.StopCallback || calls != 2) {
		t.Errorf("stop: reason %v after %d calls", ans.Stats.StopReason, calls)
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestAskReturnsWriterError(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, nil)
	w := &failingWriter{}
	ans, err := s.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 16}, w)
	if err == nil || !strings.Contains(err.Error(), "disk full") || w.n != 1 {
		t.Fatalf("Ask: %v after %d writes, want the writer's error after one", err, w.n)
	}
	if ans == nil || ans.Stats.StopReason != cacheblend.StopCallback {
		t.Errorf("answer %+v, want the partial answer stopped by the callback", ans)
	}
}

func TestPrefillChunksThenGenerate(t *testing.T) {
	rt, _ := openRuntime(t)
	chunks := []string{docs[0].text, docs[1].text, docs[2].text}
	q := "Which river carries the most water?"
	var texts []string
	for _, mode := range []cacheblend.Mode{cacheblend.ModeFull, cacheblend.ModeBlend} {
		s := newSession(t, rt, &cacheblend.SessionOptions{Mode: mode, RecomputeRatio: 1})
		for rep := 0; rep < 2; rep++ {
			st, err := s.PrefillChunks(context.Background(), chunks, q)
			if err != nil {
				t.Fatalf("PrefillChunks: %v", err)
			}
			if mode == cacheblend.ModeBlend && rep == 1 && st.ChunksHit != 3 {
				t.Errorf("second blended prefill: %+v, want 3 chunks hit", st)
			}
			var buf bytes.Buffer
			ans, err := s.Generate(context.Background(), &cacheblend.GenerateOptions{MaxTokens: 10}, &buf)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if ans.Text == "" || buf.String() != ans.Text || len(ans.Citations) != 0 {
				t.Errorf("Generate: %q, streamed %q, %d citations", ans.Text, buf.String(), len(ans.Citations))
			}
			texts = append(texts, ans.Text)
			if _, err := s.Generate(context.Background(), nil, nil); !errors.Is(err, cacheblend.ErrMisuse) {
				t.Errorf("second Generate: %v, want ErrMisuse", err)
			}
		}
	}
	if texts[0] != texts[2] {
		t.Errorf("full %q vs blend at ratio 1 %q", texts[0], texts[2])
	}
}

func TestSessionWithOwnModelAndStore(t *testing.T) {
	path := modelPath(t)
	m, err := cacheblend.LoadModel(path)
	if err != nil {
		t.Fatalf("LoadModel: %v", err)
	}
	if m.NVocab() <= 0 || m.NCtxTrain() <= 0 {
		t.Errorf("n_vocab %d, n_ctx_train %d", m.NVocab(), m.NCtxTrain())
	}
	ids, err := m.Tokenize("Hello world", false, false)
	if err != nil || len(ids) == 0 {
		t.Fatalf("Tokenize: %v, %v", err, ids)
	}
	var text string
	for _, id := range ids {
		piece, err := m.TokenToPiece(id)
		if err != nil {
			t.Fatalf("TokenToPiece(%d): %v", id, err)
		}
		text += piece
	}
	if text != "Hello world" {
		t.Errorf("pieces of %v make %q", ids, text)
	}
	if _, err := m.TokenToPiece(-1); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("TokenToPiece(-1): %v, want ErrInvalidArg", err)
	}
	kv, err := cacheblend.OpenKVStore(filepath.Join(t.TempDir(), "kv"), nil)
	if err != nil {
		t.Fatalf("OpenKVStore: %v", err)
	}
	s, err := cacheblend.SessionWith(m, kv, &cacheblend.SessionOptions{Ctx: 1024, Threads: 2})
	if err != nil {
		t.Fatalf("SessionWith: %v", err)
	}
	defer s.Close()
	// Parents may go first: the session holds its own references.
	m.Close()
	kv.Close()
	if _, err := s.Ask(context.Background(), "Where?", nil, nil); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("Ask without a runtime: %v, want ErrInvalidArg", err)
	}
	if _, err := s.PrefillChunks(context.Background(), []string{docs[1].text}, "How high is Uhuru?"); err != nil {
		t.Fatalf("PrefillChunks: %v", err)
	}
	if ans, err := s.Generate(context.Background(), &cacheblend.GenerateOptions{MaxTokens: 8}, nil); err != nil || ans.Text == "" {
		t.Errorf("Generate: %v", err)
	}
	if _, err := s.PrefillChunks(context.Background(), []string{"   "}, "q?"); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("blank chunk: %v, want ErrInvalidArg", err)
	}
	if _, err := s.PrefillChunks(context.Background(), nil, "q?"); err == nil {
		t.Error("no chunks: want an error")
	}
	if _, err := cacheblend.LoadModel(filepath.Join(t.TempDir(), "missing.gguf")); !errors.Is(err, cacheblend.ErrIO) {
		t.Errorf("LoadModel of a missing file: %v, want ErrIO", err)
	}
}

func TestBadOptionsAreInvalidArg(t *testing.T) {
	rt, _ := openRuntime(t)
	for _, opts := range []*cacheblend.SessionOptions{
		{RecomputeRatio: 2},
		{KVFormat: 9},
		{Ctx: 1 << 30},
	} {
		s, err := rt.NewSession(opts)
		var e *cacheblend.Error
		if !errors.Is(err, cacheblend.ErrInvalidArg) || s != nil || !errors.As(err, &e) || e.Msg == "" {
			t.Errorf("NewSession(%+v): %v, want ErrInvalidArg with a message", opts, err)
		}
	}
	_, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: modelPath(t), DataDir: t.TempDir(), Device: "tpu"})
	if !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("Open on device tpu: %v, want ErrInvalidArg", err)
	}
	// A session's own device: an unknown one is refused by name, "cpu" is always there.
	if s, err := rt.NewSession(&cacheblend.SessionOptions{Device: "tpu:0"}); !errors.Is(err, cacheblend.ErrInvalidArg) || s != nil {
		t.Errorf("NewSession on device tpu:0: %v, want ErrInvalidArg", err)
	}
	if s, err := rt.NewSession(&cacheblend.SessionOptions{Ctx: 256, Threads: 2, Device: "cpu"}); err != nil {
		t.Errorf("NewSession on the CPU: %v", err)
	} else {
		s.Close()
	}
	s, err := rt.NewSession(&cacheblend.SessionOptions{Ctx: 512, Threads: 2})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer s.Close()
	for _, opts := range []*cacheblend.AskOptions{
		{RepeatPenalty: -1},
		{RepeatLastN: -2},
		{Temperature: 0.5, TopP: -1},
	} {
		if _, err := s.Ask(context.Background(), "Where is Kilimanjaro?", opts, nil); !errors.Is(err, cacheblend.ErrInvalidArg) {
			t.Errorf("Ask(%+v): %v, want ErrInvalidArg", opts, err)
		}
	}
}

func TestUseAfterCloseReturnsErrors(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := s.Ask(context.Background(), "Where is the Amazon?", nil, nil)
	if !errors.Is(err, cacheblend.ErrClosed) || !errors.Is(err, cacheblend.ErrMisuse) {
		t.Errorf("Ask after Close: %v, want ErrClosed and ErrMisuse", err)
	}
	if _, err := s.PrefillChunks(context.Background(), []string{"x"}, "q"); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("PrefillChunks after Close: %v", err)
	}
	if _, err := s.Generate(context.Background(), nil, nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Generate after Close: %v", err)
	}
	s.Cancel() // a no-op

	rt.Close()
	rt.Close()
	if _, _, err := rt.Search("river", nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Search after Close: %v", err)
	}
	if _, err := rt.IngestText(context.Background(), "mem://x", "text", nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("IngestText after Close: %v", err)
	}
	if _, err := rt.IngestPath(context.Background(), "/tmp", nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("IngestPath after Close: %v", err)
	}
	if _, err := rt.Delete("mem://x"); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Delete after Close: %v", err)
	}
	if _, err := rt.NewSession(nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("NewSession after Close: %v", err)
	}
	if _, err := rt.Model(); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Model after Close: %v", err)
	}
	if rt.Notice() != "" {
		t.Error("Notice after Close")
	}
	rt.Interrupt() // a no-op

	// Nil and zero handles behave like closed ones.
	var nilRT *cacheblend.Runtime
	if _, _, err := nilRT.Search("x", nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("nil runtime: %v", err)
	}
	var zero cacheblend.Session
	if _, err := zero.Ask(context.Background(), "x", nil, nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("zero session: %v", err)
	}
	if _, err := cacheblend.SessionWith(nil, nil, nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("SessionWith(nil, nil): %v", err)
	}
	var m cacheblend.Model
	if _, err := m.Tokenize("x", false, false); !errors.Is(err, cacheblend.ErrClosed) || m.NVocab() != 0 {
		t.Errorf("zero model: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

func TestContextCancelMidAskAborts(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, &cacheblend.SessionOptions{Mode: cacheblend.ModeFull})

	// Cancelled at the first token: the watcher (and the token callback) cancel the session.
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	ans, err := s.Ask(ctx, "Tell me about sourdough bread.", &cacheblend.AskOptions{K: 2, MaxTokens: 64,
		OnToken: func(string) bool { calls++; cancel(); return true }}, nil)
	if !errors.Is(err, cacheblend.ErrAborted) || !errors.Is(err, context.Canceled) || ans != nil {
		t.Fatalf("Ask: %v (answer %v), want ErrAborted and context.Canceled", err, ans)
	}
	if calls > 2 {
		t.Errorf("%d tokens after the cancel", calls)
	}

	// Cancelled from another goroutine while the call runs (prefill or generation).
	ctx2, cancel2 := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	go func() {
		<-started
		cancel2()
	}()
	_, err = s.Ask(ctx2, "What do we know about rivers and bread?", &cacheblend.AskOptions{K: 3, MaxTokens: 200,
		OnToken: func(string) bool { once.Do(func() { close(started) }); time.Sleep(time.Millisecond); return true }}, nil)
	if !errors.Is(err, cacheblend.ErrAborted) || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Errorf("Ask cancelled from another goroutine: %v", err)
	}

	// An already cancelled context does not start the call.
	if _, err := s.Ask(ctx, "Where is the Amazon?", nil, nil); !errors.Is(err, cacheblend.ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Errorf("Ask with a cancelled context: %v", err)
	}
	if _, err := s.PrefillChunks(ctx, []string{"x"}, "q"); !errors.Is(err, context.Canceled) {
		t.Errorf("PrefillChunks with a cancelled context: %v", err)
	}

	// A deadline works the same way, and the cancel does not leak into the next call.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel3()
	_, err = s.Ask(ctx3, "Tell me about sourdough bread.", &cacheblend.AskOptions{K: 2, MaxTokens: 64,
		OnToken: func(string) bool { time.Sleep(20 * time.Millisecond); return true }}, nil)
	if !errors.Is(err, cacheblend.ErrAborted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ask past its deadline: %v", err)
	}
	ans, err = s.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, nil)
	if err != nil || ans.Text == "" {
		t.Errorf("Ask after the cancels: %v", err)
	}

	// Session.Cancel from a callback aborts too (no context involved).
	_, err = s.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 16,
		OnToken: func(string) bool { s.Cancel(); return true }}, nil)
	if !errors.Is(err, cacheblend.ErrAborted) || errors.Is(err, context.Canceled) {
		t.Errorf("Ask after Cancel: %v, want ErrAborted only", err)
	}
}

func TestConcurrentAskOnOneSessionIsMisuse(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, nil)
	var second, nested error
	done := false
	w := writerFunc(func(p []byte) (int, error) {
		if !done {
			done = true
			// Another goroutine while the first call runs...
			second = askOnAnotherGoroutine(s)
			// ...and the same goroutine, from inside the callback.
			_, nested = s.Ask(context.Background(), "Where is the Amazon?", nil, nil)
		}
		return len(p), nil
	})
	ans, err := s.Ask(context.Background(), "Where is Mount Kilimanjaro?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, w)
	if err != nil || ans.Text == "" {
		t.Fatalf("first Ask: %v", err)
	}
	if !errors.Is(second, cacheblend.ErrMisuse) || errors.Is(second, cacheblend.ErrClosed) {
		t.Errorf("concurrent Ask: %v, want ErrMisuse", second)
	}
	if !errors.Is(nested, cacheblend.ErrMisuse) {
		t.Errorf("nested Ask: %v, want ErrMisuse", nested)
	}
	// The session is free again afterwards.
	if _, err := s.Ask(context.Background(), "Where is Mount Kilimanjaro?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, nil); err != nil {
		t.Errorf("Ask afterwards: %v", err)
	}
}

// A runtime that admits one call and queues none refuses a second one, from another goroutine,
// with ErrBusy at once; the memory budget refuses sessions past it with ErrNoMem.
func TestAdmissionAndMemoryBudget(t *testing.T) {
	rt, _ := openRuntimeWith(t, cacheblend.RuntimeOptions{Threads: 2, MaxActiveRequests: 1,
		MaxQueuedRequests: -1, SessionMemoryBytes: 256 << 20})
	a := newSession(t, rt, nil)
	b := newSession(t, rt, nil)
	var other error
	done := false
	w := writerFunc(func(p []byte) (int, error) {
		if !done {
			done = true
			other = askOnAnotherGoroutine(b)
		}
		return len(p), nil
	})
	if _, err := a.Ask(context.Background(), "Where is Mount Kilimanjaro?",
		&cacheblend.AskOptions{K: 2, MaxTokens: 4}, w); err != nil {
		t.Fatalf("first Ask: %v", err)
	}
	var e *cacheblend.Error
	if !errors.Is(other, cacheblend.ErrBusy) || !errors.As(other, &e) || !strings.Contains(e.Msg, "runtime busy") {
		t.Errorf("Ask while the only slot is taken: %v, want ErrBusy (runtime busy)", other)
	}
	if _, err := b.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, nil); err != nil {
		t.Errorf("Ask once the slot is free: %v", err)
	}
	// An 8192-token session does not fit the 256 MB beside the other two.
	_, err := rt.NewSession(&cacheblend.SessionOptions{Ctx: 8192, Threads: 2})
	if !errors.Is(err, cacheblend.ErrNoMem) || !errors.As(err, &e) || !strings.Contains(e.Msg, "session_memory_bytes") {
		t.Errorf("NewSession past the budget: %v, want ErrNoMem naming session_memory_bytes", err)
	}
}

// askOnAnotherGoroutine asks s from a new goroutine (another OS thread in the library) and
// returns the error once that Ask has returned.
func askOnAnotherGoroutine(s *cacheblend.Session) error {
	ch := make(chan error)
	go func() {
		_, err := s.Ask(context.Background(), "Where is the Amazon?", nil, nil)
		ch <- err
	}()
	return <-ch
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestClosingTheRuntimeBeforeTheSession(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, nil)
	rt.Close()
	ans, err := s.Ask(context.Background(), "Where is Mount Kilimanjaro?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, nil)
	if err != nil || ans.Text == "" || len(ans.Citations) == 0 {
		t.Fatalf("Ask after the runtime's Close: %v", err)
	}
}

func TestCloseDuringAskCancelsAndFreesAfterwards(t *testing.T) {
	rt, _ := openRuntime(t)
	s, err := rt.NewSession(&cacheblend.SessionOptions{Ctx: 1024, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Ask(context.Background(), "Tell me about sourdough bread.", &cacheblend.AskOptions{K: 2, MaxTokens: 32,
		OnToken: func(string) bool { s.Close(); return true }}, nil)
	if !errors.Is(err, cacheblend.ErrAborted) {
		t.Errorf("Ask closed from its callback: %v, want ErrAborted", err)
	}
	if _, err := s.Ask(context.Background(), "x", nil, nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Ask after Close: %v", err)
	}
}

func TestCallbackPanicIsRaisedAfterTheCall(t *testing.T) {
	rt, _ := openRuntime(t)
	s := newSession(t, rt, nil)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		_, _ = s.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 8,
			OnToken: func(string) bool { panic("boom") }}, nil)
		t.Error("no panic")
	}()
	// The session survived and is free.
	if _, err := s.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, nil); err != nil {
		t.Errorf("Ask after the panic: %v", err)
	}
}

func TestConcurrentSearchesAndSessionsShareOneRuntime(t *testing.T) {
	rt, _ := openRuntime(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				hits, _, err := rt.Search("volcano in Tanzania", &cacheblend.SearchOptions{Mode: cacheblend.SearchBM25})
				if err != nil {
					errs <- err
					return
				}
				if len(hits) == 0 || hits[0].URI != "mem://kilimanjaro" {
					errs <- errors.New("wrong first hit")
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := rt.NewSession(&cacheblend.SessionOptions{Ctx: 1024, Threads: 1})
		if err != nil {
			errs <- err
			return
		}
		defer s.Close()
		if _, err := s.Ask(context.Background(), "Where is the Amazon?", &cacheblend.AskOptions{K: 2, MaxTokens: 4}, nil); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLoggerReceivesLibraryWarnings(t *testing.T) {
	var mu sync.Mutex
	var got []string
	cacheblend.SetLogger(func(level cacheblend.LogLevel, msg string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, level.String()+": "+msg)
	})
	defer cacheblend.SetLogger(nil)
	dir := t.TempDir()
	// A damaged index is rebuilt, with a warning.
	if err := os.WriteFile(filepath.Join(dir, "index.sqlite"), bytes.Repeat([]byte("not a database "), 300), 0o600); err != nil {
		t.Fatal(err)
	}
	kv, err := cacheblend.OpenKVStore(dir, &cacheblend.KVStoreOptions{BudgetBytes: 1 << 20})
	if err != nil {
		t.Fatalf("OpenKVStore: %v", err)
	}
	kv.Close()
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, m := range got {
		found = found || strings.HasPrefix(m, "warn: kvstore: index in") && strings.Contains(m, "rebuilding")
	}
	if !found {
		t.Errorf("log messages %q, want the index rebuild warning", got)
	}
}

func TestRuntimeStatsCheckAndKVDeleted(t *testing.T) {
	rt, _ := openRuntime(t)
	st, err := rt.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Documents != int64(len(docs)) || st.Chunks < st.Documents || st.KVEntries != 0 || st.KVBytes != 0 {
		t.Errorf("stats %+v, want %d documents and no KV", st, len(docs))
	}
	if problems, err := rt.Check(); err != nil || problems != nil {
		t.Errorf("Check: %v, problems %q", err, problems)
	}

	// Precomputing fills in every chunk's KV; an update drops the old chunk's KV file (its last
	// reference went) and computes the new one's.
	pre := &cacheblend.IngestOptions{PrecomputeKV: true}
	rep, err := rt.IngestText(context.Background(), "mem://tide", "The tide rises twice a day.", pre)
	if err != nil || rep.Added != 1 || rep.KVComputed != st.Chunks+1 || rep.KVDeleted != 0 {
		t.Fatalf("IngestText with PrecomputeKV: %v, %+v, want KVComputed %d", err, rep, st.Chunks+1)
	}
	if st, err = rt.Stats(); err != nil || st.Documents != 4 || st.KVEntries != st.Chunks || st.KVBytes == 0 {
		t.Errorf("stats after the precompute: %v, %+v, want a KV entry per chunk", err, st)
	}
	rep, err = rt.IngestText(context.Background(), "mem://tide", "The tide falls twice a day, too.", pre)
	if err != nil || rep.Updated != 1 || rep.KVDeleted != 1 || rep.KVComputed != 1 {
		t.Errorf("update: %v, %+v, want Updated, KVDeleted and KVComputed 1", err, rep)
	}
	if after, err := rt.Stats(); err != nil || after.Documents != 4 || after.KVEntries != st.KVEntries {
		t.Errorf("stats after the update: %v, %+v, want %d KV entries", err, after, st.KVEntries)
	}
	if problems, err := rt.Check(); err != nil || len(problems) != 0 {
		t.Errorf("Check after the update: %v, problems %q", err, problems)
	}

	rt.Close()
	if _, err := rt.Stats(); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Stats after Close: %v", err)
	}
	if _, err := rt.Check(); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Check after Close: %v", err)
	}
}

func TestIngestNoticesReachProgress(t *testing.T) {
	model := modelPath(t)
	dir := t.TempDir()
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: model, DataDir: filepath.Join(dir, "data"),
		Threads: 2, NoEmbedder: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rt.Close()
	folder := filepath.Join(dir, "docs")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(folder, "a.txt"), []byte("Lighthouses guide ships.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var notices []cacheblend.Progress
	_, err = rt.IngestPath(context.Background(), folder, &cacheblend.IngestOptions{Progress: func(p cacheblend.Progress) bool {
		if p.Phase == "notice" {
			notices = append(notices, p)
		}
		return true
	}})
	if err != nil {
		t.Fatalf("IngestPath: %v", err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0].Message, "BM25") || notices[0].Done != 1 || notices[0].Total != 1 {
		t.Errorf("notices %+v, want the BM25-only notice", notices)
	}
}

func TestPlainPrefillWithoutAStore(t *testing.T) {
	modelPath(t) // skips without the model
	// LoadModel("") is the library's default, qwen2.5-coder-1.5b, unless CBL_MODEL names the
	// suite's model (scripts/test.sh sets it).
	if os.Getenv("CBL_MODEL") == "" {
		t.Skip("CBL_MODEL is not set: the library's default model is not the suite's")
	}
	m, err := cacheblend.LoadModel("")
	if err != nil {
		t.Fatalf("LoadModel(\"\"): %v", err)
	}
	s, err := cacheblend.SessionWith(m, nil, &cacheblend.SessionOptions{Ctx: 256, Threads: 2})
	if err != nil {
		t.Fatalf("SessionWith(model, nil): %v", err)
	}
	defer s.Close()
	defer m.Close()
	ctx := context.Background()
	if ids := s.PromptTokens(); ids != nil {
		t.Errorf("PromptTokens before any prefill: %v", ids)
	}
	if _, err := s.PrefillChunks(ctx, []string{docs[0].text}, "Which river?"); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("PrefillChunks without a store: %v, want ErrInvalidArg", err)
	}

	const prompt = "The capital of France is"
	st, err := s.PrefillText(ctx, prompt, nil)
	if err != nil {
		t.Fatalf("PrefillText: %v", err)
	}
	ids := s.PromptTokens()
	if st.Mode != cacheblend.ModeFull || st.PromptTokens != int64(len(ids)) || len(ids) < 4 || st.Ctx != 256 {
		t.Errorf("stats %+v for %d prompt ids", st, len(ids))
	}
	if want, err := m.Tokenize(prompt, true, false); err != nil || !equalIDs(ids, want) {
		t.Errorf("prompt ids %v, Tokenize gives %v (%v)", ids, want, err)
	}
	gen := &cacheblend.GenerateOptions{MaxTokens: 8, IgnoreEOG: true}
	var during []int32
	gen.OnToken = func(string) bool {
		during = append(during, s.PromptTokens()...) // busy: nil
		return true
	}
	ans, err := s.Generate(ctx, gen, nil)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if len(ans.Tokens) != 8 || ans.Stats.GeneratedTokens != 8 || ans.Stats.StopReason != cacheblend.StopLength {
		t.Errorf("IgnoreEOG: %d tokens, stats %+v, want exactly 8", len(ans.Tokens), ans.Stats)
	}
	if len(during) != 0 {
		t.Errorf("PromptTokens during Generate: %v, want nil", during)
	}

	// The same ids give the same greedy continuation.
	gen.OnToken = nil
	if _, err := s.PrefillTokens(ctx, ids); err != nil {
		t.Fatalf("PrefillTokens: %v", err)
	}
	again, err := s.Generate(ctx, gen, nil)
	if err != nil || again.Text != ans.Text {
		t.Errorf("from the ids: %q (%v), from the text: %q", again.Text, err, ans.Text)
	}

	// The chat template wraps the text in turns; a system message adds one more.
	if _, err := s.PrefillText(ctx, prompt, &cacheblend.PromptOptions{Chat: true}); err != nil {
		t.Fatalf("chat PrefillText: %v", err)
	}
	chat := s.PromptTokens()
	if _, err := s.PrefillText(ctx, prompt, &cacheblend.PromptOptions{Chat: true, System: "Be brief."}); err != nil {
		t.Fatalf("chat PrefillText with a system message: %v", err)
	}
	system := s.PromptTokens()
	if len(chat) <= len(ids) || len(system) <= len(chat) {
		t.Errorf("prompt lengths: plain %d, chat %d, chat+system %d", len(ids), len(chat), len(system))
	}

	// Sampling filters reach the library: the same seed repeats, a bad top_p is refused.
	sample := &cacheblend.GenerateOptions{MaxTokens: 6, Temperature: 0.9, Seed: 7, TopK: 20, TopP: 0.9, MinP: -1}
	var texts []string
	for i := 0; i < 2; i++ {
		if _, err := s.PrefillTokens(ctx, ids); err != nil {
			t.Fatalf("PrefillTokens: %v", err)
		}
		a, err := s.Generate(ctx, sample, nil)
		if err != nil {
			t.Fatalf("sampled Generate: %v", err)
		}
		texts = append(texts, a.Text)
	}
	if texts[0] != texts[1] {
		t.Errorf("same seed, different samples: %q", texts)
	}
	if _, err := s.PrefillTokens(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Generate(ctx, &cacheblend.GenerateOptions{Temperature: 0.5, TopP: -1}, nil); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("TopP -1: %v, want ErrInvalidArg", err)
	}

	// Repetition penalties reach the library: their window starts in the prompt, so a heavy
	// penalty over the whole context makes greedy pick a token the prompt does not have.
	const pattern = "one two three one two three one two three one two"
	first := func(opts *cacheblend.GenerateOptions) int32 {
		t.Helper()
		if _, err := s.PrefillText(ctx, pattern, nil); err != nil {
			t.Fatalf("PrefillText: %v", err)
		}
		a, err := s.Generate(ctx, opts, nil)
		if err != nil {
			t.Fatalf("Generate(%+v): %v", opts, err)
		}
		if len(a.Tokens) != 1 {
			t.Fatalf("Generate(%+v): %d tokens, want 1", opts, len(a.Tokens))
		}
		return a.Tokens[0]
	}
	plain := first(&cacheblend.GenerateOptions{MaxTokens: 1, IgnoreEOG: true})
	inPrompt := map[int32]bool{}
	for _, id := range s.PromptTokens() {
		inPrompt[id] = true
	}
	if tok := plain; !inPrompt[tok] {
		t.Errorf("plain greedy chose %d, not a prompt token: the premise is gone", tok)
	}
	if tok := first(&cacheblend.GenerateOptions{MaxTokens: 1, IgnoreEOG: true, RepeatPenalty: 50, RepeatLastN: -1}); inPrompt[tok] {
		t.Errorf("RepeatPenalty 50 over the whole context still chose prompt token %d", tok)
	}
	for _, bad := range []*cacheblend.GenerateOptions{{RepeatPenalty: -1}, {RepeatLastN: -2}} {
		if _, err := s.PrefillText(ctx, pattern, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Generate(ctx, bad, nil); !errors.Is(err, cacheblend.ErrInvalidArg) {
			t.Errorf("Generate(%+v): %v, want ErrInvalidArg", bad, err)
		}
	}

	// Bad prompts.
	if _, err := s.PrefillText(ctx, "Hi", &cacheblend.PromptOptions{System: "Be brief."}); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("System without Chat: %v, want ErrInvalidArg", err)
	}
	if _, err := s.PrefillTokens(ctx, nil); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("PrefillTokens(nil): %v, want ErrInvalidArg", err)
	}
	if _, err := s.PrefillTokens(ctx, []int32{1, 1 << 30}); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("PrefillTokens with a bad id: %v, want ErrInvalidArg", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.PrefillText(cancelled, prompt, nil); !errors.Is(err, cacheblend.ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Errorf("PrefillText with a cancelled context: %v", err)
	}

	s.Close()
	if _, err := s.PrefillText(ctx, prompt, nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("PrefillText after Close: %v", err)
	}
	if _, err := s.PrefillTokens(ctx, ids); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("PrefillTokens after Close: %v", err)
	}
	if ids := s.PromptTokens(); ids != nil {
		t.Errorf("PromptTokens after Close: %v", ids)
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// skipReasons ingests folder and returns the report, its error and the "skip" reports by file
// name.
func skipReasons(t *testing.T, rt *cacheblend.Runtime, folder string, opts cacheblend.IngestOptions) (cacheblend.IngestReport, map[string]string) {
	t.Helper()
	why := map[string]string{}
	opts.Progress = func(p cacheblend.Progress) bool {
		if p.Phase == "skip" {
			why[filepath.Base(p.Current)] = p.Message
		}
		return true
	}
	rep, err := rt.IngestPath(context.Background(), folder, &opts)
	if err != nil {
		t.Fatalf("IngestPath %+v: %v", opts, err)
	}
	return rep, why
}

func TestIngestFollowSymlinksAndMaxFileBytes(t *testing.T) {
	rt, dir := openRuntime(t)
	folder := filepath.Join(dir, "linked")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(folder, "real.txt"), []byte("The real document about mangoes.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.txt", filepath.Join(folder, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	// By default a link met in the folder is skipped with a reason.
	rep, why := skipReasons(t, rt, folder, cacheblend.IngestOptions{})
	if rep.Added != 1 || rep.Skipped != 1 || !strings.Contains(why["alias.txt"], "symbolic link") {
		t.Errorf("links not followed: %+v, skips %q, want Added 1, Skipped 1 (alias.txt)", rep, why)
	}
	// Followed, a link inside the folder and its target are one document.
	rep, why = skipReasons(t, rt, folder, cacheblend.IngestOptions{FollowSymlinks: true})
	if rep.Skipped != 0 || rep.FilesSeen != 1 || rep.Added+rep.Unchanged != 1 || len(why) != 0 {
		t.Errorf("links followed: %+v, skips %q, want the one document once", rep, why)
	}
	if st, err := rt.Stats(); err != nil || st.Documents != int64(len(docs))+1 {
		t.Errorf("stats %+v (%v), want %d documents", st, err, len(docs)+1)
	}

	// A file over MaxFileBytes is skipped with a reason; the rest go on.
	sized := filepath.Join(dir, "sized")
	if err := os.MkdirAll(sized, 0o755); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("Pelicans fly over the bay in long lines. ", 50) // 2050 bytes
	if err := os.WriteFile(filepath.Join(sized, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sized, "small.txt"), []byte("Herons wade in the shallows.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, why = skipReasons(t, rt, sized, cacheblend.IngestOptions{MaxFileBytes: 1000})
	if rep.Added != 1 || rep.Skipped != 1 || !strings.Contains(why["big.txt"], "too large") {
		t.Errorf("MaxFileBytes 1000: %+v, skips %q, want big.txt skipped as too large", rep, why)
	}
	rep, why = skipReasons(t, rt, sized, cacheblend.IngestOptions{MaxFileBytes: cacheblend.NoFileSizeLimit})
	if rep.Added != 1 || rep.Unchanged != 1 || rep.Skipped != 0 {
		t.Errorf("NoFileSizeLimit: %+v, skips %q, want big.txt added", rep, why)
	}
	// IngestText refuses a text over the limit instead of skipping it.
	_, err := rt.IngestText(context.Background(), "mem://big", big, &cacheblend.IngestOptions{MaxFileBytes: 1000})
	if !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("IngestText over MaxFileBytes: %v, want ErrInvalidArg", err)
	}
	if _, err := rt.IngestText(context.Background(), "mem://big", big, &cacheblend.IngestOptions{MaxFileBytes: -1}); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("MaxFileBytes -1: %v, want ErrInvalidArg", err)
	}
	if cacheblend.DefaultMaxFileBytes != 16<<20 {
		t.Errorf("DefaultMaxFileBytes %d", cacheblend.DefaultMaxFileBytes)
	}
}

func TestAbortedIngestReportsWhatWasCommitted(t *testing.T) {
	rt, dir := openRuntime(t)
	folder := filepath.Join(dir, "docs")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		name := filepath.Join(folder, "doc"+string(rune('0'+i))+".txt")
		if err := os.WriteFile(name, []byte("Document number "+string(rune('0'+i))+" talks about kites.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Stop at the third file: the two before it are committed, and the report says so.
	n := 0
	rep, err := rt.IngestPath(context.Background(), folder, &cacheblend.IngestOptions{Progress: func(p cacheblend.Progress) bool {
		if p.Phase == "ingest" {
			n++
		}
		return n < 3
	}})
	if !errors.Is(err, cacheblend.ErrAborted) {
		t.Fatalf("IngestPath stopped by Progress: %v, want ErrAborted", err)
	}
	st, serr := rt.Stats()
	if serr != nil {
		t.Fatal(serr)
	}
	committed := st.Documents - int64(len(docs))
	if rep.Added == 0 || rep.Added != committed || rep.ChunksAdded < rep.Added {
		t.Errorf("aborted report %+v, want Added %d (the documents committed)", rep, committed)
	}
}

func TestRepairAndDeleteCounted(t *testing.T) {
	rt, _ := openRuntime(t)
	// A fresh data directory has nothing to repair (at most notes, e.g. that chunk KV is left
	// for first use), and Check stays clean after it.
	report, err := rt.Repair(false)
	if err != nil {
		t.Errorf("Repair: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(report, "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "note: ") {
			t.Errorf("Repair on a fresh data directory: %q, want notes only", report)
		}
	}
	if problems, err := rt.Check(); err != nil || problems != nil {
		t.Errorf("Check after Repair: %v, problems %q", err, problems)
	}
	// With precompute, Repair computes the chunk KV that ingest left for first use.
	report, err = rt.Repair(true)
	if err != nil || !strings.Contains(report, "repaired: ") || strings.Contains(report, "not repaired: ") {
		t.Errorf("Repair(true): %v, report %q, want the KV computed", err, report)
	}
	st, err := rt.Stats()
	if err != nil || st.KVEntries != st.Chunks || st.KVEntries == 0 {
		t.Fatalf("stats after Repair(true): %v, %+v, want a KV entry per chunk", err, st)
	}
	if problems, err := rt.Check(); err != nil || problems != nil {
		t.Errorf("Check after Repair(true): %v, problems %q", err, problems)
	}

	// DeleteCounted reports the document, its chunks and the KV files that went with them.
	hits, _, err := rt.Search("volcano", &cacheblend.SearchOptions{K: 10, Mode: cacheblend.SearchBM25, URIPrefix: "mem://kilimanjaro"})
	if err != nil || len(hits) == 0 {
		t.Fatalf("Search: %v, %d hits", err, len(hits))
	}
	rep, err := rt.DeleteCounted("mem://kilimanjaro")
	if err != nil || rep.Removed != 1 || rep.ChunksRemoved != int64(len(hits)) || rep.KVDeleted != int64(len(hits)) ||
		rep.Added != 0 || rep.FilesSeen != 0 {
		t.Errorf("DeleteCounted: %v, %+v, want Removed 1, ChunksRemoved and KVDeleted %d", err, rep, len(hits))
	}
	rep, err = rt.DeleteCounted("mem://kilimanjaro")
	if err != nil || rep != (cacheblend.IngestReport{}) {
		t.Errorf("second DeleteCounted: %v, %+v, want all zero", err, rep)
	}
	if after, err := rt.Stats(); err != nil || after.Documents != st.Documents-1 || after.KVEntries != st.KVEntries-int64(len(hits)) {
		t.Errorf("stats after DeleteCounted: %v, %+v", err, after)
	}

	rt.Close()
	if _, err := rt.Repair(false); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Repair after Close: %v", err)
	}
	if _, err := rt.DeleteCounted("mem://amazon"); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("DeleteCounted after Close: %v", err)
	}
}
