package main

import (
	"bytes"
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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
	ports, err := benchkit.FreePorts(4)
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
	args := []string{"server", "--init", "--name", "isle-bench", "--data-dir", s.dataDir(),
		"--address", "127.0.0.1", "--api-port", strconv.Itoa(s.apiPort), "--raft-port", strconv.Itoa(s.raftPort),
		"--store-addr", s.storeAddr}
	// Servers that gossip get a free port of their own, so that a demo or
	// another benchmark on the machine is no obstacle.
	if help, _ := exec.CommandContext(ctx, bin, "server", "--help").CombinedOutput(); bytes.Contains(help, []byte("--gossip-port")) {
		args = append(args, "--gossip-port", strconv.Itoa(ports[3]))
	}
	s.cmd = exec.Command(bin, args...)
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

// newClient runs `isle kubeconfig` on the server's data directory and
// builds a client-go clientset from it, unthrottled: the benchmark
// measures the server, not client-side rate limits.
func newClient(ctx context.Context, isle, dataDir, server string) (*kubernetes.Clientset, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, isle, "kubeconfig", "--data-dir", dataDir, "--server", server)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("client: isle kubeconfig: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(out)
	if err != nil {
		return nil, fmt.Errorf("client: kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	cfg.Proxy = nil            // all traffic stays on 127.0.0.1
	cfg.Timeout = time.Minute
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}

// waitReady waits for namespace default, which the leader creates once it
// is elected.
func (s *server) waitReady(ctx context.Context, c *kubernetes.Clientset) error {
	err := s.waitFor(ctx, 30*time.Second, "namespace default", func(ctx context.Context) error {
		_, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err == nil {
		slog.Info("server ready")
	}
	return err
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

// scrape returns the samples of the server's /metrics page.
func (s *server) scrape(ctx context.Context) (map[string]float64, error) {
	return benchkit.Scrape(ctx, s.metrics, "http://"+s.storeAddr+"/metrics")
}

// applied returns the index of the last raft entry the server applied:
// every write to the store is one entry.
func (s *server) applied(ctx context.Context) (float64, error) {
	vals, err := s.scrape(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := vals["isle_raft_applied_index"]
	if !ok {
		return 0, fmt.Errorf("scrape: no isle_raft_applied_index")
	}
	return v, nil
}

// quiet waits until the server has applied no write for a while (the
// trailing Events and status writes of a step), and returns the applied
// index then.
func (s *server) quiet(ctx context.Context, still time.Duration) (float64, error) {
	last, err := s.applied(ctx)
	if err != nil {
		return 0, err
	}
	since := time.Now()
	deadline := time.Now().Add(time.Minute)
	for time.Since(since) < still {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the server did not go quiet within a minute (applied index %v)", last)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		cur, err := s.applied(ctx)
		if err != nil {
			return 0, err
		}
		if cur != last {
			last, since = cur, time.Now()
		}
	}
	return last, nil
}

// attempts returns the scheduler's attempts by result
// (scheduler_schedule_attempts_total).
func (s *server) attempts(ctx context.Context) (map[string]float64, error) {
	vals, err := s.scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for series, v := range vals {
		labels, ok := strings.CutPrefix(series, "scheduler_schedule_attempts_total{")
		if !ok {
			continue
		}
		for l := range strings.SplitSeq(strings.TrimSuffix(labels, "}"), ",") {
			if result, ok := strings.CutPrefix(l, `result="`); ok {
				out[strings.TrimSuffix(result, `"`)] += v
			}
		}
	}
	return out, nil
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
