package main

import (
	"strings"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// hitJSON is a search hit or a citation as the API returns it.
type hitJSON struct {
	URI     string  `json:"uri"`
	Name    string  `json:"name"`           // the file name, for display
	Page    int     `json:"page,omitempty"` // 1-based page of a PDF
	Heading string  `json:"heading,omitempty"`
	Start   int64   `json:"start"`
	End     int64   `json:"end"`
	Score   float64 `json:"score"`
	Text    string  `json:"text"`           // the chunk: the passage a citation opens
	File    string  `json:"file,omitempty"` // GET this (with the token) for the original, when it was uploaded
}

func (s *server) hitsJSON(hits []cacheblend.Hit) []hitJSON {
	out := make([]hitJSON, 0, len(hits))
	for _, h := range hits {
		j := hitJSON{URI: h.URI, Name: baseName(h.URI), Page: h.Page, Heading: h.Heading,
			Start: h.Start, End: h.End, Score: h.Score, Text: h.Text}
		if _, err := s.servablePath(h.URI); err == nil {
			j.File = "/api/file?uri=" + queryEscape(h.URI)
		}
		out = append(out, j)
	}
	return out
}

// statsJSON is an answer's statistics; full_ttft_ms is set when the ask asked for the comparison.
type statsJSON struct {
	Mode             string  `json:"mode"`
	SearchMode       string  `json:"search_mode"`
	TTFTMs           float64 `json:"ttft_ms"`
	FullTTFTMs       float64 `json:"full_ttft_ms,omitempty"`
	SearchMs         float64 `json:"search_ms"`
	PromptTokens     int64   `json:"prompt_tokens"`
	TokensReused     int64   `json:"tokens_reused"`
	TokensRecomputed int64   `json:"tokens_recomputed"`
	ChunksHit        int     `json:"chunks_hit"`
	ChunksMissed     int     `json:"chunks_missed"`
	GeneratedTokens  int     `json:"generated_tokens"`
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
	StopReason       string  `json:"stop_reason"`
	Notice           string  `json:"notice,omitempty"`
}

func toStatsJSON(st cacheblend.Stats) statsJSON {
	ms := func(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }
	return statsJSON{
		Mode: st.Mode.String(), SearchMode: st.SearchMode.String(),
		TTFTMs: ms(st.TTFT), FullTTFTMs: ms(st.FullTTFT), SearchMs: ms(st.Search),
		PromptTokens: st.PromptTokens, TokensReused: st.TokensReused, TokensRecomputed: st.TokensRecomputed,
		ChunksHit: st.ChunksHit, ChunksMissed: st.ChunksMissed, GeneratedTokens: st.GeneratedTokens,
		DecodeTokensPerS: st.DecodeTokensPerS, StopReason: st.StopReason.String(), Notice: st.Notice,
	}
}

func baseName(uri string) string {
	if i := strings.LastIndexByte(uri, '/'); i >= 0 && i+1 < len(uri) {
		return uri[i+1:]
	}
	return uri
}
