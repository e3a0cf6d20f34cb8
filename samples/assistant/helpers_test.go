package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// modelPath is the suite's model (SmolLM2): $CBL_MODEL, else the cache; without it the test
// skips, or fails under CBL_REQUIRE_MODEL=1.
func modelPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CBL_MODEL")
	if path == "" {
		path = filepath.Join(os.Getenv("HOME"), ".cache", "cacheblend", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CBL_REQUIRE_MODEL") == "1" {
			t.Fatalf("model missing: %s", path)
		}
		t.Skipf("model missing: %s", path)
	}
	return path
}

// testServer is the assistant over a temporary data dir, served by httptest.
type testServer struct {
	*httptest.Server
	s     *server
	token string
}

// newTestServer starts the assistant; edit changes the config first (nil: the defaults).
func newTestServer(t *testing.T, edit func(*config)) *testServer {
	t.Helper()
	cfg := config{listen: "127.0.0.1:0", dataDir: filepath.Join(t.TempDir(), "data"),
		maxUpload: defaultMaxUpload, sessions: 1, threads: 2, noEmbedder: true}
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: modelPath(t), DataDir: cfg.dataDir,
		Threads: cfg.threads, NoEmbedder: cfg.noEmbedder})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s, err := newServer(cfg, rt)
	if err != nil {
		t.Fatalf("newServer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.jobs.run(ctx); close(done) }()
	ts := &testServer{Server: httptest.NewServer(s), s: s, token: cfg.token}
	t.Cleanup(func() {
		ts.Close()
		cancel()
		<-done
		s.pool.close()
		rt.Close()
	})
	return ts
}

// do sends a request with the server's token (when it has one) and returns the status and body.
func (ts *testServer) do(t *testing.T, method, path, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

type filePart struct{ name, content string }

// multipartBody builds an upload by hand, so that file names reach the server exactly as given.
func multipartBody(collection string, files ...filePart) (string, *bytes.Buffer) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if collection != "" {
		mw.WriteField("collection", collection)
	}
	for _, f := range files {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename="%s"`, f.name)}
		w, _ := mw.CreatePart(h)
		io.WriteString(w, f.content)
	}
	mw.Close()
	return mw.FormDataContentType(), &b
}

// upload posts files and, on 202, waits for the ingest job to end; it returns the status, the
// body and the finished job.
func (ts *testServer) upload(t *testing.T, collection string, files ...filePart) (int, []byte, *job) {
	t.Helper()
	ct, body := multipartBody(collection, files...)
	code, b := ts.do(t, http.MethodPost, "/api/documents", ct, body)
	if code != http.StatusAccepted {
		return code, b, nil
	}
	var resp struct{ Job job }
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("upload response %s: %v", b, err)
	}
	return code, b, ts.waitJob(t, resp.Job.ID)
}

func (ts *testServer) waitJob(t *testing.T, id int64) *job {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		_, b := ts.do(t, http.MethodGet, fmt.Sprintf("/api/jobs?id=%d", id), "", nil)
		var resp struct{ Jobs []job }
		if err := json.Unmarshal(b, &resp); err != nil || len(resp.Jobs) != 1 {
			t.Fatalf("jobs: %s", b)
		}
		if j := resp.Jobs[0]; j.State == "done" || j.State == "failed" {
			return &j
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %d did not finish", id)
	return nil
}

// errorOf returns the "error" member of a JSON error body ("" when there is none).
func errorOf(b []byte) string {
	var e struct{ Error string }
	json.Unmarshal(b, &e)
	return e.Error
}

// twoPagePDF writes a PDF by hand (as the binding's formats_test.go does): one line per page.
func twoPagePDF(page1, page2 string) string {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [4 0 R 6 0 R] /Count 2 >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	for i, text := range []string{page1, page2} {
		content := "BT /F1 12 Tf 72 720 Td (" + text + ") Tj ET\n"
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "+
			"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", len(content), content))
	}
	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.String()
}

// uploadsEntries lists the uploads folder (temporary files included).
func uploadsEntries(t *testing.T, ts *testServer) []string {
	t.Helper()
	ents, err := os.ReadDir(ts.s.uploads)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
