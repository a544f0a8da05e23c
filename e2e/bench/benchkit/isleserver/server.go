// Package isleserver runs one `isle server --init` process for a benchmark,
// on loopback with free ports and its data directory in the benchmark's
// temporary directory; it gives the administrator's client configuration,
// and reads what the benchmark reports of the server: its /metrics and its
// memory.
package isleserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// Server is one `isle server --init` process; Run runs it.
type Server struct {
	// Name is --name, the server's board and Node name; default "isle-bench".
	Name string

	bin         string // the isle binary
	dir         string // temporary directory: data/ and server.log
	apiPort     int
	metricsAddr string // --metrics-addr (--store-addr of older binaries): /metrics
	proc        *benchkit.Proc
	metrics     *http.Client // plain HTTP to metricsAddr
}

// Run runs a benchmark of one server: it probes the environment with the
// isle binary f.Isle, starts the server in a new temporary directory named
// prefix*, calls measure, and always stops the server and removes the
// directory (unless f.Keep). The end of the server's log is shown when
// something failed, but not after Ctrl-C, which is an error of its own.
func (s *Server) Run(ctx context.Context, f benchkit.Flags, prefix string, measure func(context.Context, benchkit.Env) error) (err error) {
	env, err := benchkit.Probe(ctx, f.Isle, prefix)
	if err != nil {
		return err
	}
	s.bin, s.dir = f.Isle, env.Dir
	defer func() {
		if ctx.Err() != nil {
			err = errors.New("interrupted: stopped the server")
		}
		s.teardown(err != nil && ctx.Err() == nil, f.Keep)
	}()
	if err := s.start(ctx); err != nil {
		return err
	}
	return measure(ctx, env)
}

// dataDir is the server's --data-dir.
func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// apiURL is the base URL of the server's Kubernetes API.
func (s *Server) apiURL() string { return "https://127.0.0.1:" + strconv.Itoa(s.apiPort) }

func (s *Server) logPath() string { return filepath.Join(s.dir, "server.log") }

// start runs the server on free loopback ports and waits until it
// answers on its metrics address.
func (s *Server) start(ctx context.Context) error {
	name := s.Name
	if name == "" {
		name = "isle-bench"
	}
	slog.Info("starting isle server", "dir", s.dir)
	ports, err := benchkit.FreePorts(4)
	if err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	s.apiPort = ports[0]
	s.metricsAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	args := []string{"server", "--init", "--name", name, "--data-dir", s.dataDir(),
		"--address", "127.0.0.1", "--api-port", strconv.Itoa(s.apiPort), "--raft-port", strconv.Itoa(ports[1])}
	// A server that gossips gets a free port of its own, so that a demo or
	// another benchmark on the machine is no obstacle; older binaries,
	// benchmarked for comparison, have no gossip, and serve /metrics on
	// their store address.
	help, _ := exec.CommandContext(ctx, s.bin, "server", "--help").CombinedOutput()
	if bytes.Contains(help, []byte("--admin-socket")) {
		args = append(args, "--metrics-addr", s.metricsAddr, "--admin-socket", s.adminSocket())
		if bytes.Contains(help, []byte("--debug")) {
			args = append(args, "--debug") // the live heap (pprof) in Memory
		}
	} else {
		args = append(args, "--store-addr", s.metricsAddr)
	}
	if bytes.Contains(help, []byte("--gossip-port")) {
		args = append(args, "--gossip-port", strconv.Itoa(ports[3]))
	}
	if bytes.Contains(help, []byte("--containerd")) {
		args = append(args, "--containerd", "none", "--run-dir", filepath.Join(s.dataDir(), "run")) // the control plane alone is measured
	}
	if bytes.Contains(help, []byte("--config")) {
		args = append(args, "--config", "") // not the machine's /etc/isle/config.yaml
	}
	if s.proc, err = benchkit.StartProc("isle server", s.logPath(), s.bin, args...); err != nil {
		return err
	}
	s.metrics = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	slog.Info("server started", "pid", s.proc.Pid(), "api", s.apiURL(), "metrics", s.metricsAddr)
	return s.waitFor(ctx, "the store to answer", func(ctx context.Context) error {
		_, err := s.Scrape(ctx)
		return err
	})
}

