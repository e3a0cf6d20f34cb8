package cacheblend_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// Documents lists what a data directory holds, ordered by uri, with the search filters.
func TestDocumentsListsAndFilters(t *testing.T) {
	rt, dir := openRuntime(t)
	folder := filepath.Join(dir, "docs")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(folder, "tide.md")
	if err := os.WriteFile(file, []byte("# Tides\n\nThe tide rises twice a day.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.IngestPath(context.Background(), folder, &cacheblend.IngestOptions{PrecomputeKV: true}); err != nil {
		t.Fatalf("IngestPath: %v", err)
	}
	all, err := rt.Documents(nil)
	if err != nil {
		t.Fatalf("Documents: %v", err)
	}
	if len(all) != len(docs)+1 || all[0].URI != file || all[1].URI != "mem://amazon" {
		t.Fatalf("Documents: %+v, want the file first, then the mem:// documents by uri", all)
	}
	f := all[0]
	if f.Kind != "markdown" || f.Chunks < 1 || f.KVChunks != f.Chunks || f.SourceBytes == 0 ||
		time.Since(f.Modified) > time.Hour || !strings.Contains(f.MetadataJSON, `"kind"`) {
		t.Errorf("file document %+v", f)
	}
	if m := all[1]; m.Collection != "facts" || m.Kind != "" || m.Chunks < 1 || !m.Modified.IsZero() {
		t.Errorf("text document %+v", m)
	}
	facts, err := rt.Documents(&cacheblend.DocumentFilter{Collection: "facts"})
	if err != nil || len(facts) != len(docs) {
		t.Errorf("Documents(facts): %v, %d documents, want %d", err, len(facts), len(docs))
	}
	md, err := rt.Documents(&cacheblend.DocumentFilter{Metadata: map[string]string{"kind": "markdown"}})
	if err != nil || len(md) != 1 || md[0].URI != file {
		t.Errorf("Documents(kind=markdown): %v, %+v", err, md)
	}
	if _, err := rt.Documents(&cacheblend.DocumentFilter{Metadata: map[string]string{"a b": "x"}}); !errors.Is(err, cacheblend.ErrInvalidArg) {
		t.Errorf("Documents with a bad key: %v, want ErrInvalidArg", err)
	}
	st, err := rt.Stats()
	if err != nil || st.Documents != int64(len(all)) || st.CatalogBytes == 0 || st.KVBudgetBytes != 8<<30 || st.DiskFreeBytes == 0 {
		t.Errorf("Stats: %v, %+v", err, st)
	}
	// Each document's KV bytes add up to the store's (no chunk is shared); every document was
	// ingested by this test, within the last minute.
	var kvBytes int64
	for _, d := range all {
		kvBytes += d.KVBytes
		if time.Since(d.IngestedAt) > time.Minute || time.Until(d.IngestedAt) > time.Second {
			t.Errorf("%s: IngestedAt %v", d.URI, d.IngestedAt)
		}
	}
	if f.KVBytes == 0 || uint64(kvBytes) != st.KVBytes {
		t.Errorf("KVBytes: the file %d, all %d, the store %d", f.KVBytes, kvBytes, st.KVBytes)
	}
	rt.Close()
	if _, err := rt.Documents(nil); !errors.Is(err, cacheblend.ErrClosed) {
		t.Errorf("Documents after Close: %v", err)
	}
}

// A path that cannot be accessed is an error naming it, not a success that skipped one file.
func TestIngestPathOfAMissingPathIsAnIOError(t *testing.T) {
	rt, dir := openRuntime(t)
	missing := filepath.Join(dir, "no-such-folder")
	_, err := rt.IngestPath(context.Background(), missing, nil)
	if !errors.Is(err, cacheblend.ErrIO) || !strings.Contains(err.Error(), missing) {
		t.Errorf("IngestPath(missing): %v, want ErrIO naming %s", err, missing)
	}
}

// MustExist opens an existing data directory only and creates nothing.
func TestMustExistCreatesNothing(t *testing.T) {
	model := modelPath(t)
	typo := filepath.Join(t.TempDir(), "dtaa")
	_, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: model, DataDir: typo, NoEmbedder: true, MustExist: true})
	if !errors.Is(err, cacheblend.ErrIO) || !strings.Contains(err.Error(), "no data directory at "+typo) {
		t.Errorf("Open(MustExist, missing): %v", err)
	}
	if _, serr := os.Lstat(typo); !os.IsNotExist(serr) {
		t.Errorf("Open(MustExist) created %s: %v", typo, serr)
	}
	_, dir := openRuntime(t)
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: model, DataDir: filepath.Join(dir, "data"), NoEmbedder: true, MustExist: true})
	if err != nil {
		t.Fatalf("Open(MustExist, existing): %v", err)
	}
	defer rt.Close()
	if list, err := rt.Documents(nil); err != nil || len(list) != len(docs) {
		t.Errorf("Documents: %v, %d", err, len(list))
	}
}
