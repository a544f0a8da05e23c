package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/cio"
	"github.com/containerd/fifo"
)

// stdio is a container's standard streams as the agent holds them: FIFOs
// in FIFODir/<id>/ that the shim writes (and, with stdin, reads), copied
// by two goroutines with small buffers into the container's log and to
// whoever is attached. The shim keeps its ends open across agent
// restarts, so a restarted agent attaches to the same FIFOs again
// (reattach) without the container noticing.
type stdio struct {
	cfg    cio.Config
	dir    string
	log    LogFile
	out    fanout
	errOut fanout

	stdinMu sync.Mutex
	stdin   io.WriteCloser // nil without stdin
	once    bool           // StdinOnce: close stdin after the first attach

	ctx    context.Context
	cancel context.CancelFunc
	// running counts the copiers that run, and openStdio until it has
	// started them; the last to end closes ended (no goroutine per
	// container waits for them).
	running atomic.Int32
	// readers are the output FIFOs' read ends, closed by detach to stop
	// the copiers.
	readers []io.Closer
	// ended is closed when the output has ended (the container exited, or
	// the stdio was detached).
	ended chan struct{}
}

// copyBufSize is the copy buffer per stream: 50 pods of two streams hold
// 400 KiB.
const copyBufSize = 4 << 10

func fifoConfig(dir, id string, terminal, stdin bool) cio.Config {
	c := cio.Config{Terminal: terminal, Stdout: filepath.Join(dir, id, "stdout")}
	if !terminal {
		c.Stderr = filepath.Join(dir, id, "stderr")
	}
	if stdin {
		c.Stdin = filepath.Join(dir, id, "stdin")
	}
	return c
}

// openStdio opens (creating them if needed) the FIFOs of cfg and starts
// copying the output into log.
func openStdio(cfg cio.Config, log LogFile, stdinOnce bool) (*stdio, error) {
	dir := filepath.Dir(cfg.Stdout)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("containers: stdio: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stdio{cfg: cfg, dir: dir, log: log, once: stdinOnce, ctx: ctx, cancel: cancel, ended: make(chan struct{})}
	s.running.Store(1) // openStdio's own
	if log != nil {
		s.out.base = log.Stream("stdout")
		s.errOut.base = log.Stream("stderr")
	}
	if cfg.Stdin != "" {
		w, err := fifo.OpenFifo(ctx, cfg.Stdin, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o700)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("containers: stdin FIFO: %w", err)
		}
		s.stdin = w
	}
	err := s.copyFrom(cfg.Stdout, &s.out)
	if err == nil && cfg.Stderr != "" {
		err = s.copyFrom(cfg.Stderr, &s.errOut)
	}
	s.copied()
	if err != nil {
		s.detach()
		return nil, err
	}
	return s, nil
}

// copied is called by each copier as it ends, and by openStdio once it
// has started them: the last closes ended.
func (s *stdio) copied() {
	if s.running.Add(-1) == 0 {
		close(s.ended)
	}
}

func (s *stdio) copyFrom(path string, to *fanout) error {
	r, err := fifo.OpenFifo(s.ctx, path, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o700)
	if err != nil {
		return fmt.Errorf("containers: output FIFO: %w", err)
	}
	s.readers = append(s.readers, r)
	s.running.Add(1)
	go func() {
		defer s.copied()
		defer r.Close()
		buf := make([]byte, copyBufSize)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = to.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}

// Config, Cancel, Wait and Close make stdio a cio.IO for containerd.
func (s *stdio) Config() cio.Config { return s.cfg }

// Cancel is called by containerd for a task that failed to start; it
// stops the copying.
func (s *stdio) Cancel() { s.cancel() }

// Wait waits for the output to be copied to its end (the container
// exited and the shim closed its ends).
func (s *stdio) Wait() { <-s.ended }

// Close is a no-op for containerd: the agent ends the stdio itself with
// finish or detach.
func (s *stdio) Close() error { return nil }

// finish waits (at most wait) for the rest of the output of an exited
// container, closes the log and removes the FIFOs.
func (s *stdio) finish(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.ended:
	case <-t.C:
	}
	s.detach()
	_ = os.RemoveAll(s.dir)
}

// detach stops copying and closes the log, leaving the FIFOs for a later
// reattach.
func (s *stdio) detach() {
	s.cancel()
	for _, r := range s.readers {
		_ = r.Close()
	}
	<-s.ended
	s.stdinMu.Lock()
	if s.stdin != nil {
		_ = s.stdin.Close()
		s.stdin = nil
	}
	s.stdinMu.Unlock()
	if s.log != nil {
		_ = s.log.Close()
	}
}

// attach copies the container's output to stdout and stderr (either may
// be nil) and in to its stdin, until ctx ends or the container's output
// ends (it exited). The end of in closes the container's stdin only with
// StdinOnce, as the kubelet does: closeIO tells the shim, which does not
// see the end of a FIFO it holds open itself.
func (s *stdio) attach(ctx context.Context, in io.Reader, stdout, stderr io.Writer, closeIO func()) error {
	if stdout != nil {
		id := s.out.add(stdout)
		defer s.out.remove(id)
	}
	if stderr != nil && !s.cfg.Terminal {
		id := s.errOut.add(stderr)
		defer s.errOut.remove(id)
	}
	if in != nil {
		s.stdinMu.Lock()
		w := s.stdin
		s.stdinMu.Unlock()
		if w == nil {
			return errors.New("containers: attach: the container has no stdin (spec.containers[].stdin is false) or it was closed")
		}
		go func() {
			_, _ = io.Copy(w, in)
			if s.once {
				s.stdinMu.Lock()
				if s.stdin != nil {
					_ = s.stdin.Close()
					s.stdin = nil
				}
				s.stdinMu.Unlock()
				closeIO()
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-s.ended:
	}
	return nil
}

// fanout writes a stream to its log and to the attached clients; a
// client that fails to take a write is dropped, never the container held.
type fanout struct {
	base io.Writer
	mu   sync.Mutex
	subs map[int]io.Writer
	next int
}

func (f *fanout) Write(p []byte) (int, error) {
	if f.base != nil {
		_, _ = f.base.Write(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, w := range f.subs {
		if _, err := w.Write(p); err != nil {
			delete(f.subs, id)
		}
	}
	return len(p), nil
}

func (f *fanout) add(w io.Writer) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[int]io.Writer{}
	}
	f.next++
	f.subs[f.next] = w
	return f.next
}

func (f *fanout) remove(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, id)
}
