package cacheblend_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// Ingest a folder and stream an answer with its citations.
func Example() {
	ctx := context.Background()
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{DataDir: "/tmp/cacheblend-example"})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.IngestPath(ctx, "docs", nil); err != nil {
		log.Fatal(err)
	}
	sess, err := rt.NewSession(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	ans, err := sess.Ask(ctx, "What is CacheBlend?", &cacheblend.AskOptions{MaxTokens: 64}, os.Stdout)
	if errors.Is(err, cacheblend.ErrAborted) {
		return // cancelled
	} else if err != nil {
		log.Fatal(err)
	}
	for i, c := range ans.Citations {
		fmt.Printf("[%d] %s:%d-%d\n", i+1, c.URI, c.Start, c.End)
	}
	fmt.Printf("TTFT %v\n", ans.Stats.TTFT)
}

// Continue a chat prompt with a model alone: no runtime, no KV store.
func ExampleSession_PrefillText() {
	ctx := context.Background()
	model, err := cacheblend.LoadModel("") // "" = $CBL_MODEL, else the default model
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	sess, err := cacheblend.SessionWith(model, nil, &cacheblend.SessionOptions{Ctx: 1024})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	_, err = sess.PrefillText(ctx, "Name three rivers.",
		&cacheblend.PromptOptions{Chat: true, System: "Answer in one line."})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sess.Generate(ctx, &cacheblend.GenerateOptions{MaxTokens: 32}, os.Stdout); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\n(%d prompt tokens)\n", len(sess.PromptTokens()))
}
