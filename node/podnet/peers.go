package podnet

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Peer is another board of the cluster: its pod CIDR is reached via its
// LAN address.
type Peer struct {
	// Name is the board's node name, for logs.
	Name string
	// Addr is the board's LAN address: the gateway of its pods.
	Addr netip.Addr
	// PodCIDR is the board's pod CIDR; unset while the board has none.
	PodCIDR netip.Prefix
}

// skipped is a peer no route is made for, and why.
type skipped struct {
	Peer   Peer
	Reason string
	// Quiet: a normal state (ourselves, no pod CIDR yet), not worth a
	// warning.
	Quiet bool
}

// routable sorts peers into those a route is wanted for, ordered by pod
// CIDR, and those skipped: ourselves (self, or our pod CIDR own), peers
// without a pod CIDR, pod CIDRs that are not proper networks inside
// cluster or that overlap ours or an earlier peer's (in name order), and
// addresses outside the networks of the LAN link (connected).
func routable(peers []Peer, cluster, own netip.Prefix, self netip.Addr, connected []netip.Prefix) (want []Peer, skip []skipped) {
	sorted := slices.Clone(peers)
	slices.SortStableFunc(sorted, func(a, b Peer) int { return cmp.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		reason, quiet := "", false
		switch {
		case p.Addr == self:
			reason, quiet = "this board", true
		case p.PodCIDR == (netip.Prefix{}):
			reason, quiet = "no pod CIDR yet", true
		case !p.PodCIDR.IsValid() || !p.PodCIDR.Addr().Is4() || p.PodCIDR != p.PodCIDR.Masked():
			reason = fmt.Sprintf("pod CIDR %v is not an IPv4 network (host bits set?)", p.PodCIDR)
		case p.PodCIDR.Bits() < cluster.Bits() || !cluster.Contains(p.PodCIDR.Addr()):
			reason = fmt.Sprintf("pod CIDR %v is not inside the cluster CIDR %v", p.PodCIDR, cluster)
		case own.IsValid() && p.PodCIDR.Overlaps(own):
			reason = fmt.Sprintf("pod CIDR %v overlaps this board's %v", p.PodCIDR, own)
		case !p.Addr.Is4():
			reason = fmt.Sprintf("address %v is not an IPv4 address", p.Addr)
		case !onLink(p.Addr, connected):
			reason = fmt.Sprintf("address %v is not on the LAN link's networks %v", p.Addr, connected)
		}
		if reason == "" {
			for _, w := range want {
				if w.PodCIDR.Overlaps(p.PodCIDR) {
					reason = fmt.Sprintf("pod CIDR %v overlaps that of %s (%v)", p.PodCIDR, w.Name, w.PodCIDR)
					break
				}
			}
		}
		if reason != "" {
			skip = append(skip, skipped{Peer: p, Reason: reason, Quiet: quiet})
			continue
		}
		want = append(want, p)
	}
	slices.SortFunc(want, func(a, b Peer) int { return a.PodCIDR.Addr().Compare(b.PodCIDR.Addr()) })
	return want, skip
}

// onLink reports whether a is a host address of one of the networks.
func onLink(a netip.Addr, networks []netip.Prefix) bool {
	for _, n := range networks {
		n = n.Masked()
		if !n.Addr().Is4() || !n.Contains(a) {
			continue
		}
		if n.Bits() < 31 && (a == n.Addr() || a == broadcast(n)) {
			continue
		}
		return true
	}
	return false
}
