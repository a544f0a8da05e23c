package podnet

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// The test rig: a LAN (a bridge in a namespace of its own) and boards
// (namespaces with an eth0 on the LAN at 10.99.0.1x/24), each with its
// Network and pod CIDR 10.42.x.0/24. Nothing is put in the host's
// namespace.

// needsRoot says what the tests of the rig need root for.
const needsRoot = "creates network namespaces, links and nftables tables"

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
	nstest.RequireRoot(t, needsRoot)
	nstest.RequireNetfilter(t)
	dir := t.TempDir()
	l := &lan{t: t, dir: dir, ns: nstest.NS(t, dir, "lan")}
	l.h = nstest.Handle(t, l.ns)
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
	b.ns = nstest.NS(t, l.dir, b.name)
	b.h = nstest.Handle(t, b.ns)
	veth := nstest.Veth(t, l.h, fmt.Sprintf("lan-b%d", i), b.ns)
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
	nstest.AddrUp(t, b.h, "eth0", netip.PrefixFrom(b.ip, 24))
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
	path := nstest.NS(t, t.TempDir(), name)
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

// unreachable reports whether a connection from ns to addr fails within
// a second.
func unreachable(ns, network, addr string) bool {
	_, err := nstest.Ask(ns, network, addr, time.Second)
	return err != nil
}

// askFrom asks the TCP server at addr from ns with the source address
// local, as nstest.Ask does.
func askFrom(ns string, local netip.Addr, addr string) (string, error) {
	var line string
	err := netns.Do(ns, func() error {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(line), err
}

// expect asks the server at addr from ns (as nstest.Ask) and checks its
// answer.
func expect(t *testing.T, what, ns, network, addr, want string) {
	t.Helper()
	got, err := nstest.Ask(ns, network, addr, 5*time.Second)
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
