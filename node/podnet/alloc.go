package podnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// checkPodCIDR rejects a pod CIDR that is not an IPv4 network inside
// cluster with room for the gateway and at least one pod.
func checkPodCIDR(p, cluster netip.Prefix) error {
	switch {
	case !p.IsValid() || !p.Addr().Is4():
		return fmt.Errorf("pod CIDR %v: want an IPv4 network", p)
	case p != p.Masked():
		return fmt.Errorf("pod CIDR %v: host bits are set (the network is %v)", p, p.Masked())
	case p.Bits() < cluster.Bits() || !cluster.Contains(p.Addr()):
		return fmt.Errorf("pod CIDR %v: not inside the cluster CIDR %v", p, cluster)
	case p.Bits() > 30:
		return fmt.Errorf("pod CIDR %v: too small (want /30 or wider)", p)
	}
	return nil
}

// gateway is the pods' gateway in p: its first address, held by the bridge.
func gateway(p netip.Prefix) netip.Addr { return p.Addr().Next() }

// hostRange is the first and last address of p that a pod may get: all
// but the network's own address, the gateway and the broadcast address.
func hostRange(p netip.Prefix) (first, last netip.Addr) {
	return addr4(uint4(p.Addr()) + 2), addr4(uint4(broadcast(p)) - 1)
}

// broadcast is the last address of the IPv4 network p.
func broadcast(p netip.Prefix) netip.Addr {
	return addr4(uint4(p.Addr()) | (1<<(32-p.Bits()) - 1))
}

func uint4(a netip.Addr) uint32 { return binary.BigEndian.Uint32(a.AsSlice()) }

func addr4(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

// nextFree returns the first address of p after last, wrapping around,
// that a pod may get and used does not report; last outside the pods'
// range of p starts at its beginning. ok is false when every address is
// used. Handing out addresses in turn keeps a just-freed address from
// being reused at once, while connections to its old pod may linger.
func nextFree(p netip.Prefix, last netip.Addr, used func(netip.Addr) bool) (a netip.Addr, ok bool) {
	first, end := hostRange(p)
	a = first
	if last.Is4() && first.Compare(last) <= 0 && last.Compare(end) < 0 {
		a = last.Next()
	}
	for range uint4(end) - uint4(first) + 1 {
		if !used(a) {
			return a, true
		}
		if a == end {
			a = first
		} else {
			a = a.Next()
		}
	}
	return netip.Addr{}, false
}
