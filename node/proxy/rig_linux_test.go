package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
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

type rig struct {
	t      testing.TB
	dir    string
	board  string // the board's namespace
	client string // the LAN client's namespace
	h      *netlink.Handle
	pods   map[string]*pod
	px     *Proxy
}

type pod struct {
	name string
	ns   string
	ip   netip.Addr
}

// newRig makes the board, the client and a pod with a server for each
// name (10.42.1.2, .3, ... in order), and starts the proxy.
func newRig(t testing.TB, pods ...string) *rig {
	nstest.RequireRoot(t, "creates network namespaces, links and nftables tables")
	nstest.RequireNetfilter(t)
	r := &rig{t: t, dir: t.TempDir(), pods: map[string]*pod{}}
	r.board = nstest.NS(t, r.dir, "board")
	r.client = nstest.NS(t, r.dir, "client")
	r.h = nstest.Handle(t, r.board)
	ch := nstest.Handle(t, r.client)

	nstest.Veth(t, r.h, "lan0", r.client)
	nstest.AddrUp(t, r.h, "lan0", netip.PrefixFrom(boardIP, 24))
	nstest.AddrUp(t, ch, "eth0", netip.PrefixFrom(clientIP, 24))
	r.check(r.h.RouteAdd(&netlink.Route{Gw: clientIP.AsSlice()}))

	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "isle0"}}
	r.check(r.h.LinkAdd(br))
	nstest.AddrUp(t, r.h, "isle0", netip.PrefixFrom(bridgeIP, 24))
	r.check(netns.Do(r.board, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}))

	for i, name := range pods {
		p := &pod{name: name, ns: nstest.NS(t, r.dir, "pod-"+name), ip: netip.AddrFrom4([4]byte{10, 42, 1, byte(2 + i)})}
		l := nstest.Veth(t, r.h, "veth-"+name, p.ns)
		r.check(r.h.LinkSetMaster(l, br))
		// As a CNI bridge does: a pod reaching itself through a Service
		// gets its packets back out of the port they came in by.
		r.check(r.h.LinkSetHairpin(l, true))
		r.check(r.h.LinkSetUp(l))
		ph := nstest.Handle(t, p.ns)
		nstest.AddrUp(t, ph, "eth0", netip.PrefixFrom(p.ip, 24))
		r.check(ph.RouteAdd(&netlink.Route{Gw: bridgeIP.AsSlice()}))
		nstest.ServeTCP(t, p.ns, fmt.Sprintf(":%d", podPort), name)
		nstest.ServeUDP(t, p.ns, fmt.Sprintf(":%d", podPort), name)
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
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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

// sync runs Sync and fails the test on an error.
func (r *rig) sync(svcs []*corev1.Service, slices ...*discoveryv1.EndpointSlice) {
	r.t.Helper()
	r.check(r.px.Sync(svcs, slices))
}

// rules are the handles of the rules of a chain of the table.
func (r *rig) rules(chain string) []uint64 {
	r.t.Helper()
	c := nstest.NFTables(r.t, r.board)
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	rules, err := c.GetRules(t, &nftables.Chain{Table: t, Name: chain})
	r.check(err)
	var hs []uint64
	for _, x := range rules {
		hs = append(hs, x.Handle)
	}
	return hs
}

// dial asks the server at addr from the namespace ns (as nstest.Ask,
// within 5 seconds) and returns its line ("NAME saw SOURCE").
func dial(ns, network string, addr netip.AddrPort) (string, error) {
	return nstest.Ask(ns, network, addr.String(), 5*time.Second)
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
