package podnet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol is the route protocol number of the routes to peers' pod
// CIDRs: it marks them as this package's ("proto 73" in ip route).
const RouteProtocol = 73

// reconcileRoutes makes the board's routes to peers' pod CIDRs those of
// n.peers: it adds or replaces the routes wanted and removes the other
// routes of RouteProtocol. A route someone else made to a peer's CIDR
// wins: that peer is skipped.
func (n *Network) reconcileRoutes() error {
	lan, connected, err := n.lanLink()
	if err != nil {
		return err
	}
	want, skip := routable(n.peers, n.cfg.ClusterCIDR, n.podCIDR, n.cfg.NodeIP, connected)
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return n.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("podnet: list routes: %w", err)
	}
	ours := map[netip.Prefix]netlink.Route{}
	foreign := map[netip.Prefix]netlink.Route{}
	for _, r := range routes {
		if r.Protocol == RouteProtocol {
			ours[prefixOf(r.Dst)] = r
		} else {
			foreign[prefixOf(r.Dst)] = r
		}
	}
	var errs []error
	wanted := map[netip.Prefix]bool{}
	for _, p := range want {
		if f, ok := foreign[p.PodCIDR]; ok {
			skip = append(skip, skipped{Peer: p, Reason: fmt.Sprintf("a route to %v that is not the Pod network's exists (%v)", p.PodCIDR, f)})
			continue
		}
		wanted[p.PodCIDR] = true
		if r, ok := ours[p.PodCIDR]; ok && r.LinkIndex == lan.Attrs().Index && r.Gw.Equal(p.Addr.AsSlice()) {
			continue
		}
		route := &netlink.Route{
			LinkIndex: lan.Attrs().Index,
			Dst:       ipNet(p.PodCIDR),
			Gw:        p.Addr.AsSlice(),
			Protocol:  RouteProtocol,
			Table:     unix.RT_TABLE_MAIN,
			Scope:     netlink.SCOPE_UNIVERSE,
		}
		if err := n.h.RouteReplace(route); err != nil {
			errs = append(errs, fmt.Errorf("podnet: route to %v via %v (%s): %w", p.PodCIDR, p.Addr, p.Name, err))
			continue
		}
		n.log.Info("podnet: route to a peer's pods", "peer", p.Name, "podCIDR", p.PodCIDR, "via", p.Addr)
	}
	for dst, r := range ours {
		if wanted[dst] {
			continue
		}
		if err := n.h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("podnet: remove route to %v: %w", dst, err))
			continue
		}
		n.log.Info("podnet: route to a peer's pods removed", "podCIDR", dst, "via", r.Gw)
	}
	n.logSkipped(skip)
	return errors.Join(errs...)
}

// logSkipped logs the peers skipped: a warning when a peer is skipped
// for a new reason, so that a steady bad peer does not flood the log.
func (n *Network) logSkipped(skip []skipped) {
	warned := map[string]string{}
	for _, s := range skip {
		if s.Quiet {
			n.log.Debug("podnet: no route to peer", "peer", s.Peer.Name, "reason", s.Reason)
			continue
		}
		warned[s.Peer.Name] = s.Reason
		if n.warned[s.Peer.Name] != s.Reason {
			n.log.Warn("podnet: no route to peer", "peer", s.Peer.Name, "addr", s.Peer.Addr, "podCIDR", s.Peer.PodCIDR, "reason", s.Reason)
		}
	}
	n.warned = warned
}
