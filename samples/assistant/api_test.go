package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server bound beyond loopback refuses to start without a token; loopback needs none.
func TestConfigTokenRequiredOffLoopback(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	none := env(nil)
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.168.1.4:80", "[::]:80", "example.com:80"} {
		if _, err := parseConfig([]string{"--listen", addr}, none, io.Discard); err == nil ||
			!strings.Contains(err.Error(), "token") {
			t.Errorf("--listen %s without a token: %v, want a refusal naming the token", addr, err)
		}
		if _, err := parseConfig([]string{"--listen", addr, "--token", "s3cret"}, none, io.Discard); err != nil {
			t.Errorf("--listen %s --token: %v", addr, err)
		}
		c, err := parseConfig([]string{"--listen", addr}, env(map[string]string{"CBL_ASSISTANT_TOKEN": "t"}), io.Discard)
		if err != nil || c.token != "t" {
			t.Errorf("--listen %s with CBL_ASSISTANT_TOKEN: %v, token %q", addr, err, c.token)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8080", "[::1]:9000", "127.0.0.2:1"} {
		if _, err := parseConfig([]string{"--listen", addr}, none, io.Discard); err != nil {
			t.Errorf("--listen %s: %v", addr, err)
		}
	}
	c, err := parseConfig(nil, env(map[string]string{"XDG_DATA_HOME": "/x"}), io.Discard)
	if err != nil || c.listen != "127.0.0.1:8080" || c.dataDir != "/x/cacheblend" {
		t.Errorf("defaults: %v, %+v", err, c)
	}
}

// With a token, every /api call needs "Authorization: Bearer TOKEN"; the page itself does not.
func TestTokenCheckedOnEveryAPICall(t *testing.T) {
	ts := newTestServer(t, func(c *config) { c.listen, c.token = "0.0.0.0:0", "s3cret" })
	paths := []string{"/api/info", "/api/documents", "/api/jobs", "/api/search?q=x", "/api/file?uri=/etc/passwd", "/api/nope"}
	for _, p := range paths {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "s3cret", "Basic s3cret"} {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+p, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			res, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || errorOf(b) == "" {
				t.Errorf("GET %s with %q: %d %s, want 401 with a JSON error", p, auth, res.StatusCode, b)
			}
		}
	}
	if code, b := ts.do(t, http.MethodPost, "/api/ask", "application/json", strings.NewReader(`{}`)); code != http.StatusBadRequest {
		t.Errorf("POST /api/ask with the token: %d %s, want 400 (empty question)", code, b)
	}
	if code, b := ts.do(t, http.MethodGet, "/api/documents", "", nil); code != http.StatusOK {
		t.Errorf("GET /api/documents with the token: %d %s", code, b)
	}
	res, err := http.Get(ts.URL + "/")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("GET / without a token: %v %v, want the page", err, res)
	}
}

// Uploads that are too big, carry no file, are not multipart or have names with a path are
// refused with a JSON error, and leave nothing in (or outside) the uploads folder.
func TestBadUploads(t *testing.T) {
	ts := newTestServer(t, func(c *config) { c.maxUpload = 4096 })
	big := strings.Repeat("x", 8192)
	if code, b, _ := ts.upload(t, "", filePart{"big.txt", big}); code != http.StatusRequestEntityTooLarge || errorOf(b) == "" {
		t.Errorf("8 KiB upload over a 4 KiB limit: %d %s, want 413", code, b)
	}
	ct, body := multipartBody("c")
	if code, b := ts.do(t, http.MethodPost, "/api/documents", ct, body); code != http.StatusBadRequest ||
		!strings.Contains(errorOf(b), "no file") {
		t.Errorf("upload without a file: %d %s, want 400", code, b)
	}
	if code, b := ts.do(t, http.MethodPost, "/api/documents", "text/plain", strings.NewReader("hi")); code != http.StatusBadRequest {
		t.Errorf("upload not multipart: %d %s, want 400", code, b)
	}
	outside := filepath.Join(filepath.Dir(ts.s.uploads), "escaped.txt")
	names := []string{"../escaped.txt", "../../escaped.txt", outside, "sub/escaped.txt", `..\escaped.txt`,
		"..", ".", "", ".hidden", "a\x00b.txt", "a\nb.txt", "x..txt"}
	for _, name := range names {
		code, b, _ := ts.upload(t, "", filePart{name, "text"})
		if code != http.StatusBadRequest || errorOf(b) == "" {
			t.Errorf("upload named %q: %d %s, want 400", name, code, b)
		}
	}
	if code, b, _ := ts.upload(t, "bad/collection", filePart{"ok.txt", "text"}); code != http.StatusBadRequest {
		t.Errorf("collection with a slash: %d %s, want 400", code, b)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("a traversal name wrote %s", outside)
	}
	if left := uploadsEntries(t, ts); len(left) != 0 {
		t.Errorf("refused uploads left files behind: %v", left)
	}
}

