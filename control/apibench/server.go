package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/isle-cluster/isle/raft/benchkit"
)

// server is one `isle server --init` process in the temporary directory.
type server struct {
	dir               string // temporary directory: data/ and server.log
	apiPort, raftPort int
	storeAddr         string // --store-addr: the store's debugging API and /metrics
	cmd               *exec.Cmd
	log               *os.File
	exited            chan struct{}
	waitErr           error
	metrics           *http.Client // plain HTTP to the store address
}

func (s *server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *server) logPath() string { return filepath.Join(s.dir, "server.log") }
func (s *server) apiURL() string  { return "https://127.0.0.1:" + strconv.Itoa(s.apiPort) }

// start runs the server, its output going to server.log, and waits until
// its store answers on --store-addr.
func (s *server) start(ctx context.Context, bin string) error {
	ports, err := benchkit.FreePorts(3)
	if err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	s.apiPort, s.raftPort = ports[0], ports[1]
	s.storeAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	if s.log, err = os.Create(s.logPath()); err != nil {
		return fmt.Errorf("start server: create log: %w", err)
	}
	s.cmd = exec.Command(bin, "server", "--init", "--name", "bench", "--data-dir", s.dataDir(),
		"--address", "127.0.0.1", "--api-port", strconv.Itoa(s.apiPort), "--raft-port", strconv.Itoa(s.raftPort),
		"--store-addr", s.storeAddr)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	// Its own process group, so a terminal's Ctrl-C reaches only us and we
	// stop it; killed with us if we die without teardown.
	s.cmd.SysProcAttr = childAttr()
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	s.metrics = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	slog.Info("server started", "pid", s.cmd.Process.Pid, "api", s.apiURL(), "store", s.storeAddr)
	return s.waitFor(ctx, 30*time.Second, "the store to answer", func(ctx context.Context) error {
		_, err := s.scrape(ctx)
		return err
	})
}

// waitReady waits for /readyz and for namespace default, which the leader
// creates once it is elected.
func (s *server) waitReady(ctx context.Context, api *apiClient) error {
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		err := s.waitFor(ctx, 30*time.Second, path, func(ctx context.Context) error {
			code, body, err := api.get(ctx, path, "application/json")
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("HTTP %d: %.200s", code, body)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	slog.Info("server ready")
	return nil
}

// dead reports an error if the process has exited.
func (s *server) dead() error {
	select {
	case <-s.exited:
		return fmt.Errorf("isle server exited (%v); its log ends:\n%s", s.waitErr, s.tail(15))
	default:
		return nil
	}
}

// waitFor polls cond until it returns nil, the server dies, or d passes.
func (s *server) waitFor(ctx context.Context, d time.Duration, what string, cond func(context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		if err := s.dead(); err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cond(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s: timed out after %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of the server's log.
func (s *server) tail(n int) string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// stopGrace is how long the server may take to stop before it is killed.
const stopGrace = 3 * time.Second

// teardown stops the server, shows its log after a failure, and removes
// the temporary directory unless keep.
func (s *server) teardown(failed, keep bool) {
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(stopGrace):
				_ = s.cmd.Process.Kill()
				<-s.exited
			}
		}
	}
	if s.log != nil {
		s.log.Close()
		if failed {
			fmt.Fprintf(os.Stderr, "--- isle server log (tail) ---\n%s\n", s.tail(15))
		}
	}
	if keep {
		slog.Info("kept the data directory and the server's log", "dir", s.dir)
		return
	}
	if err := os.RemoveAll(s.dir); err != nil {
		slog.Warn("remove temporary directory", "dir", s.dir, "err", err)
	}
}
