package proxy

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// The routes of a UDP port with a node port and an external IP, and which
// conntrack entries the ones gone match: only UDP flows DNATed to the
// endpoint through that port.
func TestGoneFlows(t *testing.T) {
	a := netip.MustParseAddrPort("10.42.1.2:8080")
	b := netip.MustParseAddrPort("10.42.1.3:8080")
	udp := &svcPort{proto: corev1.ProtocolUDP, clusterIP: serviceIP, servicePort: 53, nodePort: 30053,
		externalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.7")}, all: []endpoint{{addr: a}, {addr: b}}}
	tcp := &svcPort{proto: corev1.ProtocolTCP, clusterIP: serviceIP, servicePort: 80, all: []endpoint{{addr: a}}}
	before := plan{ports: []*svcPort{udp, tcp}}.udpRoutes()
	if len(before) != 6 {
		t.Errorf("%d routes, want 6 (2 endpoints × cluster IP, node port, external IP; none for TCP): %v", len(before), before)
	}
	after := *udp
	after.all = []endpoint{{addr: b}}
	gone := goneFlows(goneUDPRoutes(before, plan{ports: []*svcPort{&after, tcp}}.udpRoutes()))
	if len(gone) != 3 {
		t.Errorf("%d routes gone, want a's 3: %v", len(gone), gone)
	}

	flow := func(proto uint8, dst, ep string) *netlink.ConntrackFlow {
		d, e := netip.MustParseAddrPort(dst), netip.MustParseAddrPort(ep)
		f := &netlink.ConntrackFlow{}
		f.Forward = netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP("10.42.1.9"), SrcPort: 40000,
			DstIP: net.IP(d.Addr().AsSlice()), DstPort: d.Port()}
		f.Reverse = netlink.IPTuple{Protocol: proto, SrcIP: net.IP(e.Addr().AsSlice()), SrcPort: e.Port(),
			DstIP: net.ParseIP("10.42.1.9"), DstPort: 40000}
		return f
	}
	for _, c := range []struct {
		what string
		f    *netlink.ConntrackFlow
		want bool
	}{
		{"to the cluster IP, DNATed to a", flow(unix.IPPROTO_UDP, "10.43.0.20:53", "10.42.1.2:8080"), true},
		{"to a node port, DNATed to a", flow(unix.IPPROTO_UDP, "10.99.0.11:30053", "10.42.1.2:8080"), true},
		{"to the external IP, DNATed to a", flow(unix.IPPROTO_UDP, "192.0.2.7:53", "10.42.1.2:8080"), true},
		{"to the cluster IP, DNATed to b (still in use)", flow(unix.IPPROTO_UDP, "10.43.0.20:53", "10.42.1.3:8080"), false},
		{"to a directly (no DNAT)", flow(unix.IPPROTO_UDP, "10.42.1.2:8080", "10.42.1.2:8080"), false},
		{"TCP to the cluster IP, DNATed to a", flow(unix.IPPROTO_TCP, "10.43.0.20:53", "10.42.1.2:8080"), false},
		{"to another port of the cluster IP", flow(unix.IPPROTO_UDP, "10.43.0.20:54", "10.42.1.2:8080"), false},
	} {
		if got := gone.MatchConntrackFlow(c.f); got != c.want {
			t.Errorf("%s: matched %v, want %v", c.what, got, c.want)
		}
	}
}
