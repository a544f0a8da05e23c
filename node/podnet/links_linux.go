package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/netns"
)

// Link aliases mark the links this package made.
const (
	aliasPrefix = "isle-podnet"
	bridgeAlias = aliasPrefix + " bridge"
)

func podAlias(uid types.UID) string { return aliasPrefix + " pod " + string(uid) }

// podIf is the name of a pod's link in its namespace.
const podIf = "eth0"

// lanLink is the link holding NodeIP, and the networks of its IPv4
// addresses.
func (n *Network) lanLink() (netlink.Link, []netip.Prefix, error) {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return n.h.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, nil, fmt.Errorf("podnet: list addresses: %w", err)
	}
	index := 0
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == n.cfg.NodeIP {
			index = a.LinkIndex
		}
	}
	if index == 0 {
		return nil, nil, fmt.Errorf("podnet: no link of the board holds NodeIP %v", n.cfg.NodeIP)
	}
	var networks []netip.Prefix
	for _, a := range addrs {
		if a.LinkIndex == index {
			networks = append(networks, prefixOf(a.IPNet).Masked())
		}
	}
	l, err := n.h.LinkByIndex(index)
	if err != nil {
		return nil, nil, fmt.Errorf("podnet: the LAN link (index %d): %w", index, err)
	}
	return l, networks, nil
}

// ensureBridge makes the bridge, or repairs it: gateway address of p
// alone, MTU, up.
func (n *Network) ensureBridge(p netip.Prefix, mtu int) error {
	name := n.cfg.Bridge
	l, err := n.h.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
		if err := n.h.LinkAdd(br); err != nil {
			return fmt.Errorf("podnet: make bridge %s: %w", name, err)
		}
		l, err = n.h.LinkByName(name)
	}
	if err != nil {
		return fmt.Errorf("podnet: bridge %s: %w", name, err)
	}
	if l.Type() != "bridge" {
		return fmt.Errorf("podnet: bridge %s: a link of that name exists and is a %s; remove it or set another Bridge", name, l.Type())
	}
	if l.Attrs().Alias != bridgeAlias {
		if err := n.h.LinkSetAlias(l, bridgeAlias); err != nil {
			return fmt.Errorf("podnet: bridge %s: %w", name, err)
		}
	}
	if l.Attrs().MTU != mtu {
		if err := n.h.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("podnet: bridge %s: mtu %d: %w", name, mtu, err)
		}
	}
	gw := netip.PrefixFrom(gateway(p), p.Bits())
	if err := n.h.AddrReplace(l, &netlink.Addr{IPNet: ipNet(gw)}); err != nil {
		return fmt.Errorf("podnet: bridge %s: address %v: %w", name, gw, err)
	}
	if err := delAddrsBut(n.h, l, gw); err != nil {
		return fmt.Errorf("podnet: bridge %s: %w", name, err)
	}
	if err := n.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("podnet: bridge %s: up: %w", name, err)
	}
	return nil
}

// delAddrsBut removes l's IPv4 addresses other than keep.
func delAddrsBut(h *netlink.Handle, l netlink.Link, keep netip.Prefix) error {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if prefixOf(a.IPNet) == keep {
			continue
		}
		if err := h.AddrDel(l, &a); err != nil {
			return fmt.Errorf("remove address %v: %w", a.IPNet, err)
		}
	}
	return nil
}

