package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// config is what the operator chose on the command line (and CBL_ASSISTANT_TOKEN).
type config struct {
	listen     string // host:port to bind
	token      string // bearer token every /api call must carry ("" = none, loopback only)
	dataDir    string // catalog, index, KV store and uploads/
	docsDir    string // a server-side folder the page may ingest ("" = none)
	model      string // model name or path ("" = $CBL_MODEL, else the library default)
	maxUpload  int64  // bytes of one upload request at most
	sessions   int    // sessions in the pool: answers that may run at once
	threads    int    // compute threads (0 = all cores)
	noEmbedder bool   // BM25 only
}

const defaultMaxUpload = 32 << 20

// flagHelp is parseConfig's error after -h: the usage was printed, nothing is wrong.
var flagHelp = flag.ErrHelp

// parseConfig reads the flags; getenv supplies CBL_ASSISTANT_TOKEN and the XDG variables.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("assistant", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to bind; not loopback requires a token")
	fs.StringVar(&c.token, "token", "", "bearer token for /api (default $CBL_ASSISTANT_TOKEN)")
	fs.StringVar(&c.dataDir, "data", "", "data directory (default ${XDG_DATA_HOME:-~/.local/share}/cacheblend, as the CLI)")
	fs.StringVar(&c.docsDir, "docs", "", "a server-side folder the page can ingest")
	fs.StringVar(&c.model, "model", "", "model name or GGUF path (default $CBL_MODEL, else qwen2.5-coder-1.5b)")
	fs.Int64Var(&c.maxUpload, "max-upload", defaultMaxUpload, "largest upload request in bytes (413 beyond)")
	fs.IntVar(&c.sessions, "sessions", 1, "answers computed at once (each session holds its own context memory)")
	fs.IntVar(&c.threads, "threads", 0, "compute threads (0 = all cores)")
	fs.BoolVar(&c.noEmbedder, "no-embedder", false, "BM25 retrieval only")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, flagHelp
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.token == "" {
		c.token = getenv("CBL_ASSISTANT_TOKEN")
	}
	if c.dataDir == "" {
		c.dataDir = defaultDataDir(getenv)
	}
	return c, c.validate()
}

// validate refuses settings that would expose the corpus or cannot work.
func (c *config) validate() error {
	loop, err := isLoopback(c.listen)
	if err != nil {
		return err
	}
	if !loop && c.token == "" {
		return fmt.Errorf("--listen %s is not a loopback address: set --token or CBL_ASSISTANT_TOKEN", c.listen)
	}
	if c.maxUpload <= 0 {
		return errors.New("--max-upload must be positive")
	}
	if c.sessions < 1 || c.sessions > 16 {
		return errors.New("--sessions must be 1 to 16")
	}
	if c.docsDir != "" {
		abs, err := filepath.Abs(c.docsDir)
		if err != nil {
			return fmt.Errorf("--docs %s: %v", c.docsDir, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return fmt.Errorf("--docs %s: not a folder", c.docsDir)
		}
		c.docsDir = abs
	}
	abs, err := filepath.Abs(c.dataDir)
	if err != nil {
		return fmt.Errorf("--data %s: %v", c.dataDir, err)
	}
	c.dataDir = abs
	return nil
}

// defaultDataDir is the CLI's rule (core/util/xdg-dirs.cpp): $XDG_DATA_HOME, else
// $HOME/.local/share, else /tmp; then "cacheblend".
func defaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "cacheblend")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "cacheblend")
	}
	return "/tmp/cacheblend"
}

// isLoopback tells whether addr (host:port) binds only the loopback interface. An empty host
// (":8080") binds every interface; a name other than localhost is not trusted to be loopback.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--listen %s: %v", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}
