package main

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// httpError is an error with the HTTP status it answers.
type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }

func badRequest(format string, args ...interface{}) error {
	return &httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// checkFileName refuses a client's file name that is not one plain name: uploads are stored
// under that name in the uploads folder, so a separator, "..", NUL or an absolute path could
// write elsewhere. Such names are refused rather than cleaned, so the client learns of it.
func checkFileName(name string) error {
	switch {
	case name == "":
		return badRequest("the upload has no file name")
	case len(name) > 255:
		return badRequest("file name longer than 255 bytes")
	case !utf8.ValidString(name):
		return badRequest("file name is not UTF-8")
	case filepath.IsAbs(name) || strings.ContainsAny(name, `/\`):
		return badRequest("file name %q has a path in it: give the name alone", name)
	case strings.Contains(name, ".."):
		return badRequest("file name %q contains \"..\"", name)
	case strings.HasPrefix(name, "."):
		return badRequest("file name %q starts with a dot", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) { // NUL among them
			return badRequest("file name %q contains a control character", name)
		}
	}
	return nil
}

// checkCollection accepts "" (none) or up to 64 letters, digits, spaces, '_', '.', '-'.
func checkCollection(c string) error {
	if len(c) > 64 {
		return badRequest("collection name longer than 64 bytes")
	}
	for _, r := range c {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" _.-", r) {
			return badRequest("collection %q: use letters, digits, spaces, '_', '.' and '-'", c)
		}
	}
	return nil
}

// upload is what one POST /api/documents carried.
type upload struct {
	collection string
	files      []string // final paths in the uploads folder
}

// receiveUploads streams the multipart body's "file" parts into the uploads folder and reads its
// "collection" field. Files go to temporary names first and are renamed only when the whole
// request was read, so a refused request (too big, bad name) leaves nothing behind.
func (s *server) receiveUploads(w http.ResponseWriter, r *http.Request) (*upload, error) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.maxUpload)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, badRequest("expected a multipart/form-data body: %v", err)
	}
	if err := os.MkdirAll(s.uploads, 0o700); err != nil {
		return nil, err
	}
	up := &upload{}
	var temps, names []string
	defer func() {
		for _, t := range temps {
			os.Remove(t) // renamed ones are gone already
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bodyError(err)
		}
		name, isFile := rawFileName(part)
		switch {
		case part.FormName() == "collection" && !isFile:
			b, err := io.ReadAll(io.LimitReader(part, 256))
			if err != nil {
				return nil, bodyError(err)
			}
			up.collection = strings.TrimSpace(string(b))
		case part.FormName() == "file" && isFile:
			if err := checkFileName(name); err != nil {
				return nil, err
			}
			tmp, err := s.saveTemp(part)
			if tmp != "" {
				temps = append(temps, tmp)
			}
			if err != nil {
				return nil, err
			}
			names = append(names, name)
		}
		part.Close()
	}
	if len(names) == 0 {
		return nil, badRequest("no file in the upload (form field \"file\")")
	}
	if err := checkCollection(up.collection); err != nil {
		return nil, err
	}
	for i, name := range names {
		dst := filepath.Join(s.uploads, name)
		if err := os.Rename(temps[i], dst); err != nil {
			return nil, err
		}
		up.files = append(up.files, dst)
	}
	return up, nil
}

// rawFileName returns the part's filename parameter as the client sent it: Part.FileName applies
// filepath.Base, which would hide a traversal attempt instead of refusing it.
func rawFileName(p *multipart.Part) (string, bool) {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return "", false
	}
	name, ok := params["filename"]
	return name, ok
}

// saveTemp copies one part to a new temporary file in the uploads folder.
func (s *server) saveTemp(src io.Reader) (string, error) {
	f, err := os.CreateTemp(s.uploads, ".upload-*")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f.Name(), bodyError(err)
	}
	return f.Name(), nil
}

// bodyError maps a failure to read the request body: too big is 413, the rest 400.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpError{http.StatusRequestEntityTooLarge,
			fmt.Errorf("upload larger than %d bytes (--max-upload)", tooBig.Limit)}
	}
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		return err // a disk error is the server's: 500
	}
	return badRequest("reading the upload: %v", err)
}

// errorCode is the HTTP status for err: its own for an httpError, else 500.
func errorCode(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.code
	}
	return http.StatusInternalServerError
}
