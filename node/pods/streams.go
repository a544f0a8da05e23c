package pods

import (
	"context"
	"fmt"
	"net"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/stream"
)

// Container finds a container of a pod of this board for the streaming
// server (kubectl logs, exec, attach): its current attempt, and the
// previous one's log.
func (m *Manager) Container(namespace, pod, container string) (stream.ContainerRef, error) {
	ps, _ := m.podNamed(namespace, pod)
	if ps == nil {
		return stream.ContainerRef{}, fmt.Errorf("pod %s/%s is not on this node: %w", namespace, pod, stream.ErrNotFound)
	}
	att := ps.attempts(container, false)
	if len(att) == 0 {
		att = ps.attempts(container, true)
	}
	if len(att) == 0 {
		return stream.ContainerRef{}, fmt.Errorf("container %q in pod %q is waiting to start: %w", container, pod, stream.ErrNotFound)
	}
	cur := att[0]
	ref := stream.ContainerRef{ID: cur.ID, LogPath: m.logPath(namespace, pod, ps.uid, container, attempt(cur))}
	if p := m.pod(ps.uid); p != nil {
		if spec := containerSpecOf(p, container); spec != nil {
			ref.TTY, ref.Stdin, ref.StdinOnce = spec.TTY, spec.Stdin, spec.StdinOnce
		}
	}
	if len(att) > 1 {
		ref.PreviousLogPath = m.logPath(namespace, pod, ps.uid, container, attempt(att[1]))
	}
	id := cur.ID
	ref.Running = func() bool {
		c, err := m.rt.Inspect(context.Background(), id)
		return err == nil && c.State == containers.Running
	}
	return ref, nil
}

// StreamRuntime adapts the runtime to the streaming server.
func StreamRuntime(rt *containers.Runtime) stream.Runtime { return streamRuntime{rt} }

type streamRuntime struct{ rt *containers.Runtime }

func (s streamRuntime) Exec(ctx context.Context, id string, cmd []string, st stream.Streams) (int, error) {
	return s.rt.Exec(ctx, id, cmd, convert(ctx, st))
}

func (s streamRuntime) Attach(ctx context.Context, id string, st stream.Streams) error {
	return s.rt.Attach(ctx, id, convert(ctx, st))
}

// convert carries a session's streams over, terminal sizes included.
func convert(ctx context.Context, st stream.Streams) containers.Streams {
	out := containers.Streams{Stdin: st.Stdin, Stdout: st.Stdout, Stderr: st.Stderr, TTY: st.TTY}
	if st.Resize != nil {
		sizes := make(chan containers.TerminalSize, 1)
		out.Resize = sizes
		go func() {
			defer close(sizes)
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-st.Resize:
					if !ok {
						return
					}
					select {
					case sizes <- containers.TerminalSize{Width: sz.Width, Height: sz.Height}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	return out
}

// Dialer gives the streaming server connections from inside a pod of this
// board, for kubectl port-forward: in its network namespace, or the
// board's own for a pod on the host's network.
func (m *Manager) Dialer(namespace, pod string) (stream.DialFunc, error) {
	ps, netnsPath := m.podNamed(namespace, pod)
	if ps == nil {
		return nil, fmt.Errorf("pod %s/%s is not on this node: %w", namespace, pod, stream.ErrNotFound)
	}
	if p := m.pod(ps.uid); p != nil && p.Spec.HostNetwork {
		var d net.Dialer
		return d.DialContext, nil
	}
	if netnsPath == "" {
		return nil, fmt.Errorf("pod %s/%s has no network yet: %w", namespace, pod, stream.ErrNotFound)
	}
	return netns.Dialer(netnsPath), nil
}

// podNamed is the state of the pod namespace/pod on this board (nil if
// none) and its network namespace then ("" before it has one).
func (m *Manager) podNamed(namespace, pod string) (*podState, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.state {
		if ns, name := s.names(); ns == namespace && name == pod {
			return s, s.netns
		}
	}
	return nil, ""
}
