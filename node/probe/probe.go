package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Result is the outcome of a probe.
type Result int

const (
	// Unknown: the probe could not be run (a bad spec, the runtime failed);
	// a Worker throws such results away, as the kubelet does.
	Unknown Result = iota
	// Success: the container passed. A Success with a message is the
	// kubelet's Warning (an HTTP redirect to another host, not followed).
	Success
	// Failure: the container failed the probe.
	Failure
)

// String is the Result's name.
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// maxRead is how much of a response body or a command's output a probe
// keeps (the kubelet's limit).
const maxRead = 10 << 10

// userAgent is sent by HTTP probes that set no User-Agent header.
const userAgent = "kube-probe/1.33"

// Execer runs commands in containers (the container runtime).
type Execer interface {
	// ExecSync runs cmd in the container and waits for it, at most timeout
	// (ctx also ends then). A command still running at the timeout is an
	// error wrapping context.DeadlineExceeded. Implementations should keep
	// at most 10 KiB of output.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (exitCode int, output []byte, err error)
}

// Target is the container a probe checks.
type Target struct {
	// ContainerID is the runtime's ID of the container (for exec probes).
	ContainerID string
	// PodIP is the pod's address, the default host of httpGet and
	// tcpSocket probes and the host of gRPC probes. "": 127.0.0.1, which
	// with a Dial into the pod's network namespace is the pod's loopback.
	PodIP string
	// Dial makes the probes' connections: netns.Dialer of the pod's
	// namespace, or nil (a net.Dialer) for hostNetwork pods.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Ports are the container's ports, to resolve probes' named ports.
	Ports []corev1.ContainerPort
}

// Do runs one attempt of probe p against t, within p.TimeoutSeconds (1 if
// unset). ex runs exec probes; it may be nil if p is not one. The message
// says why a probe failed or could not run.
func Do(ctx context.Context, p *corev1.Probe, t Target, ex Execer) (Result, string) {
	if p == nil {
		return Unknown, "no probe"
	}
	if err := checkHandler(&p.ProbeHandler); err != nil {
		return Unknown, err.Error()
	}
	if t.PodIP != "" {
		if _, err := netip.ParseAddr(t.PodIP); err != nil {
			return Unknown, fmt.Sprintf("pod IP %q: not an IP address", t.PodIP)
		}
	}
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	switch h := p.ProbeHandler; {
	case h.Exec != nil:
		return doExec(ctx, h.Exec, t, ex, timeout)
	case h.HTTPGet != nil:
		return doHTTP(ctx, h.HTTPGet, t, timeout)
	case h.TCPSocket != nil:
		return doTCP(ctx, h.TCPSocket, t, timeout)
	default:
		return doGRPC(ctx, h.GRPC, t, timeout)
	}
}

// checkHandler makes sure h has exactly one action.
func checkHandler(h *corev1.ProbeHandler) error {
	n := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("probe has %d of exec, httpGet, tcpSocket and grpc; want exactly one", n)
	}
	return nil
}

// host is the host a network probe connects to: its own, or the pod's.
func (t Target) host(h string) string {
	switch {
	case h != "":
		return h
	case t.PodIP != "":
		return t.PodIP
	default:
		return "127.0.0.1"
	}
}

// dial is t.Dial, or a plain dialer in the agent's network namespace.
func (t Target) dial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.Dial != nil {
		return t.Dial
	}
	var d net.Dialer
	return d.DialContext
}

// port resolves a probe's port: a number, or the name of one of the
// container's ports (or, as the kubelet allows, a number in a string).
func (t Target) port(p intstr.IntOrString) (int, error) {
	var n int
	switch p.Type {
	case intstr.Int:
		n = int(p.IntVal)
	case intstr.String:
		found := false
		for _, cp := range t.Ports {
			if cp.Name == p.StrVal {
				n, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			var err error
			if n, err = strconv.Atoi(p.StrVal); err != nil {
				return 0, fmt.Errorf("port %q: the container has no port of that name", p.StrVal)
			}
		}
	default:
		return 0, fmt.Errorf("port %v: neither a number nor a name", p)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s: %d is not in 1..65535", p.String(), n)
	}
	return n, nil
}

// truncate cuts b to maxRead bytes.
func truncate(b []byte) []byte {
	if len(b) > maxRead {
		return b[:maxRead]
	}
	return b
}
