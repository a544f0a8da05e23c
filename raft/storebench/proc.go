package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workspace owns the temporary directory and every process started in it,
// so that one teardown stops them all, on success, failure or Ctrl-C.
type workspace struct {
	dir   string
	mu    sync.Mutex
	procs []*proc
}

func newWorkspace(dir string) *workspace { return &workspace{dir: dir} }

// proc is one member process with its log file.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	waitErr error
}

// start runs bin with args, its output going to NAME.log in the workspace.
func (ws *workspace) start(name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, logPath: filepath.Join(ws.dir, name+".log"), exited: make(chan struct{})}
	f, err := os.Create(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: create log: %w", name, err)
	}
	p.log = f
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = env
	// Its own process group, so a terminal's Ctrl-C reaches only us and we
	// stop the members in order; killed with us if we die without teardown.
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	ws.mu.Lock()
	ws.procs = append(ws.procs, p)
	ws.mu.Unlock()
	slog.Debug("started", "member", name, "pid", p.cmd.Process.Pid, "args", args)
	return p, nil
}

// dead reports an error if the process has exited.
func (p *proc) dead() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); its log ends:\n%s", p.name, p.waitErr, p.tail(15))
	default:
		return nil
	}
}

// stop asks the process to end, then kills it after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// writeBytes is the process's write_bytes from /proc/PID/io: bytes it
// caused to be written to storage, counted when pages are dirtied.
func (p *proc) writeBytes() (uint64, error) {
	if err := p.dead(); err != nil {
		return 0, fmt.Errorf("read io of %s: %w", p.name, err)
	}
	path := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/io"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read io of %s: %w", p.name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read io of %s: %s: %w", p.name, path, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("read io of %s: %s has no write_bytes line", p.name, path)
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// stopGrace is how long a member may take to stop before it is killed:
// the data is thrown away, so there is no point in waiting long.
const stopGrace = 2 * time.Second

// teardown stops every process, shows logs after a failure, and removes
// the directory unless keep.
func (ws *workspace) teardown(failed, keep bool) {
	ws.mu.Lock()
	procs := ws.procs
	ws.procs = nil
	ws.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(stopGrace) }()
	}
	wg.Wait()
	for _, p := range procs {
		p.log.Close()
		if failed {
			fmt.Fprintf(os.Stderr, "--- %s log (tail) ---\n%s\n", p.name, p.tail(10))
		}
	}
	if keep {
		slog.Info("kept data directories and logs", "dir", ws.dir)
		return
	}
	if err := os.RemoveAll(ws.dir); err != nil {
		slog.Warn("remove temporary directory", "dir", ws.dir, "err", err)
	}
}

// waitFor polls cond until it returns nil, the processes die, or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, procs []*proc, cond func(context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		for _, p := range procs {
			if err := p.dead(); err != nil {
				return fmt.Errorf("wait for %s: %w", what, err)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
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
