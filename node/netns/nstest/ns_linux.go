package nstest

import (
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/node/netns"
)

// RequireNetfilter skips a test under qemu-user, which does not emulate
// netlink's netfilter protocol (nftables): the native run tests it.
func RequireNetfilter(t testing.TB) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Skip("netlink's netfilter protocol is not there (qemu-user does not emulate it): nftables cannot be tested here")
	}
	if err != nil {
		t.Fatalf("netlink netfilter socket: %v", err)
	}
	unix.Close(fd)
}

// NS makes a network namespace at dir/name with netns.Create and returns
// its path; it is deleted at the end of the test.
func NS(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := netns.Create(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(path); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return path
}

// Handle returns a netlink handle in the namespace at path, closed at the
// end of the test.
func Handle(t testing.TB, path string) *netlink.Handle {
	t.Helper()
	ns := open(t, path)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", path, err)
	}
	t.Cleanup(h.Close)
	return h
}

// NFTables returns a connection to nftables in the namespace at path,
// which it holds open until the end of the test.
func NFTables(t testing.TB, path string) *nftables.Conn {
	t.Helper()
	ns := open(t, path)
	t.Cleanup(func() { ns.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatalf("nftables in %s: %v", path, err)
	}
	return c
}

// open opens the namespace at path for the caller to close.
func open(t testing.TB, path string) vnetns.NsHandle {
	t.Helper()
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open namespace %s: %v", path, err)
	}
	return ns
}

// Veth makes a veth pair: link name in h's namespace, its peer eth0 in
// the namespace at peer. It returns name's link, still down. The pair is
// removed with its namespaces.
func Veth(t testing.TB, h *netlink.Handle, name, peer string) netlink.Link {
	t.Helper()
	ns := open(t, peer)
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s (eth0 in %s): %v", name, peer, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// AddrUp gives the link of h's namespace named link the address p and
// brings it up.
func AddrUp(t testing.TB, h *netlink.Handle, link string, p netip.Prefix) {
	t.Helper()
	l, err := h.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	ipNet := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNet}); err != nil {
		t.Fatalf("address %v on %s: %v", p, link, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatalf("set %s up: %v", link, err)
	}
}
