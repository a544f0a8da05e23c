package ingress

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/node/netns"
)

// TestDeadEndpointsTimeOut is TestDeadEndpointsRefused with dead
// endpoints that never answer, like pods on boards that lost power:
// connecting to them times out. The endpoints are reached in a network
// namespace of the test, where 10.99.0.0/24 is routed to one end of a
// veth pair whose other end is down, so every packet is dropped (ARP is
// off, so no neighbor lookup fails instead); the live ones listen on its
// loopback.
func TestDeadEndpointsTimeOut(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "" {
			t.Skip("needs root: creates a network namespace and a link in it")
		}
		t.Fatal("needs root: creates a network namespace and a link in it (CI must run as root)")
	}
	t.Parallel()
	ns := filepath.Join(t.TempDir(), "endpoints")
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	h := netlinkIn(t, ns)
	link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "drop0"}, PeerName: "drop1"}
	if err := h.LinkAdd(link); err != nil {
		t.Fatalf("add veth pair: %v", err)
	}
	for _, step := range []struct {
		what string
		err  error
	}{
		{"turn ARP off", h.LinkSetARPOff(link)},
		{"add address", h.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 99, 0, 1), Mask: net.CIDRMask(24, 32)}})},
		{"set up", h.LinkSetUp(link)},
	} {
		if step.err != nil {
			t.Fatalf("veth drop0: %s: %v", step.what, step.err)
		}
	}
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

// netlinkIn returns a netlink handle in the namespace at path, closed at
// the end of the test.
func netlinkIn(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// serveIn starts a backendServer on the loopback of the namespace at path
// and returns its address.
func serveIn(t *testing.T, path, name string) string {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(path, func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(nameHandler(name))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return ln.Addr().String()
}
