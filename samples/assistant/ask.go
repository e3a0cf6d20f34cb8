package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// askRequest is the body of POST /api/ask.
type askRequest struct {
	Question    string `json:"question"`
	K           int    `json:"k"`          // chunks to retrieve (0 = 4)
	Stream      bool   `json:"stream"`     // answer as server-sent events
	Collection  string `json:"collection"` // only this collection ("" = all)
	MaxTokens   int    `json:"max_tokens"` // 0 = 128
	CompareFull bool   `json:"compare_full"`
}

func (a *askRequest) check() error {
	switch {
	case a.Question == "":
		return errors.New("the question is empty")
	case len(a.Question) > 4000:
		return errors.New("the question is longer than 4000 bytes")
	case a.K < 0 || a.K > maxK:
		return fmt.Errorf("k must be 0 (default) to %d", maxK)
	case a.MaxTokens < 0 || a.MaxTokens > 1024:
		return errors.New("max_tokens must be 0 (default) to 1024")
	}
	return nil
}

// askResponse is the JSON answer (and, in a stream, the "done" event's data).
type askResponse struct {
	Text      string    `json:"text"`
	Citations []hitJSON `json:"citations"`
	Stats     statsJSON `json:"stats"`
}

// handleAsk answers a question from the documents: JSON, or with "stream" an event stream of
// "token" ({"text"}), then "citations" ([...]), "stats" ({...}) and "done" (the whole answer), or
// "error" ({"error"}).
func (s *server) handleAsk(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	var req askRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if err := req.check(); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	sess, err := s.pool.get(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("no session: %v", err))
		return
	}
	defer s.pool.put(sess)
	opts := &cacheblend.AskOptions{K: req.K, Collection: req.Collection, MaxTokens: req.MaxTokens,
		CompareFull: req.CompareFull}
	if !req.Stream {
		ans, err := sess.Ask(r.Context(), req.Question, opts, nil)
		if err != nil {
			writeError(w, libraryStatus(err), err)
			return
		}
		writeJSON(w, http.StatusOK, s.answerJSON(ans))
		return
	}
	s.streamAsk(w, r, sess, req.Question, opts)
}

func (s *server) answerJSON(a *cacheblend.Answer) askResponse {
	return askResponse{Text: a.Text, Citations: s.hitsJSON(a.Citations), Stats: toStatsJSON(a.Stats)}
}

func (s *server) streamAsk(w http.ResponseWriter, r *http.Request, sess *cacheblend.Session, q string,
	opts *cacheblend.AskOptions) {
	ev, err := newEventStream(w)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	tokens := &tokenWriter{ev: ev}
	ans, err := sess.Ask(r.Context(), q, opts, tokens)
	if err != nil {
		ev.send("error", map[string]string{"error": err.Error()})
		return
	}
	tokens.flush()
	resp := s.answerJSON(ans)
	ev.send("citations", resp.Citations)
	ev.send("stats", resp.Stats)
	ev.send("done", resp)
}

// eventStream writes server-sent events, flushing each.
type eventStream struct {
	w http.ResponseWriter
	f http.Flusher
}

func newEventStream(w http.ResponseWriter) (*eventStream, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("this connection cannot stream")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &eventStream{w: w, f: f}, nil
}

// send writes one event whose data is v as JSON (one line: JSON has no raw newlines).
func (e *eventStream) send(event string, v interface{}) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}

// tokenWriter turns the answer's bytes into "token" events. A token may end inside a UTF-8
// sequence; the incomplete tail waits for the next token so no event carries a broken character.
type tokenWriter struct {
	ev   *eventStream
	tail []byte
}

func (t *tokenWriter) Write(p []byte) (int, error) {
	buf := append(t.tail, p...)
	n := completeUTF8(buf)
	t.tail = append([]byte(nil), buf[n:]...)
	if n == 0 {
		return len(p), nil
	}
	if err := t.ev.send("token", map[string]string{"text": string(buf[:n])}); err != nil {
		return 0, err // the client left: the library stops generating
	}
	return len(p), nil
}

// flush sends what is left (an incomplete sequence shows as U+FFFD).
func (t *tokenWriter) flush() {
	if len(t.tail) > 0 {
		t.ev.send("token", map[string]string{"text": string(t.tail)})
		t.tail = nil
	}
}

// completeUTF8 returns the length of b without a trailing incomplete UTF-8 sequence.
func completeUTF8(b []byte) int {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if !utf8.RuneStart(c) {
			continue
		}
		if !utf8.FullRune(b[len(b)-i:]) {
			return len(b) - i
		}
		break
	}
	return len(b)
}
