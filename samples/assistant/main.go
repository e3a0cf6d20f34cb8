// Command assistant is a document assistant on libcacheblend: one web page to add documents
// (upload, or a server-side folder), watch their ingest, and ask questions whose answers stream in
// with citations, over a small JSON API. See README.md.
//
//	assistant [--listen 127.0.0.1:8080] [--data DIR] [--docs DIR] [--model NAME|PATH] [--token T]
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseConfig(args, os.Getenv, os.Stderr)
	if errors.Is(err, flagHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "assistant: %v\n", err)
		return 2
	}
	rt, err := cacheblend.Open(&cacheblend.RuntimeOptions{ModelPath: cfg.model, DataDir: cfg.dataDir,
		Threads: cfg.threads, NoEmbedder: cfg.noEmbedder})
	if err != nil {
		fmt.Fprintf(os.Stderr, "assistant: %v\n", err)
		return 1
	}
	defer rt.Close()
	if n := rt.Notice(); n != "" {
		log.Printf("note: %s", n)
	}
	srv, err := newServer(cfg, rt)
	if err != nil {
		fmt.Fprintf(os.Stderr, "assistant: %v\n", err)
		return 1
	}
	if err := serve(srv); err != nil {
		fmt.Fprintf(os.Stderr, "assistant: %v\n", err)
		return 1
	}
	return 0
}

// serve listens until SIGINT or SIGTERM, then stops: running answers and ingests are cancelled,
// the handlers get a few seconds to end, and the sessions are freed.
func serve(s *server) error {
	ln, err := net.Listen("tcp", s.cfg.listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	go s.jobs.run(base)
	// The tests read this line for the port of --listen 127.0.0.1:0.
	fmt.Printf("assistant: listening on http://%s/ (data %s)\n", ln.Addr(), s.cfg.dataDir)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Printf("shutting down")
	cancel() // aborts running asks (request contexts) and the running ingest
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	err = hs.Shutdown(sctx)
	s.pool.close()
	return err
}
