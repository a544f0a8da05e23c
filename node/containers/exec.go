package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
)

// TerminalSize is a terminal's size in characters.
type TerminalSize struct{ Width, Height uint16 }

// Streams are the client's ends of an exec or attach session; nil
// streams are not connected.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TerminalSize
}

// ErrTimeout: an ExecSync command outlived its timeout.
var ErrTimeout = errors.New("command timed out")

// Exec runs cmd in a running container (its user, environment, working
// directory and namespaces) with s connected, and returns its exit code.
// Ending ctx kills the command.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, s Streams) (int, error) {
	if len(cmd) == 0 {
		return -1, errors.New("containers: exec: no command")
	}
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return -1, r.notFound("exec", id, err)
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return -1, r.notFound("exec", id, err)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, fmt.Errorf("containers: exec in %s: %w", id, err)
	}
	pspec := *spec.Process
	pspec.Args = cmd
	pspec.Terminal = s.TTY
	execID := "exec-" + NewID()[:12]
	// The shim does not see the end of stdin through the FIFO: when the
	// client's stdin ends, the process's stdin is closed with CloseIO.
	// The process is not started when the copy of a short stdin ends:
	// started orders CloseIO after Start.
	var p containerd.Process
	var stdin io.Reader
	started := make(chan struct{})
	defer func() {
		select {
		case <-started:
		default:
			close(started) // not started: CloseIO will fail, harmlessly
		}
	}()
	if s.Stdin != nil {
		stdin = &eofCloser{r: s.Stdin, close: func() {
			<-started
			if p != nil {
				_ = p.CloseIO(context.WithoutCancel(ctx), containerd.WithStdinCloser)
			}
		}}
	}
	opts := []cio.Opt{cio.WithStreams(stdin, s.Stdout, s.Stderr), cio.WithFIFODir(r.cfg.FIFODir)}
	if s.TTY {
		opts = append(opts, cio.WithTerminal)
	}
	// A context of its own: the process must be deleted even when ctx
	// ends.
	bg := context.WithoutCancel(ctx)
	p, err = t.Exec(bg, execID, &pspec, cio.NewCreator(opts...))
	if err != nil {
		return -1, fmt.Errorf("containers: exec in %s: %w", id, err)
	}
	defer func() { _, _ = p.Delete(bg, containerd.WithProcessKill) }()
	exited, err := p.Wait(bg)
	if err != nil {
		return -1, fmt.Errorf("containers: exec in %s: %w", id, err)
	}
	if err := p.Start(bg); err != nil {
		return -1, fmt.Errorf("containers: exec in %s: %w", id, err)
	}
	close(started)
	for {
		select {
		case sz, ok := <-s.Resize:
			if !ok {
				s.Resize = nil
				continue
			}
			_ = p.Resize(bg, uint32(sz.Width), uint32(sz.Height))
		case <-ctx.Done():
			_ = p.Kill(bg, syscall.SIGKILL)
			<-exited
			p.IO().Cancel()
			return -1, ctx.Err()
		case st := <-exited:
			p.IO().Wait()
			code, _, err := st.Result()
			if err != nil {
				return -1, fmt.Errorf("containers: exec in %s: %w", id, err)
			}
			return int(code), nil
		}
	}
}

// maxExecOutput bounds what ExecSync keeps of a command's output (probes
// show it in events).
const maxExecOutput = 16 << 10

// ExecSync runs cmd in a running container, without stdin, for at most
// timeout, and returns its exit code and (the start of) its combined
// output; ErrTimeout when it ran too long (it is killed).
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &limitedBuffer{max: maxExecOutput}
	code, err := r.Exec(tctx, id, cmd, Streams{Stdout: out, Stderr: out})
	if err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return -1, out.Bytes(), fmt.Errorf("containers: exec %q in %s: %w after %s", cmd, id, ErrTimeout, timeout)
	}
	return code, out.Bytes(), err
}

// Attach connects s to a running container's stdio (kubectl attach)
// until ctx ends or the container exits.
func (r *Runtime) Attach(ctx context.Context, id string, s Streams) error {
	r.mu.Lock()
	st := r.live[id]
	r.mu.Unlock()
	if st == nil {
		return fmt.Errorf("containers: attach %s: %w (or not running)", id, ErrNotFound)
	}
	c, err := r.client.LoadContainer(r.ns(ctx), id)
	if err != nil {
		return r.notFound("attach", id, err)
	}
	t, err := c.Task(r.ns(ctx), nil)
	if err != nil {
		return r.notFound("attach", id, err)
	}
	if s.Resize != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-s.Resize:
					if !ok {
						return
					}
					_ = t.Resize(r.ns(ctx), uint32(sz.Width), uint32(sz.Height))
				}
			}
		}()
	}
	closeIO := func() { _ = t.CloseIO(r.ns(context.WithoutCancel(ctx)), containerd.WithStdinCloser) }
	return st.attach(ctx, s.Stdin, s.Stdout, s.Stderr, closeIO)
}

// limitedBuffer keeps the first max bytes written to it by the two
// output streams.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func removeFIFOs(dir, id string) {
	_ = os.RemoveAll(filepath.Join(dir, id))
}

// eofCloser calls close once, when r ends.
type eofCloser struct {
	r     io.Reader
	close func()
	once  sync.Once
}

func (e *eofCloser) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(e.close)
	}
	return n, err
}
