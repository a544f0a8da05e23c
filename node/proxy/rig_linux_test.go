package proxy

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

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/netns"
)

// The test rig: a board (a namespace with bridge isle0 at 10.42.1.1/24
// and the proxy), pods on the bridge (namespaces with eth0 at 10.42.1.x
// and a server answering "NAME saw SOURCE" on TCP and UDP port 8080), and
// a client on the board's LAN link (10.99.0.2, the board being
// 10.99.0.11 on its link lan0), which is also the board's default
// gateway. Nothing is put
// in the host's namespace.

const (
	nodeName  = "board1"
	otherNode = "board2"
	podPort   = 8080
)

var (
	boardIP   = netip.MustParseAddr("10.99.0.11")
	clientIP  = netip.MustParseAddr("10.99.0.2")
	podCIDR   = netip.MustParsePrefix("10.42.1.0/24")
	bridgeIP  = netip.MustParseAddr("10.42.1.1")
	dnsIP     = netip.MustParseAddr("10.43.0.10")
	serviceIP = netip.MustParseAddr("10.43.0.20")
)

// requireRoot skips (developer machine) or fails (CI) a test that needs root.
func requireRoot(t testing.TB) {
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
func requireNetfilter(t testing.TB) {
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

// logBuf collects the proxy's log for the test to read.
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

type rig struct {
	t      testing.TB
	dir    string
	board  string // the board's namespace
	client string // the LAN client's namespace
	h      *netlink.Handle
	pods   map[string]*pod
	px     *Proxy
	log    *logBuf
}

type pod struct {
	name string
	ns   string
	ip   netip.Addr
}

// newRig makes the board, the client and a pod with a server for each
// name (10.42.1.2, .3, ... in order), and starts the proxy.
func newRig(t testing.TB, pods ...string) *rig {
	requireRoot(t)
	requireNetfilter(t)
	r := &rig{t: t, dir: t.TempDir(), pods: map[string]*pod{}, log: &logBuf{}}
	r.board = r.newNS("board")
	r.client = r.newNS("client")
	r.h = r.handle(r.board)
	ch := r.handle(r.client)

	r.veth(r.h, "lan0", r.client)
	r.addrUp(r.h, "lan0", netip.PrefixFrom(boardIP, 24))
	r.addrUp(ch, "eth0", netip.PrefixFrom(clientIP, 24))
	r.check(r.h.RouteAdd(&netlink.Route{Gw: clientIP.AsSlice()}))

	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "isle0"}}
	r.check(r.h.LinkAdd(br))
	r.addrUp(r.h, "isle0", netip.PrefixFrom(bridgeIP, 24))
	r.check(netns.Do(r.board, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}))

	for i, name := range pods {
		p := &pod{name: name, ns: r.newNS("pod-" + name), ip: netip.AddrFrom4([4]byte{10, 42, 1, byte(2 + i)})}
		host := "veth-" + name
		r.veth(r.h, host, p.ns)
		l, err := r.h.LinkByName(host)
		r.check(err)
		r.check(r.h.LinkSetMaster(l, br))
		// As a CNI bridge does: a pod reaching itself through a Service
		// gets its packets back out of the port they came in by.
		r.check(r.h.LinkSetHairpin(l, true))
		r.check(r.h.LinkSetUp(l))
		ph := r.handle(p.ns)
		r.addrUp(ph, "eth0", netip.PrefixFrom(p.ip, 24))
		r.check(ph.RouteAdd(&netlink.Route{Gw: bridgeIP.AsSlice()}))
		serveTCP(t, p.ns, fmt.Sprintf(":%d", podPort), name)
		serveUDP(t, p.ns, fmt.Sprintf(":%d", podPort), name)
		r.pods[name] = p
	}
	r.start()
	return r
}

