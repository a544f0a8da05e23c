package podnet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestRoutable(t *testing.T) {
	pf := netip.MustParsePrefix
	ad := netip.MustParseAddr
	cluster, own, self := DefaultClusterCIDR, pf("10.42.1.0/24"), ad("10.99.0.11")
	connected := []netip.Prefix{pf("10.99.0.0/24")}
	peers := []Peer{
		{"c", ad("10.99.0.13"), pf("10.42.3.0/24")},
		{"b", ad("10.99.0.12"), pf("10.42.2.0/24")},
		{"me", self, own},
		{"new", ad("10.99.0.14"), netip.Prefix{}},
		{"outside", ad("10.99.0.15"), pf("10.50.0.0/24")},
		{"wide", ad("10.99.0.15"), pf("10.0.0.0/8")},
		{"overlaps-us", ad("10.99.0.16"), pf("10.42.1.128/25")},
		{"hostbits", ad("10.99.0.17"), pf("10.42.4.1/24")},
		{"far", ad("192.168.5.5"), pf("10.42.5.0/24")},
		{"bcast", ad("10.99.0.255"), pf("10.42.6.0/24")},
		{"v6", ad("fd00::1"), pf("10.42.7.0/24")},
		{"zz-overlaps-b", ad("10.99.0.18"), pf("10.42.2.0/23")},
	}
	want, skip := routable(peers, cluster, own, self, connected)
	var names []string
	for _, p := range want {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"b", "c"}) {
		t.Errorf("routes wanted for %v; want [b c] in CIDR order", names)
	}
	reasons := map[string]skipped{}
	for _, s := range skip {
		reasons[s.Peer.Name] = s
	}
	for name, tc := range map[string]struct {
		reason string
		quiet  bool
	}{
		"me":            {"this board", true},
		"new":           {"no pod CIDR", true},
		"outside":       {"not inside the cluster", false},
		"wide":          {"not inside the cluster", false},
		"overlaps-us":   {"overlaps this board's", false},
		"hostbits":      {"host bits", false},
		"far":           {"not on the LAN link", false},
		"bcast":         {"not on the LAN link", false},
		"v6":            {"not an IPv4 address", false},
		"zz-overlaps-b": {"overlaps that of b", false},
	} {
		s, ok := reasons[name]
		if !ok {
			t.Errorf("peer %s not skipped", name)
			continue
		}
		if !strings.Contains(s.Reason, tc.reason) || s.Quiet != tc.quiet {
			t.Errorf("peer %s skipped for %q (quiet %v); want %q (quiet %v)", name, s.Reason, s.Quiet, tc.reason, tc.quiet)
		}
	}
	if len(skip) != 10 {
		t.Errorf("%d peers skipped, want 10: %+v", len(skip), skip)
	}

	// Without a pod CIDR of our own, only the overlap with ours is not
	// checked.
	want, _ = routable(peers, cluster, netip.Prefix{}, self, connected)
	if len(want) != 3 || want[0].Name != "overlaps-us" {
		t.Errorf("without a pod CIDR: want %+v; want overlaps-us, b, c", want)
	}
}

func TestOnLink(t *testing.T) {
	nets := []netip.Prefix{netip.MustParsePrefix("10.99.0.7/24"), netip.MustParsePrefix("172.16.0.0/31")}
	for ip, want := range map[string]bool{
		"10.99.0.1":   true,
		"10.99.0.254": true,
		"10.99.0.0":   false,
		"10.99.0.255": false,
		"10.99.1.1":   false,
		"172.16.0.0":  true, // a /31 has no network or broadcast address
		"172.16.0.1":  true,
	} {
		if got := onLink(netip.MustParseAddr(ip), nets); got != want {
			t.Errorf("onLink(%s) = %v; want %v", ip, got, want)
		}
	}
}
