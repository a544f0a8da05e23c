// Command hello is the tutorial's app: a small HTTP server answering
// /hello with the name of the pod that served it, and /healthz for its
// probes. It is built static, for every board's architecture, into the
// image deploy/examples/hello.yaml runs (deploy/hello/mkimage).
//
//	hello              serve on :$PORT (8080)
//	hello get URL      fetch URL and print the body: the image has no other
//	                   tools, so `kubectl exec POD -- /hello get URL` is how
//	                   one pod reaches another
//
// With DATA_DIR set (a persistent volume), /hello also counts its visits
// in DATA_DIR/visits, which outlive the pod.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		os.Exit(command(os.Args[1:]))
	}
	addr := ":" + envOr("PORT", "8080")
	host, _ := os.Hostname()
	visits := &counter{dir: os.Getenv("DATA_DIR")}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		if visits.dir == "" {
			fmt.Fprintf(w, "hello from %s\n", host)
			return
		}
		n, err := visits.add()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "hello from %s, visit %d\n", host, n)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	slog.Info("hello: serving", "addr", addr, "host", host)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("hello", "err", err)
		os.Exit(1)
	}
	slog.Info("hello: stopped")
}

// command runs `hello get URL` and returns the exit code.
func command(args []string) int {
	if len(args) != 2 || args[0] != "get" {
		fmt.Fprintln(os.Stderr, "usage: hello            serve on :$PORT\n       hello get URL    fetch URL and print the body")
		return 2
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello get:", err)
		return 1
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		fmt.Fprintln(os.Stderr, "hello get:", err)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "hello get:", resp.Status)
		return 1
	}
	return 0
}

// counter is the number of visits, kept in dir/visits.
type counter struct {
	dir string
	mu  sync.Mutex
}

// add counts a visit and returns the count: read, add one, write a new
// file and rename it over the old one, so a crash never leaves it torn.
func (c *counter) add() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	path := filepath.Join(c.dir, "visits")
	n := 0
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return 0, fmt.Errorf("hello: %s holds %q, not a count", path, b)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("hello: %w", err)
	}
	n++
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("hello: %w", err)
	}
	_, err = fmt.Fprintln(f, n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return 0, fmt.Errorf("hello: %w", err)
	}
	return n, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