// start makes the proxy (again), closed at the end of the test.
func (r *rig) start() {
	r.t.Helper()
	px, err := New(Config{Netns: r.board, NodeName: nodeName, PodCIDR: podCIDR,
		DNS:    DNSRedirect{ServiceIP: dnsIP, Target: bridgeIP},
		Logger: slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r.check(err)
	r.px = px
	r.t.Cleanup(func() { px.Close() })
}

func (r *rig) check(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

// newNS creates a namespace, deleted at the end of the test.
func (r *rig) newNS(name string) string {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	r.check(netns.Create(path))
	r.t.Cleanup(func() {
		if err := netns.Delete(path); err != nil {
			r.t.Errorf("cleanup: %v", err)
		}
	})
	return path
}

// handle is a netlink handle in the namespace at path.
func (r *rig) handle(path string) *netlink.Handle {
	r.t.Helper()
	ns, err := vnetns.GetFromPath(path)
	r.check(err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	r.check(err)
	r.t.Cleanup(h.Close)
	return h
}

// veth makes a veth pair: name in h's namespace, eth0 in peer's.
func (r *rig) veth(h *netlink.Handle, name, peer string) {
	r.t.Helper()
	ns, err := vnetns.GetFromPath(peer)
	r.check(err)
	defer ns.Close()
	r.check(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}))
}

// addrUp gives the link an address and brings it up.
func (r *rig) addrUp(h *netlink.Handle, link string, p netip.Prefix) {
	r.t.Helper()
	l, err := h.LinkByName(link)
	r.check(err)
	r.check(h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}))
	r.check(h.LinkSetUp(l))
}

// sync runs Sync and fails the test on an error.
func (r *rig) sync(svcs []*corev1.Service, slices ...*discoveryv1.EndpointSlice) {
	r.t.Helper()
	r.check(r.px.Sync(svcs, slices))
}

// rules are the handles of the rules of a chain of the table.
func (r *rig) rules(chain string) []uint64 {
	r.t.Helper()
	c := r.nft()
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	rules, err := c.GetRules(t, &nftables.Chain{Table: t, Name: chain})
	r.check(err)
	var hs []uint64
	for _, x := range rules {
		hs = append(hs, x.Handle)
	}
	return hs
}

// nft is a connection to nftables in the board's namespace.
func (r *rig) nft() *nftables.Conn {
	r.t.Helper()
	ns, err := vnetns.GetFromPath(r.board)
	r.check(err)
	r.t.Cleanup(func() { ns.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	r.check(err)
	return c
}

// serveTCP listens on addr inside the namespace ns; every connection is
// told "NAME saw SOURCE".
func serveTCP(t testing.TB, ns, addr, name string) {
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
func serveUDP(t testing.TB, ns, addr, name string) {
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
			c.WriteTo(fmt.Appendf(nil, "%s saw %s\n", name, host), from)
		}
	}()
}

// dial connects from the namespace ns to addr and returns the server's
// line ("NAME saw SOURCE").
func dial(ns, network string, addr netip.AddrPort) (string, error) {
	return dialWithin(5*time.Second, ns, network, addr)
}

func dialWithin(timeout time.Duration, ns, network string, addr netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// UDP may lose the first datagram while ARP resolves: ask again.
	for {
		c, err := netns.Dialer(ns)(ctx, network, addr.String())
		if err != nil {
			return "", err
		}
		deadline, _ := ctx.Deadline()
		if network == "udp" {
			deadline = time.Now().Add(300 * time.Millisecond)
			c.Write([]byte("hi"))
		}
		c.SetReadDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		var ne net.Error
		if network == "udp" && errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
			continue
		}
		return strings.TrimSpace(line), err
	}
}

// hits dials n times and counts the answers by server name; the sources
// the servers saw are in saw.
func hits(t testing.TB, n int, ns, network string, addr netip.AddrPort) (byServer map[string]int, saw map[string]bool) {
	t.Helper()
	byServer, saw = map[string]int{}, map[string]bool{}
	for range n {
		line, err := dial(ns, network, addr)
		if err != nil {
			t.Fatalf("%s %v: %v", network, addr, err)
		}
		server, source, ok := strings.Cut(line, " saw ")
		if !ok {
			t.Fatalf("%s %v answered %q", network, addr, line)
		}
		byServer[server]++
		saw[source] = true
	}
	return byServer, saw
}

// Objects of the API.

func service(name string, ip netip.Addr, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip.String(), Ports: ports},
	}
}

func tcpPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port}
}

func udpPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolUDP, Port: port}
}

// endpointSlice is a slice of svc with the given ports (name → protocol
// and number) and endpoints.
func endpointSlice(svc, name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func slicePortOf(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port}
}

// ready is a ready endpoint on node.
func ready(ip netip.Addr, node string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip.String()}, NodeName: &node,
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}}
}

// terminating is a terminating endpoint on node, serving or not.
func terminating(ip netip.Addr, node string, serving bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip.String()}, NodeName: &node,
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(serving), Terminating: ptr(true)}}
}

// notReady is an endpoint that is neither ready nor terminating.
func notReady(ip netip.Addr, node string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip.String()}, NodeName: &node,
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(false)}}
}

func ptr[T any](v T) *T { return &v }
