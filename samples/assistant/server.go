package main

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

//go:embed web
var webFiles embed.FS

// server holds the one runtime of the process and what the handlers share.
type server struct {
	cfg     config
	rt      *cacheblend.Runtime
	pool    *sessionPool
	jobs    *jobQueue
	uploads string // dataDir/uploads: the only folder files are served from
	mux     *http.ServeMux
}

func newServer(cfg config, rt *cacheblend.Runtime) (*server, error) {
	// The uploads folder's real path: document uris are compared with it to decide what may be
	// served, and the library may store uris with links resolved.
	up := filepath.Join(cfg.dataDir, "uploads")
	if err := os.MkdirAll(up, 0o700); err != nil {
		return nil, err
	}
	up, err := filepath.EvalSymlinks(up)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, rt: rt, uploads: up, mux: http.NewServeMux()}
	s.pool = newSessionPool(rt, cfg.sessions, &cacheblend.SessionOptions{Threads: cfg.threads})
	s.jobs = newJobQueue(rt)
	s.routes()
	return s, nil
}

func (s *server) routes() {
	static, _ := fs.Sub(webFiles, "web") // cannot fail: web/ is embedded
	s.mux.Handle("/", http.FileServer(http.FS(static)))
	s.mux.Handle("/api/", s.authorized(http.HandlerFunc(s.notFound)))
	s.mux.Handle("/api/info", s.authorized(http.HandlerFunc(s.handleInfo)))
	s.mux.Handle("/api/documents", s.authorized(http.HandlerFunc(s.handleDocuments)))
	s.mux.Handle("/api/folder", s.authorized(http.HandlerFunc(s.handleFolder)))
	s.mux.Handle("/api/jobs", s.authorized(http.HandlerFunc(s.handleJobs)))
	s.mux.Handle("/api/file", s.authorized(http.HandlerFunc(s.handleFile)))
	s.mux.Handle("/api/search", s.authorized(http.HandlerFunc(s.handleSearch)))
	s.mux.Handle("/api/ask", s.authorized(http.HandlerFunc(s.handleAsk)))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	s.mux.ServeHTTP(w, r)
}

// authorized checks the bearer token, when there is one, in constant time on every /api call.
// The page itself (HTML, JS) holds no data and is served without it.
func (s *server) authorized(h http.Handler) http.Handler {
	if s.cfg.token == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cacheblend assistant"`)
			writeError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, errors.New("no such API: "+r.URL.Path))
}

// handleInfo tells the page what the server offers.
func (s *server) handleInfo(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{
		"version":    cacheblend.Version(),
		"docs_dir":   s.cfg.docsDir,
		"max_upload": s.cfg.maxUpload,
		"notice":     s.rt.Notice(),
	})
}

// allow answers 405 unless r uses one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, errors.New(r.Method+" is not allowed here"))
	return false
}

func writeJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("writing a response: %v", err)
	}
}

// writeError answers {"error": "..."} with code.
func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// libraryStatus maps a library error to an HTTP status: the caller's mistakes are 4xx.
func libraryStatus(err error) int {
	switch {
	case errors.Is(err, cacheblend.ErrInvalidArg), errors.Is(err, cacheblend.ErrRange):
		return http.StatusBadRequest
	case errors.Is(err, cacheblend.ErrAborted), errors.Is(err, cacheblend.ErrBusy):
		return http.StatusServiceUnavailable // busy: the runtime's request queue is full
	}
	return http.StatusInternalServerError
}
