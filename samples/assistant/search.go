package main

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

const maxK = 20

// parseK reads k (1..maxK); "" gives def.
func parseK(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 || k > maxK {
		return 0, fmt.Errorf("k must be 1 to %d, not %q", maxK, v)
	}
	return k, nil
}

// handleSearch: GET ?q=&k=&collection= returns {"hits": [...], "mode", "notice"}.
func (s *server) handleSearch(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	q := r.URL.Query()
	if q.Get("q") == "" {
		writeError(w, http.StatusBadRequest, errors.New("give the query as ?q="))
		return
	}
	k, err := parseK(q.Get("k"), 5)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	res, err := s.rt.SearchResults(q.Get("q"), &cacheblend.SearchOptions{K: k, Collection: q.Get("collection")})
	if err != nil {
		writeError(w, libraryStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{
		"hits": s.hitsJSON(res.Hits), "mode": res.Mode.String(), "notice": res.Notice,
	})
}
