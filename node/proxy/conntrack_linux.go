package proxy

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// UDP has no connection to end: conntrack keeps a UDP flow DNATed to the
// endpoint it first went to for as long as packets keep coming (a
// client that sends every few seconds from one port never lets the entry
// time out), even after that endpoint left the Service. So when an
// endpoint leaves a UDP Service port, the entries of flows DNATed to it
// through that port are deleted, as kube-proxy does; the next packet is
// balanced again. TCP needs none of this: a connection to a pod that is
// gone fails and the client opens a new one.

// goneFlows matches the conntrack entries of UDP flows DNATed along
// routes the proxy no longer programs.
type goneFlows map[udpRoute]bool

// MatchConntrackFlow implements netlink.CustomConntrackFilter. An entry's
// original tuple holds what the client sent to, its reply tuple the
// endpoint the DNAT chose.
func (g goneFlows) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	if f.Forward.Protocol != unix.IPPROTO_UDP {
		return false
	}
	ep, ok1 := addrPort(f.Reverse.SrcIP, f.Reverse.SrcPort)
	dst, ok2 := addrPort(f.Forward.DstIP, f.Forward.DstPort)
	if !ok1 || !ok2 || ep == dst { // not DNATed
		return false
	}
	return g[udpRoute{ep: ep, dst: dst}] || g[udpRoute{ep: ep, nodePort: dst.Port()}]
}

func addrPort(ip net.IP, port uint16) (netip.AddrPort, bool) {
	a, ok := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), port), ok
}

// forgetUDPFlows deletes the conntrack entries of UDP flows DNATed along
// the gone routes, in the board's namespace, and returns how many.
func (p *Proxy) forgetUDPFlows(gone map[udpRoute]bool) (uint, error) {
	var h *netlink.Handle
	var err error
	if p.ns.IsOpen() {
		h, err = netlink.NewHandleAt(p.ns, unix.NETLINK_NETFILTER)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
	}
	if err != nil {
		return 0, fmt.Errorf("conntrack: %w", err)
	}
	defer h.Close()
	n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, goneFlows(gone))
	if err != nil {
		return n, fmt.Errorf("conntrack: delete the UDP flows of endpoints gone: %w", err)
	}
	return n, nil
}
