package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// Upload a PDF and a text file, search (the PDF's page 2 first), ask (JSON and streamed), with
// collections; then a document uploaded after the first answer is found by the next one.
func TestSearchAndAsk(t *testing.T) {
	ts := newTestServer(t, nil)
	pdf := twoPagePDF("Spring brings rain to the valley.", "Autumn brings the walnut harvest to Castelmoro.")
	code, b, j := ts.upload(t, "farm", filePart{"almanac.pdf", pdf}, filePart{"tides.txt", "The moon pulls the oceans twice a day."})
	if code != http.StatusAccepted || j.State != "done" || j.Report.Added != 2 {
		t.Fatalf("upload: %d %s %+v", code, b, j)
	}
	var docs struct{ Documents []docJSON }
	_, b = ts.do(t, http.MethodGet, "/api/documents?collection=farm", "", nil)
	if json.Unmarshal(b, &docs); len(docs.Documents) != 2 || docs.Documents[0].Name != "almanac.pdf" ||
		docs.Documents[0].Collection != "farm" || docs.Documents[0].File == "" {
		t.Errorf("documents: %s", b)
	}
	var sr struct {
		Hits []hitJSON
		Mode string
	}
	code, b = ts.do(t, http.MethodGet, "/api/search?q=walnut+harvest&k=2", "", nil)
	if json.Unmarshal(b, &sr); code != http.StatusOK || len(sr.Hits) == 0 || sr.Hits[0].Name != "almanac.pdf" ||
		sr.Hits[0].Page != 2 || !strings.Contains(sr.Hits[0].Text, "walnut") {
		t.Errorf("search: %d %s, want almanac.pdf page 2 first", code, b)
	}
	for _, q := range []string{"/api/search", "/api/search?q=x&k=0", "/api/search?q=x&k=abc", "/api/search?q=x&k=99"} {
		if code, b := ts.do(t, http.MethodGet, q, "", nil); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", q, code, b)
		}
	}

	var ans askResponse
	code, b = ts.do(t, http.MethodPost, "/api/ask", "application/json",
		strings.NewReader(`{"question":"When is the walnut harvest in Castelmoro?","k":2,"max_tokens":8,"compare_full":true}`))
	if json.Unmarshal(b, &ans); code != http.StatusOK || ans.Text == "" || len(ans.Citations) == 0 ||
		ans.Citations[0].Page != 2 || ans.Stats.TTFTMs <= 0 || ans.Stats.FullTTFTMs <= 0 || ans.Stats.GeneratedTokens == 0 {
		t.Errorf("ask: %d %s", code, b)
	}
	code, b = ts.do(t, http.MethodPost, "/api/ask", "application/json",
		strings.NewReader(`{"question":"walnut harvest","collection":"other","max_tokens":4}`))
	if code != http.StatusBadRequest || errorOf(b) == "" {
		t.Errorf("ask in an empty collection: %d %s, want 400", code, b)
	}
	for _, body := range []string{`{"question":""}`, `{"question":"x","k":-1}`, `not json`, `{"question":"x","bogus":1}`} {
		if code, b := ts.do(t, http.MethodPost, "/api/ask", "application/json", strings.NewReader(body)); code != http.StatusBadRequest {
			t.Errorf("ask %s: %d %s, want 400", body, code, b)
		}
	}

	events := askStream(t, ts, `{"question":"What pulls the oceans?","k":1,"max_tokens":8,"stream":true}`)
	var text strings.Builder
	order := []string{}
	for _, e := range events {
		if e.name == "token" {
			var tok struct{ Text string }
			json.Unmarshal([]byte(e.data), &tok)
			text.WriteString(tok.Text)
		}
		if len(order) == 0 || order[len(order)-1] != e.name {
			order = append(order, e.name)
		}
	}
	if strings.Join(order, ",") != "token,citations,stats,done" {
		t.Fatalf("stream events %v, want token..., citations, stats, done", order)
	}
	var done askResponse
	json.Unmarshal([]byte(events[len(events)-1].data), &done)
	if done.Text == "" || done.Text != text.String() || len(done.Citations) != 1 || done.Citations[0].Name != "tides.txt" {
		t.Errorf("streamed %q, done %+v", text.String(), done)
	}

	// The pooled session answers from documents added after it was made.
	if code, b, j := ts.upload(t, "", filePart{"bees.md", "# Bees\n\nHoneybees dance to show where the clover grows."}); code != http.StatusAccepted || j.State != "done" {
		t.Fatalf("second upload: %d %s", code, b)
	}
	code, b = ts.do(t, http.MethodPost, "/api/ask", "application/json",
		strings.NewReader(`{"question":"Why do honeybees dance?","k":1,"max_tokens":4}`))
	if json.Unmarshal(b, &ans); code != http.StatusOK || len(ans.Citations) != 1 ||
		ans.Citations[0].URI != filepath.Join(ts.s.uploads, "bees.md") {
		t.Errorf("ask after a new upload: %d %s", code, b)
	}
}

type event struct{ name, data string }

// askStream posts a streaming ask and reads its server-sent events.
func askStream(t *testing.T, ts *testServer, body string) []event {
	t.Helper()
	res, err := ts.Client().Post(ts.URL+"/api/ask", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, ct)
	}
	var out []event
	var cur event
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		case line == "":
			out = append(out, cur)
			cur = event{}
		}
	}
	return out
}

// A token that ends inside a UTF-8 sequence waits for the rest: no event carries half a character.
func TestCompleteUTF8(t *testing.T) {
	s := "aé€😀"
	boundaries := map[int]bool{}
	for i := range s {
		boundaries[i] = true
	}
	for i := 0; i <= len(s); i++ {
		want := i // the longest prefix of s[:i] made of whole characters
		for !boundaries[want] && want < len(s) {
			want--
		}
		if n := completeUTF8([]byte(s[:i])); n != want {
			t.Errorf("completeUTF8(%q) = %d, want %d", s[:i], n, want)
		}
	}
	if n := completeUTF8([]byte("a\x80")); n != 2 {
		t.Errorf("a stray continuation byte is passed on: %d, want 2", n)
	}
}