// plumb makes or repairs r's veth pair: the board's end in the bridge and
// up; eth0 in the pod's namespace with r's address, up, the default route
// via the gateway; and the pod's loopback up.
func (n *Network) plumb(r *record) error {
	fail := func(err error) error { return fmt.Errorf("podnet: pod %s: %w", r.key(), err) }
	br, err := n.h.LinkByName(n.cfg.Bridge)
	if err != nil {
		return fail(fmt.Errorf("bridge %s: %w", n.cfg.Bridge, err))
	}
	podNS, err := vnetns.GetFromPath(r.Netns)
	if err != nil {
		return fail(fmt.Errorf("network namespace %s: %w", r.Netns, err))
	}
	defer podNS.Close()
	ph, err := netlink.NewHandleAt(podNS, unix.NETLINK_ROUTE)
	if err != nil {
		return fail(fmt.Errorf("netlink in %s: %w", r.Netns, err))
	}
	defer ph.Close()

	name := vethName(r.UID)
	host, err := n.ourVeth(r.UID)
	if err != nil {
		return fail(err)
	}
	eth0, err := linkOrNil(ph, podIf)
	if err != nil {
		return fail(fmt.Errorf("%s in %s: %w", podIf, r.Netns, err))
	}
	if !paired(host, eth0) {
		// Half-made or foreign: start again.
		if host != nil {
			if err := n.h.LinkDel(host); err != nil {
				return fail(fmt.Errorf("remove veth %s: %w", name, err))
			}
		}
		if eth0, err = linkOrNil(ph, podIf); err == nil && eth0 != nil {
			err = ph.LinkDel(eth0)
		}
		if err != nil {
			return fail(fmt.Errorf("remove %s in %s: %w", podIf, r.Netns, err))
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: name, MTU: n.mtu},
			PeerName:      podIf,
			PeerNamespace: netlink.NsFd(podNS),
			PeerMTU:       uint32(n.mtu),
		}
		if err := n.h.LinkAdd(veth); err != nil {
			return fail(fmt.Errorf("make veth %s: %w", name, err))
		}
		if host, err = n.h.LinkByName(name); err != nil {
			return fail(fmt.Errorf("veth %s: %w", name, err))
		}
		// The kernel takes no alias when it makes a link.
		if err := n.h.LinkSetAlias(host, podAlias(r.UID)); err != nil {
			return fail(fmt.Errorf("veth %s: alias: %w", name, err))
		}
		if eth0, err = ph.LinkByName(podIf); err != nil {
			return fail(fmt.Errorf("%s in %s: %w", podIf, r.Netns, err))
		}
	}
	if host.Attrs().MasterIndex != br.Attrs().Index {
		if err := n.h.LinkSetMasterByIndex(host, br.Attrs().Index); err != nil {
			return fail(fmt.Errorf("veth %s into %s: %w", name, n.cfg.Bridge, err))
		}
	}
	// Hairpin: a pod reaching itself through its Service gets its packets
	// back through the port they came from.
	if err := n.h.LinkSetHairpin(host, true); err != nil {
		return fail(fmt.Errorf("veth %s hairpin: %w", name, err))
	}
	if err := n.h.LinkSetUp(host); err != nil {
		return fail(fmt.Errorf("veth %s up: %w", name, err))
	}

	addr := netip.PrefixFrom(r.IP, n.podCIDR.Bits())
	if err := ph.AddrReplace(eth0, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
		return fail(fmt.Errorf("address %v: %w", addr, err))
	}
	if err := delAddrsBut(ph, eth0, addr); err != nil {
		return fail(err)
	}
	if err := ph.LinkSetUp(eth0); err != nil {
		return fail(fmt.Errorf("%s up: %w", podIf, err))
	}
	lo, err := ph.LinkByName("lo")
	if err == nil {
		err = ph.LinkSetUp(lo)
	}
	if err != nil {
		return fail(fmt.Errorf("loopback up: %w", err))
	}
	def := &netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gateway(n.podCIDR).AsSlice(), Scope: netlink.SCOPE_UNIVERSE}
	if err := ph.RouteReplace(def); err != nil {
		return fail(fmt.Errorf("default route via %v: %w", gateway(n.podCIDR), err))
	}
	// Both ends receive with GRO: a speed-up only, so a kernel without
	// it is logged, not refused.
	err = errors.Join(inNamespace(n.cfg.Netns, func() error { return SetGRO(name) }),
		netns.Do(r.Netns, func() error { return SetGRO(podIf) }))
	if err != nil {
		n.log.Debug("podnet: GRO not on", "pod", r.key(), "err", err)
	}
	return nil
}

// paired reports whether host and eth0 are the two ends of one veth.
func paired(host, eth0 netlink.Link) bool {
	return host != nil && eth0 != nil && host.Type() == "veth" && eth0.Type() == "veth" &&
		host.Attrs().ParentIndex == eth0.Attrs().Index && eth0.Attrs().ParentIndex == host.Attrs().Index
}

// ourVeth is the board's end of uid's veth, or nil if there is none; a
// link of that name made for another pod (or not by us) is an error.
func (n *Network) ourVeth(uid types.UID) (netlink.Link, error) {
	name := vethName(uid)
	l, err := linkOrNil(n.h, name)
	if err != nil {
		return nil, fmt.Errorf("veth %s: %w", name, err)
	}
	// No alias: made, and a crash came before the alias was set.
	if l != nil && l.Attrs().Alias != podAlias(uid) && !(l.Attrs().Alias == "" && l.Type() == "veth") {
		return nil, fmt.Errorf("link %s exists and is not the veth of pod UID %s (alias %q)", name, uid, l.Attrs().Alias)
	}
	return l, nil
}