// WaitReady waits until the API answers /readyz and has namespace default,
// which the leader creates once it is elected. hc must carry the
// administrator's client certificate (see RESTConfig).
func (s *Server) WaitReady(ctx context.Context, hc *http.Client) error {
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		err := s.waitFor(ctx, path, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL()+path, nil)
			if err != nil {
				return err
			}
			req.Header.Set("Accept", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
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

// waitFor waits up to 30 seconds for cond, failing early if the server
// exits.
func (s *Server) waitFor(ctx context.Context, what string, cond func(context.Context) error) error {
	return benchkit.WaitFor(ctx, 30*time.Second, what, []*benchkit.Proc{s.proc}, cond)
}

// Scrape returns the samples of the server's /metrics page.
func (s *Server) Scrape(ctx context.Context) (map[string]float64, error) {
	return benchkit.Scrape(ctx, s.metrics, "http://"+s.metricsAddr+"/metrics")
}

// Memory is the server's memory at one moment, in bytes.
type Memory struct {
	RSS, Peak uint64 // VmRSS and VmHWM (peak RSS) from /proc/PID/status
	HeapInuse uint64 // go_memstats_heap_inuse_bytes from its /metrics
	HeapSys   uint64 // go_memstats_heap_sys_bytes: heap memory obtained from the OS
	// Live is the heap allocated right after a garbage collection (pprof's
	// heap with gc=1, on the admin socket): what the server holds, without
	// the garbage HeapInuse counts. 0 for a binary that does not serve it.
	Live uint64
}

// Memory reads the server's /proc/PID/status and its Go heap metrics.
func (s *Server) Memory(ctx context.Context) (Memory, error) {
	var m Memory
	var err error
	if m.RSS, m.Peak, err = s.proc.Memory(); err != nil {
		return m, fmt.Errorf("read server memory: %w", err)
	}
	vals, err := s.Scrape(ctx)
	if err != nil {
		return m, fmt.Errorf("read server memory: %w", err)
	}
	m.HeapInuse = uint64(vals["go_memstats_heap_inuse_bytes"])
	m.HeapSys = uint64(vals["go_memstats_heap_sys_bytes"])
	m.Live = s.liveHeap(ctx)
	return m, nil
}

func (s *Server) adminSocket() string { return filepath.Join(s.dir, "admin.sock") }

// liveHeap collects the server's garbage and reads its live heap; 0 if
// not served.
func (s *Server) liveHeap(ctx context.Context) uint64 { return LiveHeap(ctx, s.adminSocket()) }

// LiveHeap asks the server of the admin socket (started with --debug) to
// collect its garbage and reads its HeapAlloc from pprof's text heap
// profile: what the server holds. 0 if not served.
func LiveHeap(ctx context.Context, adminSocket string) uint64 {
	body, err := heapProfile(ctx, adminSocket, "1")
	if err != nil {
		return 0
	}
	if m := heapAlloc.FindSubmatch(body); m != nil {
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		return n
	}
	return 0
}

// WriteHeapProfile writes the live heap profile of the server of the
// admin socket (started with --debug), for go tool pprof, to path.
func WriteHeapProfile(ctx context.Context, adminSocket, path string) error {
	body, err := heapProfile(ctx, adminSocket, "0")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}

// heapProfile collects the server's garbage and reads its heap profile
// (debug "1": as text).
func heapProfile(ctx context.Context, adminSocket, debug string) ([]byte, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", adminSocket)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://admin/debug/pprof/heap?gc=1&debug="+debug, nil)
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("heap profile: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	return body, nil
}

var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

// stopGrace is how long the server may take to stop before it is killed.
const stopGrace = 3 * time.Second

// teardown stops the server, shows the end of its log when failed, and
// removes the temporary directory unless keep.
func (s *Server) teardown(failed, keep bool) {
	if s.proc != nil {
		s.proc.Stop(stopGrace)
		if failed {
			fmt.Fprintf(os.Stderr, "--- isle server log (tail) ---\n%s\n", s.proc.Tail(15))
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
