// Command ask is a minimal Go app on libcacheblend: it ingests a folder and answers a question
// from it with citations, streaming the answer as it is generated.
//
//	ask DATA_DIR FOLDER "QUESTION"
//
// The model comes from $CBL_MODEL or the default location (scripts/fetch-model.sh puts it there).
// Ctrl-C cancels the running ingest or answer.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) != 4 {
		fmt.Fprintf(os.Stderr, "usage: %s DATA_DIR FOLDER QUESTION\n", os.Args[0])
		return 2
	}
	dataDir, folder, question := os.Args[1], os.Args[2], os.Args[3]
	if lib := cacheblend.VersionNumber(); lib/1000000 != cacheblend.HeaderVersionNumber/1000000 {
		fmt.Fprintf(os.Stderr, "header %d but library %s: major versions differ\n",
			cacheblend.HeaderVersionNumber, cacheblend.Version())
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{DataDir: dataDir})
	if err != nil {
		return fail("open", err)
	}
	defer rt.Close()
	if n := rt.Notice(); n != "" {
		fmt.Fprintf(os.Stderr, "note: %s\n", n)
	}

	report, err := rt.IngestPath(ctx, folder, &cacheblend.IngestOptions{
		Progress: func(p cacheblend.Progress) bool {
			if p.Phase == "skip" {
				fmt.Fprintf(os.Stderr, "skipped %s: %s\n", p.Current, p.Message)
			}
			return true
		},
	})
	if err != nil {
		return fail("ingest", err)
	}
	fmt.Fprintf(os.Stderr, "ingested: %d added, %d updated, %d unchanged, %d skipped\n",
		report.Added, report.Updated, report.Unchanged, report.Skipped)

	sess, err := rt.NewSession(nil)
	if err != nil {
		return fail("session", err)
	}
	defer sess.Close()
	rt.Close() // the session keeps what it needs

	answer, err := sess.Ask(ctx, question, &cacheblend.AskOptions{MaxTokens: 64}, os.Stdout)
	if err != nil {
		return fail("ask", err)
	}
	fmt.Printf("\n\ncitations:\n")
	for i, c := range answer.Citations {
		fmt.Printf("[%d] %s:%d-%d\n", i+1, c.URI, c.Start, c.End)
	}
	st := answer.Stats
	fmt.Fprintf(os.Stderr, "TTFT %.1f ms, %d prompt tokens (%d reused, %d recomputed)\n",
		float64(st.TTFT.Microseconds())/1000, st.PromptTokens, st.TokensReused, st.TokensRecomputed)
	return 0
}

func fail(what string, err error) int {
	fmt.Fprintf(os.Stderr, "%s failed: %v\n", what, err)
	return 1
}
