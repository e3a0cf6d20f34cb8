package cacheblend_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// twoPagePDF writes a PDF by hand (no binary in the repository): one line of text per page.
func twoPagePDF(page1, page2 string) []byte {
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
	return []byte(b.String())
}

// Hits carry the page of a PDF and the heading of an HTML section (cbl_hit's page, heading).
func TestHitsCarryPageAndHeading(t *testing.T) {
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: modelPath(t),
		DataDir: filepath.Join(t.TempDir(), "data"), Threads: 2, NoEmbedder: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rt.Close()
	dir := t.TempDir()
	pdf := filepath.Join(dir, "almanac.pdf")
	if err := os.WriteFile(pdf, twoPagePDF("Spring brings rain.", "Autumn brings the walnut harvest."), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, err := rt.IngestPath(context.Background(), pdf, nil); err != nil || rep.Added != 1 {
		t.Fatalf("IngestPath: %v, %+v", err, rep)
	}
	_, err = rt.IngestText(context.Background(), "mem://tides",
		"<h1>Tides</h1><p>The moon pulls the oceans twice a day.</p>",
		&cacheblend.IngestOptions{Format: cacheblend.DocHTML})
	if err != nil {
		t.Fatalf("IngestText: %v", err)
	}
	bm25 := &cacheblend.SearchOptions{K: 1, Mode: cacheblend.SearchBM25}
	hits, _, err := rt.Search("walnut harvest", bm25)
	if err != nil || len(hits) != 1 || !strings.HasSuffix(hits[0].URI, "almanac.pdf") || hits[0].Page != 2 ||
		hits[0].Heading != "" {
		t.Errorf("PDF hit: %v, %+v, want almanac.pdf on page 2", err, hits)
	}
	hits, _, err = rt.Search("moon oceans", bm25)
	if err != nil || len(hits) != 1 || hits[0].Heading != "Tides" || hits[0].Page != 0 {
		t.Errorf("HTML hit: %v, %+v, want heading Tides, no page", err, hits)
	}
}