// PodTraffic returns the bytes pod uid has received and sent through its
// veth since it was made (the board's end's transmit and receive
// counters); ok is false if the pod has no veth of ours.
func (n *Network) PodTraffic(uid types.UID) (rx, tx uint64, ok bool) {
	l, err := n.ourVeth(uid)
	if err != nil || l == nil || l.Attrs().Statistics == nil {
		return 0, 0, false
	}
	st := l.Attrs().Statistics
	return st.TxBytes, st.RxBytes, true
}

// unplumb removes uid's veth pair, if there is one.
func (n *Network) unplumb(uid types.UID) error {
	l, err := n.ourVeth(uid)
	if err != nil {
		return fmt.Errorf("podnet: detach %s: %w", uid, err)
	}
	if l == nil {
		return nil
	}
	if err := n.h.LinkDel(l); err != nil && !errors.As(err, new(netlink.LinkNotFoundError)) {
		return fmt.Errorf("podnet: detach %s: remove veth %s: %w", uid, l.Attrs().Name, err)
	}
	return nil
}

// linkOrNil is the link of that name, or nil if there is none.
func linkOrNil(h *netlink.Handle, name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, nil
	}
	return l, err
}

// ensureForwarding lets the board route for its pods: forwarding on the
// bridge and the LAN link (the kernel checks the link a packet comes in
// on), and rp_filter no stricter than loose there. The LAN link's
// settings before the first change are saved for Uninstall.
func (n *Network) ensureForwarding(lan string) error {
	return inNamespace(n.cfg.Netns, func() error {
		switch _, ok, err := n.store.lan(); {
		case err != nil:
			return err
		case !ok:
			fwd, err := readSysctl(lan, "forwarding")
			if err != nil {
				return err
			}
			rp, err := readSysctl(lan, "rp_filter")
			if err != nil {
				return err
			}
			if err := n.store.putLAN(lanSettings{Link: lan, Forwarding: fwd, RPFilter: rp}); err != nil {
				return err
			}
		}
		all, err := readSysctl("all", "rp_filter")
		if err != nil {
			return err
		}
		for _, link := range []string{n.cfg.Bridge, lan} {
			if err := writeSysctl(link, "forwarding", "1"); err != nil {
				return err
			}
			rp, err := readSysctl(link, "rp_filter")
			if err != nil {
				return err
			}
			// The kernel uses the larger of all's and the link's: 1
			// (strict) drops packets of pods whose route is missing or
			// asymmetric for a moment; 2 (loose) does not.
			if max(rp, all) == "1" {
				if err := writeSysctl(link, "rp_filter", "2"); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// inNamespace runs f in the namespace at path ("": this process's own).
func inNamespace(path string, f func() error) error {
	if path == "" {
		return f()
	}
	return netns.Do(path, f)
}

func sysctlPath(link, key string) string {
	return "/proc/sys/net/ipv4/conf/" + link + "/" + key
}

// readSysctl reads an IPv4 setting of link in the calling thread's network
// namespace.
func readSysctl(link, key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(link, key))
	if err != nil {
		return "", fmt.Errorf("podnet: sysctl: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if !isSysctlInt(v) {
		return "", fmt.Errorf("podnet: sysctl %s: unexpected value %q", sysctlPath(link, key), v)
	}
	return v, nil
}

// writeSysctl sets an IPv4 setting of link in the calling thread's
// network namespace.
func writeSysctl(link, key, value string) error {
	if err := os.WriteFile(sysctlPath(link, key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("podnet: sysctl: %w", err)
	}
	return nil
}

// retryDump retries a netlink dump the kernel interrupted (the table
// changed meanwhile).
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	for i := 0; ; i++ {
		v, err := dump()
		if errors.Is(err, netlink.ErrDumpInterrupted) && i < 5 {
			continue
		}
		return v, err
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// prefixOf converts an address with its mask (an interface address, or a
// route's destination) to a prefix; nil is the default route's 0.0.0.0/0.
func prefixOf(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	ip, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones)
}
