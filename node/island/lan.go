package island

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/podnet"
)

// Names of what the island makes in the host's network.
const (
	// HostLink is the host's link to the LAN, and the sign that an island
	// runs: its alias names the island's directory.
	HostLink   = "isle-lan"
	switchNS   = "/run/netns/" + LANNamespace
	switchBr   = LANBridge
	hostPort   = "host"
	aliasStart = "isle island "
)

// The island's LAN: its network namespace (`ip netns exec isle-lan ...`)
// and the bridge in it that every board, and the host, is plugged into. A
// tap on the bridge plugs in another machine, such as a QEMU board.
const (
	LANNamespace = "isle-lan"
	LANBridge    = "br0"
)

// Ranges of the cluster the host must never route out of the machine.
var clusterRanges = []netip.Prefix{
	netip.MustParsePrefix("10.42.0.0/16"), // pods
	netip.MustParsePrefix("10.43.0.0/16"), // services
}

// boardNS is the path of a board's network namespace (`ip netns exec
// isle-pi1 ...` works on it).
func boardNS(name string) string { return "/run/netns/isle-" + name }

// handle is a netlink handle inside the namespace at path.
func handle(path string) (*netlink.Handle, error) {
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("island: namespace %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("island: netlink in %s: %w", path, err)
	}
	return h, nil
}

// runningIsland returns the directory of the island whose LAN exists on
// this machine, or "" if none does.
func runningIsland() string {
	l, err := netlink.LinkByName(HostLink)
	if err != nil {
		if ok, _ := netns.Exists(switchNS); ok {
			return "(unknown: " + switchNS + " exists)"
		}
		return ""
	}
	if d, ok := strings.CutPrefix(l.Attrs().Alias, aliasStart); ok {
		return d
	}
	return "(unknown: link " + HostLink + " exists)"
}

// makeLAN makes the switch namespace with its bridge and the host's link
// to it, with the host's address, and the host's unreachable routes for
// the cluster's ranges.
func makeLAN(s *State) error {
	if err := netns.Create(switchNS); err != nil {
		return fmt.Errorf("island: LAN: %w", err)
	}
	sw, err := handle(switchNS)
	if err != nil {
		return err
	}
	defer sw.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: switchBr}}
	if err := sw.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("island: LAN bridge: %w", err)
	}
	if err := sw.LinkSetUp(br); err != nil {
		return fmt.Errorf("island: LAN bridge: %w", err)
	}
	swFd, err := vnetns.GetFromPath(switchNS)
	if err != nil {
		return fmt.Errorf("island: LAN: %w", err)
	}
	defer swFd.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: HostLink}, PeerName: hostPort, PeerNamespace: netlink.NsFd(swFd)}
	if err := netlink.LinkAdd(veth); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("island: host link %s: %w", HostLink, err)
	}
	host, err := netlink.LinkByName(HostLink)
	if err != nil {
		return fmt.Errorf("island: host link %s: %w", HostLink, err)
	}
	if err := netlink.LinkSetAlias(host, aliasStart+s.Dir); err != nil {
		return fmt.Errorf("island: host link %s: %w", HostLink, err)
	}
	addr := &netlink.Addr{IPNet: ipNet(s.Host, s.LAN.Bits())}
	if err := netlink.AddrReplace(host, addr); err != nil {
		return fmt.Errorf("island: host address %v: %w", s.Host, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("island: host link %s: %w", HostLink, err)
	}
	if err := joinBridge(sw, hostPort); err != nil {
		return err
	}
	for _, p := range clusterRanges {
		r := &netlink.Route{Dst: ipNet(p.Addr(), p.Bits()), Type: unix.RTN_UNREACHABLE}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("island: host route unreachable %v: %w", p, err)
		}
	}
	return nil
}

func joinBridge(sw *netlink.Handle, port string) error {
	l, err := sw.LinkByName(port)
	if err != nil {
		return fmt.Errorf("island: LAN port %s: %w", port, err)
	}
	br, err := sw.LinkByName(switchBr)
	if err != nil {
		return fmt.Errorf("island: LAN bridge: %w", err)
	}
	if err := sw.LinkSetMaster(l, br); err != nil {
		return fmt.Errorf("island: LAN port %s: %w", port, err)
	}
	if err := sw.LinkSetUp(l); err != nil {
		return fmt.Errorf("island: LAN port %s: %w", port, err)
	}
	return nil
}

