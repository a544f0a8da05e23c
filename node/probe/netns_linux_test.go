package probe

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// TestInNetns probes a server listening on the loopback of a network
// namespace of its own, as a pod's is before its network is set up.
func TestInNetns(t *testing.T) {
	nstest.RequireRoot(t, "creates a network namespace")
	path := nstest.NS(t, t.TempDir(), "pod")
	l := nstest.Listen(t, path, "tcp", "127.0.0.1:0")
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := intstr.FromInt32(int32(l.Addr().(*net.TCPAddr).Port))
	inside := Target{Dial: netns.Dialer(path)}

	if r, msg := Do(t.Context(), httpGet(port, "/healthz"), inside, nil); r != Success {
		t.Errorf("httpGet inside: Do = %v %q; want Success", r, msg)
	}
	if hits.Load() != 1 {
		t.Errorf("the server inside saw %d requests, want 1", hits.Load())
	}
	tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}}
	if r, msg := Do(t.Context(), tcp, inside, nil); r != Success {
		t.Errorf("tcpSocket inside: Do = %v %q; want Success", r, msg)
	}
	// From the agent's namespace the same probe does not reach it.
	Do(t.Context(), httpGet(port, "/healthz"), Target{}, nil)
	if hits.Load() != 1 {
		t.Errorf("a probe from the host's namespace reached the server inside")
	}
}
