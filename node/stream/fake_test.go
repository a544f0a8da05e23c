package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// fakePods holds containers by "namespace/pod/container".
type fakePods map[string]ContainerRef

func (f fakePods) Container(namespace, pod, container string) (ContainerRef, error) {
	if pod == "broken" {
		return ContainerRef{}, errors.New("pod manager: store unavailable")
	}
	ref, ok := f[namespace+"/"+pod+"/"+container]
	if !ok {
		return ContainerRef{}, fmt.Errorf("container %q in pod %s/%s: %w", container, namespace, pod, ErrNotFound)
	}
	return ref, nil
}

// Dialer: every pod's localhost is this machine's.
func (f fakePods) Dialer(namespace, pod string) (DialFunc, error) {
	if pod == "broken" {
		return nil, errors.New("pod manager: store unavailable")
	}
	for k := range f {
		if strings.HasPrefix(k, namespace+"/"+pod+"/") {
			var d net.Dialer
			return d.DialContext, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s: %w", namespace, pod, ErrNotFound)
}

// running is a ContainerRef.Running that tests switch.
func running(v bool) func() bool {
	var b atomic.Bool
	b.Store(v)
	return b.Load
}

// fakeRuntime runs a few commands; its Attach greets and echoes stdin.
type fakeRuntime struct {
	mu       sync.Mutex
	sessions []string   // "<op> <container ID> <command> tty=<bool>"
	waited   chan error // the end of each "wait" command
}

func (f *fakeRuntime) sessionLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sessions...)
}

func (f *fakeRuntime) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions = append(f.sessions, s)
}

func (f *fakeRuntime) Exec(ctx context.Context, id string, cmd []string, s Streams) (int, error) {
	f.record(fmt.Sprintf("exec %s %s tty=%v", id, strings.Join(cmd, " "), s.TTY))
	switch cmd[0] {
	case "echo":
		_, err := fmt.Fprintln(s.Stdout, strings.Join(cmd[1:], " "))
		return 0, err
	case "cat": // until the client closes stdin
		_, err := io.Copy(s.Stdout, s.Stdin)
		return 0, err
	case "split":
		if _, err := io.WriteString(s.Stdout, "to stdout\n"); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(s.Stderr, "to stderr\n"); err != nil {
			return 0, err
		}
		return 3, nil
	case "sizes": // the sizes until the last one, then stdin
		for size := range s.Resize {
			fmt.Fprintf(s.Stdout, "size %dx%d\n", size.Width, size.Height)
			if size.Width == lastWidth {
				break
			}
		}
		_, err := io.Copy(s.Stdout, s.Stdin)
		return 0, err
	case "wait": // until the client goes
		<-ctx.Done()
		f.waited <- ctx.Err()
		return 0, ctx.Err()
	}
	return 0, fmt.Errorf("%s: executable file not found in $PATH", cmd[0])
}

const lastWidth = 132

func (f *fakeRuntime) Attach(ctx context.Context, id string, s Streams) error {
	f.record(fmt.Sprintf("attach %s tty=%v", id, s.TTY))
	if _, err := io.WriteString(s.Stdout, "attached\n"); err != nil {
		return err
	}
	if s.Stdin != nil {
		_, err := io.Copy(s.Stdout, s.Stdin)
		return err
	}
	return nil
}
