package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// docJSON is one document of GET /api/documents.
type docJSON struct {
	URI        string     `json:"uri"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind,omitempty"`
	Collection string     `json:"collection,omitempty"`
	Chunks     int64      `json:"chunks"`
	KVChunks   int64      `json:"kv_chunks"`
	Bytes      int64      `json:"bytes"`
	Modified   *time.Time `json:"modified,omitempty"`
	File       string     `json:"file,omitempty"` // the original, for uploaded documents
}

// handleDocuments: GET lists, POST uploads (multipart: "file" parts, "collection" field) and
// queues their ingest, DELETE ?uri= removes one.
func (s *server) handleDocuments(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodPost, http.MethodDelete) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.listDocuments(w, r)
	case http.MethodPost:
		s.uploadDocuments(w, r)
	case http.MethodDelete:
		s.deleteDocument(w, r)
	}
}

func (s *server) listDocuments(w http.ResponseWriter, r *http.Request) {
	docs, err := s.rt.Documents(&cacheblend.DocumentFilter{Collection: r.URL.Query().Get("collection")})
	if err != nil {
		writeError(w, libraryStatus(err), err)
		return
	}
	out := make([]docJSON, 0, len(docs))
	for _, d := range docs {
		j := docJSON{URI: d.URI, Name: baseName(d.URI), Kind: d.Kind, Collection: d.Collection,
			Chunks: d.Chunks, KVChunks: d.KVChunks, Bytes: d.SourceBytes}
		if !d.Modified.IsZero() {
			m := d.Modified
			j.Modified = &m
		}
		if _, err := s.servablePath(d.URI); err == nil {
			j.File = "/api/file?uri=" + queryEscape(d.URI)
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"documents": out})
}

func (s *server) uploadDocuments(w http.ResponseWriter, r *http.Request) {
	up, err := s.receiveUploads(w, r)
	if err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	s.queue(w, up.files, up.collection)
}

// queue starts an ingest job and answers 202 with it.
func (s *server) queue(w http.ResponseWriter, paths []string, collection string) {
	j, err := s.jobs.submit(paths, collection)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]interface{}{"job": s.jobs.snapshot(j.ID)[0]})
}

func (s *server) deleteDocument(w http.ResponseWriter, r *http.Request) {
	uri := r.URL.Query().Get("uri")
	if uri == "" {
		writeError(w, http.StatusBadRequest, errors.New("give the document as ?uri="))
		return
	}
	file, notUploaded := s.servablePath(uri)
	found, err := s.rt.Delete(uri)
	if err != nil {
		writeError(w, libraryStatus(err), err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, fmt.Errorf("no document %q", uri))
		return
	}
	if notUploaded == nil { // an uploaded file: its copy goes too
		os.Remove(file)
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": uri})
}

// handleFolder (POST {"collection"}) queues an ingest of the --docs folder. The client cannot
// name another folder.
func (s *server) handleFolder(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	if s.cfg.docsDir == "" {
		writeError(w, http.StatusNotFound, errors.New("the server was started without --docs"))
		return
	}
	var req struct {
		Collection string `json:"collection"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if err := checkCollection(req.Collection); err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	s.queue(w, []string{s.cfg.docsDir}, req.Collection)
}

// handleJobs lists the ingest jobs, newest first, or the one given as ?id=.
func (s *server) handleJobs(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	var id int64
	if v := r.URL.Query().Get("id"); v != "" {
		var err error
		if id, err = strconv.ParseInt(v, 10, 64); err != nil || id <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("bad job id %q", v))
			return
		}
	}
	jobs := s.jobs.snapshot(id)
	if id > 0 && len(jobs) == 0 {
		writeError(w, http.StatusNotFound, fmt.Errorf("no job %d", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"jobs": jobs})
}

// handleFile serves the original of an uploaded document (?uri=). Only regular files directly in
// the uploads folder, symbolic links resolved, and known to the catalog are served; the response
// is sandboxed so an uploaded HTML file cannot run script with this origin.
func (s *server) handleFile(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	uri := r.URL.Query().Get("uri")
	path, err := s.servablePath(uri)
	if err == nil && !s.inCatalog(uri) {
		err = errors.New("not a document")
	}
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("no file to serve for %q", uri))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("no file to serve for %q", uri))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		writeError(w, http.StatusNotFound, fmt.Errorf("no file to serve for %q", uri))
		return
	}
	w.Header().Set("Content-Security-Policy", "sandbox")
	if strings.EqualFold(filepath.Ext(path), ".pdf") {
		w.Header().Set("Content-Type", "application/pdf")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", "attachment")
	}
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// servablePath returns uri as a file path when it names a regular file directly in the uploads
// folder, also after resolving symbolic links; anything else (relative, "..", another folder, a
// link leading out) is an error.
func (s *server) servablePath(uri string) (string, error) {
	bad := errors.New("outside the uploads folder")
	if !filepath.IsAbs(uri) || filepath.Clean(uri) != uri || filepath.Dir(uri) != s.uploads ||
		strings.HasPrefix(filepath.Base(uri), ".") {
		return "", bad
	}
	realDir, err := filepath.EvalSymlinks(s.uploads)
	if err != nil {
		return "", bad
	}
	real, err := filepath.EvalSymlinks(uri)
	if err != nil || filepath.Dir(real) != realDir {
		return "", bad
	}
	if st, err := os.Lstat(real); err != nil || !st.Mode().IsRegular() {
		return "", bad
	}
	return real, nil
}

func (s *server) inCatalog(uri string) bool {
	docs, err := s.rt.Documents(&cacheblend.DocumentFilter{URIPrefix: uri})
	if err != nil {
		return false
	}
	for _, d := range docs {
		if d.URI == uri {
			return true
		}
	}
	return false
}

// decodeJSON reads a small JSON request body (64 KiB at most) into v; unknown fields are errors.
func decodeJSON(r *http.Request, v interface{}) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return fmt.Errorf("bad JSON body: %v", err)
	}
	return nil
}

func queryEscape(s string) string { return url.QueryEscape(s) }
