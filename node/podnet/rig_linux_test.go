package podnet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/netns"
)

// The test rig: a LAN (a bridge in a namespace of its own) and boards
// (namespaces with an eth0 on the LAN at 10.99.0.1x/24), each with its
// Network and pod CIDR 10.42.x.0/24. Nothing is put in the host's
// namespace.

// requireRoot skips (developer machine) or fails (CI) a test that needs root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skip("needs root: creates network namespaces, links and nftables tables")
	}
	t.Fatal("needs root: creates network namespaces, links and nftables tables (CI must run as root)")
}

// requireNetfilter skips a test under qemu-user, which does not emulate
// netlink's netfilter protocol (nftables): the native run tests it.
func requireNetfilter(t *testing.T) {
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

// newNS creates a namespace under dir, deleted at the end of the test.
func newNS(t *testing.T, dir, name string) string {
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

// handle is a netlink handle in the namespace at path, closed at the end
// of the test.
func handle(t *testing.T, path string) *netlink.Handle {
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

// logBuf collects a Network's log for the test to read.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type lan struct {
	t   *testing.T
	dir string
	ns  string
	h   *netlink.Handle
}

type board struct {
	t    *testing.T
	name string
	ns   string
	ip   netip.Addr
	cidr netip.Prefix
	cfg  Config
	net  *Network
	log  *logBuf
	h    *netlink.Handle
}

// newLAN makes the LAN: bridge lan0 in a namespace of its own.
func newLAN(t *testing.T) *lan {
	requireRoot(t)
	requireNetfilter(t)
	dir := t.TempDir()
	l := &lan{t: t, dir: dir, ns: newNS(t, dir, "lan")}
	l.h = handle(t, l.ns)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "lan0"}}
	if err := l.h.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	if err := l.h.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	return l
}

// board makes board i (LAN address 10.99.0.1i, pod CIDR 10.42.i.0/24)
// and its Network, with the pod CIDR set.
func (l *lan) board(i int) *board {
	t := l.t
	t.Helper()
	b := &board{t: t, name: fmt.Sprintf("board%d", i), log: &logBuf{},
		ip:   netip.AddrFrom4([4]byte{10, 99, 0, byte(10 + i)}),
		cidr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 42, byte(i), 0}), 24)}
	b.ns = newNS(t, l.dir, b.name)
	b.h = handle(t, b.ns)
	ns, err := vnetns.GetFromPath(b.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("lan-b%d", i)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
	if err := l.h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	br, err := l.h.LinkByName("lan0")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.h.LinkSetMaster(veth, br); err != nil {
		t.Fatal(err)
	}
	if err := l.h.LinkSetUp(veth); err != nil {
		t.Fatal(err)
	}
	eth0, err := b.h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.h.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(b.ip, 24))}); err != nil {
		t.Fatal(err)
	}
	if err := b.h.LinkSetUp(eth0); err != nil {
		t.Fatal(err)
	}
	b.cfg = Config{
		NodeIP:   b.ip,
		StateDir: filepath.Join(l.dir, b.name+"-state"),
		Netns:    b.ns,
		Logger:   slog.New(slog.NewTextHandler(b.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	b.start()
	if err := b.net.SetPodCIDR(b.cidr); err != nil {
		t.Fatal(err)
	}
	return b
}

// start makes the board's Network (again), closed at the end of the test.
func (b *board) start() {
	b.t.Helper()
	n, err := New(b.cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.net = n
	b.t.Cleanup(func() { n.Close() })
}

// peer is the board as a peer of the others.
func (b *board) peer() Peer { return Peer{Name: b.name, Addr: b.ip, PodCIDR: b.cidr} }

type pod struct {
	uid types.UID
	key string
	ns  string
	ip  netip.Addr
}

// newPod makes a pod object with the given ports.
func newPod(name string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Ports: ports}}},
	}
}

// attach makes the pod's namespace and attaches it.
func (b *board) attach(name string, ports ...corev1.ContainerPort) *pod {
	t := b.t
	t.Helper()
	p := newPod(name, ports...)
	path := newNS(t, t.TempDir(), name)
	ips, err := b.net.Attach(t.Context(), p, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) != 1 {
		t.Fatalf("Attach(%s) = %v; want one address", name, ips)
	}
	ip := netip.MustParseAddr(ips[0])
	if !b.cidr.Contains(ip) || ip == gateway(b.cidr) {
		t.Fatalf("Attach(%s) = %v; want a pod address of %v", name, ip, b.cidr)
	}
	return &pod{uid: p.UID, key: "default/" + name, ns: path, ip: ip}
}

// serveTCP listens on addr inside the namespace at ns; every connection
// is told "name saw ADDR", ADDR being its source as the server sees it.
func serveTCP(t *testing.T, ns, addr, name string) {
	t.Helper()
	var l net.Listener
	if err := netns.Do(ns, func() (err error) {
		l, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s saw %s\n", name, host)
			c.Close()
		}
	}()
}

// serveUDP answers every datagram on addr inside ns as serveTCP does.
func serveUDP(t *testing.T, ns, addr, name string) {
	t.Helper()
	var c net.PacketConn
	if err := netns.Do(ns, func() (err error) {
		c, err = net.ListenPacket("udp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			fmt.Fprintf(writerTo{c, from}, "%s saw %s\n", name, host)
		}
	}()
}

type writerTo struct {
	c  net.PacketConn
	to net.Addr
}

func (w writerTo) Write(p []byte) (int, error) { return w.c.WriteTo(p, w.to) }

// dial connects from the namespace ns to addr and returns the server's
// line ("name saw ADDR").
func dial(ns, network, addr string) (string, error) {
	return dialWithin(5*time.Second, ns, network, addr)
}

// unreachable reports whether a dial from ns to addr fails within a
// second.
func unreachable(ns, network, addr string) bool {
	_, err := dialWithin(time.Second, ns, network, addr)
	return err != nil
}

func dialWithin(timeout time.Duration, ns, network, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// UDP may lose the first datagram while ARP resolves: ask again.
	for {
		c, err := netns.Dialer(ns)(ctx, network, addr)
		if err != nil {
			return "", err
		}
		deadline, _ := ctx.Deadline()
		if network == "udp" {
			deadline = time.Now().Add(500 * time.Millisecond)
			c.Write([]byte("hi"))
		}
		c.SetReadDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil && network == "udp" && ctx.Err() == nil {
			continue
		}
		return strings.TrimSpace(line), err
	}
}

// expect dials and checks the answer.
func expect(t *testing.T, what, ns, network, addr, want string) {
	t.Helper()
	got, err := dial(ns, network, addr)
	if err != nil {
		t.Errorf("%s: %s %s: %v", what, network, addr, err)
		return
	}
	if got != want {
		t.Errorf("%s: %s %s answered %q; want %q", what, network, addr, got, want)
	}
}

// ourRoutes are the board's routes of RouteProtocol: destination → gateway.
func (b *board) ourRoutes() map[string]string {
	b.t.Helper()
	routes, err := b.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		b.t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range routes {
		m[r.Dst.String()] = r.Gw.String()
	}
	return m
}