// removeLAN removes what makeLAN made; what is missing is skipped.
func removeLAN() error {
	var errs []error
	if l, err := netlink.LinkByName(HostLink); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete link %s: %w", HostLink, err))
		}
	}
	for _, p := range clusterRanges {
		r := &netlink.Route{Dst: ipNet(p.Addr(), p.Bits()), Type: unix.RTN_UNREACHABLE}
		if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %v: %w", p, err))
		}
	}
	if err := netns.Delete(switchNS); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("island: LAN: %w", errors.Join(errs...))
	}
	return nil
}

// plugBoard makes the board's namespace (a new one: a board that boots
// has a fresh network stack) and its eth0 on the LAN.
func plugBoard(s *State, b *Board) error {
	ns := boardNS(b.Name)
	if err := netns.Create(ns); err != nil {
		return fmt.Errorf("island: board %s: %w", b.Name, err)
	}
	sw, err := handle(switchNS)
	if err != nil {
		return err
	}
	defer sw.Close()
	bfd, err := vnetns.GetFromPath(ns)
	if err != nil {
		return fmt.Errorf("island: board %s: %w", b.Name, err)
	}
	defer bfd.Close()
	// The board keeps its MAC address across power cycles, as a real
	// board does: the others' ARP caches stay right.
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: b.Name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(bfd),
		PeerHardwareAddr: boardMAC(b.Addr)}
	if err := sw.LinkAdd(veth); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("island: board %s: LAN link: %w", b.Name, err)
	}
	if err := joinBridge(sw, b.Name); err != nil {
		return err
	}
	bh, err := handle(ns)
	if err != nil {
		return err
	}
	defer bh.Close()
	eth, err := bh.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("island: board %s: eth0: %w", b.Name, err)
	}
	if err := bh.AddrReplace(eth, &netlink.Addr{IPNet: ipNet(b.Addr, s.LAN.Bits())}); err != nil {
		return fmt.Errorf("island: board %s: address %v: %w", b.Name, b.Addr, err)
	}
	if err := bh.LinkSetUp(eth); err != nil {
		return fmt.Errorf("island: board %s: eth0: %w", b.Name, err)
	}
	// A real board's default route covers Service addresses, which the
	// kernel routes before their rules turn them into pods'. The island
	// has no way out, so the board gets just that range, through the
	// host, whose route for it is unreachable.
	svc := clusterRanges[1]
	if err := bh.RouteReplace(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(svc.Addr(), svc.Bits()), Gw: s.Host.AsSlice()}); err != nil {
		return fmt.Errorf("island: board %s: route to %v: %w", b.Name, svc, err)
	}
	// Receive offload on both ends of the cable, as a board's Ethernet
	// and a switch have it; only a speed-up.
	_ = netns.Do(ns, func() error { return podnet.SetGRO("eth0") })
	_ = netns.Do(switchNS, func() error { return podnet.SetGRO(b.Name) })
	return setPort(b.Name, !b.Partitioned)
}

// unplugBoard removes the board's LAN link and namespace (what is in it
// goes with it).
func unplugBoard(name string) error {
	var errs []error
	if sw, err := handle(switchNS); err == nil {
		if l, err := sw.LinkByName(name); err == nil {
			if err := sw.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete LAN port %s: %w", name, err))
			}
		}
		sw.Close()
	}
	if err := netns.Delete(boardNS(name)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("island: board %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// setPort brings the board's port of the LAN switch up or down (a cable
// plugged in or pulled).
func setPort(name string, up bool) error {
	sw, err := handle(switchNS)
	if err != nil {
		return err
	}
	defer sw.Close()
	l, err := sw.LinkByName(name)
	if err != nil {
		return fmt.Errorf("island: LAN port of %s: %w", name, err)
	}
	if up {
		err = sw.LinkSetUp(l)
	} else {
		err = sw.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("island: LAN port of %s: %w", name, err)
	}
	return nil
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}
}

// boardMAC is a board's fixed, locally administered MAC address:
// 02:69 and its IPv4 address.
func boardMAC(a netip.Addr) net.HardwareAddr {
	ip := a.As4()
	return net.HardwareAddr{0x02, 0x69, ip[0], ip[1], ip[2], ip[3]}
}
