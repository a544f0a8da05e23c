package ingress

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// TestDeadEndpointsTimeOut is TestDeadEndpointsRefused with dead
// endpoints that never answer, like pods on boards that lost power:
// connecting to them times out. The endpoints are reached in a network
// namespace of the test, where 10.99.0.0/24 is routed to one end of a
// veth pair whose other end is down, so every packet is dropped (ARP is
// off, so no neighbor lookup fails instead); the live ones listen on its
// loopback.
func TestDeadEndpointsTimeOut(t *testing.T) {
	nstest.RequireRoot(t, "creates a network namespace and a link in it")
	t.Parallel()
	ns := nstest.NS(t, t.TempDir(), "endpoints")
	h := nstest.Handle(t, ns)
	link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "drop0"}, PeerName: "drop1"}
	if err := h.LinkAdd(link); err != nil {
		t.Fatalf("add veth pair: %v", err)
	}
	if err := h.LinkSetARPOff(link); err != nil {
		t.Fatalf("veth drop0: turn ARP off: %v", err)
	}
	nstest.AddrUp(t, h, "drop0", netip.MustParsePrefix("10.99.0.1/24"))
	dial := netns.Dialer(ns)
	dead := []string{"10.99.0.2:8080", "10.99.0.3:8080", "10.99.0.4:8080"}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var timeout net.Error
	if conn, err := dial(ctx, "tcp", dead[0]); !errors.As(err, &timeout) || !timeout.Timeout() {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("dialing a dead endpoint: %v, want a timeout", err)
	}
	live := []string{serveIn(t, ns, "live-0"), serveIn(t, ns, "live-1")}
	testDeadEndpoints(t, live, dead, dial, false)
}

// serveIn starts a backendServer on the loopback of the namespace at path
// and returns its address.
func serveIn(t *testing.T, path, name string) string {
	t.Helper()
	ln := nstest.Listen(t, path, "tcp", "127.0.0.1:0")
	s := httptest.NewUnstartedServer(nameHandler(name))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return ln.Addr().String()
}