// DELETE of a uri not in the catalog is 404; without ?uri= it is 400.
func TestDeleteUnknownDocument(t *testing.T) {
	ts := newTestServer(t, nil)
	if code, b := ts.do(t, http.MethodDelete, "/api/documents?uri=/nowhere/x.txt", "", nil); code != http.StatusNotFound ||
		!strings.Contains(errorOf(b), "/nowhere/x.txt") {
		t.Errorf("DELETE unknown: %d %s, want 404 naming it", code, b)
	}
	if code, b := ts.do(t, http.MethodDelete, "/api/documents", "", nil); code != http.StatusBadRequest {
		t.Errorf("DELETE without uri: %d %s, want 400", code, b)
	}
	if code, b := ts.do(t, http.MethodPut, "/api/documents", "", nil); code != http.StatusMethodNotAllowed || errorOf(b) == "" {
		t.Errorf("PUT: %d %s, want 405", code, b)
	}
}

// The file route serves uploaded originals only: no path outside the uploads folder, no
// "..", no link leading out, no file the catalog does not know; the page's routes serve only
// the embedded page.
func TestNoPathTraversal(t *testing.T) {
	ts := newTestServer(t, nil)
	if code, b, j := ts.upload(t, "", filePart{"notes.txt", "Walnuts ripen in autumn."}); code != http.StatusAccepted || j.State != "done" {
		t.Fatalf("upload: %d %s %+v", code, b, j)
	}
	good := filepath.Join(ts.s.uploads, "notes.txt")
	if code, b := ts.do(t, http.MethodGet, "/api/file?uri="+queryEscape(good), "", nil); code != http.StatusOK ||
		string(b) != "Walnuts ripen in autumn." {
		t.Fatalf("the uploaded file: %d %q", code, b)
	}
	secret := filepath.Join(filepath.Dir(ts.s.uploads), "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Symlink(secret, filepath.Join(ts.s.uploads, "link.txt"))
	// A document of the catalog whose file became a link leading out (e.g. replaced on disk).
	if code, b, j := ts.upload(t, "", filePart{"swapped.txt", "Pears ripen in autumn."}); code != http.StatusAccepted || j.State != "done" {
		t.Fatalf("upload: %d %s %+v", code, b, j)
	}
	swapped := filepath.Join(ts.s.uploads, "swapped.txt")
	if err := os.Remove(swapped); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, swapped); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ts.s.uploads, "stray.txt"), []byte("not ingested"), 0o600)
	uris := []string{
		"/etc/passwd", secret, filepath.Join(ts.s.uploads, "..", "secret.txt"),
		ts.s.uploads + "/../secret.txt", ts.s.uploads + "//notes.txt", "notes.txt", "../secret.txt",
		filepath.Join(ts.s.uploads, "link.txt"), filepath.Join(ts.s.uploads, "stray.txt"), swapped,
		filepath.Join(filepath.Dir(ts.s.uploads), "catalog.db"), ts.s.uploads, "",
	}
	for _, uri := range uris {
		code, b := ts.do(t, http.MethodGet, "/api/file?uri="+queryEscape(uri), "", nil)
		if code != http.StatusNotFound || errorOf(b) == "" { // a JSON error, not a file's bytes
			t.Errorf("GET /api/file?uri=%s: %d %q, want 404", uri, code, b)
		}
	}
	// The page: only the embedded web/ files, whatever the path says.
	for _, p := range []string{"/../main.go", "/%2e%2e/main.go", "/main.go", "/web/app.js", "/..%2fmain.go", "/api/../main.go"} {
		res, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(b), "package main") {
			t.Errorf("GET %s served the source: %d", p, res.StatusCode)
		}
	}
	if code, b := ts.do(t, http.MethodGet, "/app.js", "", nil); code != http.StatusOK || !strings.Contains(string(b), "readEvents") {
		t.Errorf("GET /app.js: %d", code)
	}
	// Deleting an uploaded document removes its copy too.
	if code, b := ts.do(t, http.MethodDelete, "/api/documents?uri="+queryEscape(good), "", nil); code != http.StatusOK {
		t.Errorf("DELETE: %d %s", code, b)
	}
	if _, err := os.Stat(good); !os.IsNotExist(err) {
		t.Errorf("the upload's copy stayed after DELETE: %v", err)
	}
	var list struct{ Documents []docJSON }
	_, b := ts.do(t, http.MethodGet, "/api/documents", "", nil)
	if json.Unmarshal(b, &list); len(list.Documents) != 1 || list.Documents[0].Name != "swapped.txt" {
		t.Errorf("documents after DELETE: %s", b)
	}
}
