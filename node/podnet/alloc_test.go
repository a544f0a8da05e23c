package podnet

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNextFree(t *testing.T) {
	p := netip.MustParsePrefix("10.42.3.0/24")
	a := netip.MustParseAddr
	none := func(netip.Addr) bool { return false }
	usedSet := func(s ...string) func(netip.Addr) bool {
		m := map[netip.Addr]bool{}
		for _, x := range s {
			m[a(x)] = true
		}
		return func(x netip.Addr) bool { return m[x] }
	}
	for _, tc := range []struct {
		name   string
		prefix netip.Prefix
		last   netip.Addr
		used   func(netip.Addr) bool
		want   string // "" for none free
	}{
		{"first ever", p, netip.Addr{}, none, "10.42.3.2"},
		{"after last", p, a("10.42.3.5"), none, "10.42.3.6"},
		{"wraps after the last host", p, a("10.42.3.254"), none, "10.42.3.2"},
		{"skips used", p, a("10.42.3.5"), usedSet("10.42.3.6", "10.42.3.7"), "10.42.3.8"},
		{"skips used across the wrap", p, a("10.42.3.253"), usedSet("10.42.3.254", "10.42.3.2"), "10.42.3.3"},
		{"last is the gateway", p, a("10.42.3.1"), none, "10.42.3.2"},
		{"last is the broadcast", p, a("10.42.3.255"), none, "10.42.3.2"},
		{"last of another CIDR", p, a("10.42.9.77"), none, "10.42.3.2"},
		{"freed last is not reused while others are free", p, a("10.42.3.9"), usedSet("10.42.3.2"), "10.42.3.10"},
		{"the freed one when it is the only one", p, a("10.42.3.9"), func(x netip.Addr) bool { return x != a("10.42.3.9") }, "10.42.3.9"},
		{"full", p, a("10.42.3.9"), func(netip.Addr) bool { return true }, ""},
		{"/30 has one pod address", netip.MustParsePrefix("10.42.3.4/30"), netip.Addr{}, none, "10.42.3.6"},
		{"/30 full", netip.MustParsePrefix("10.42.3.4/30"), netip.Addr{}, usedSet("10.42.3.6"), ""},
		{"/23 crosses a byte", netip.MustParsePrefix("10.42.4.0/23"), a("10.42.4.255"), none, "10.42.5.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := nextFree(tc.prefix, tc.last, tc.used)
			if tc.want == "" {
				if ok {
					t.Fatalf("nextFree = %v; want none free", got)
				}
				return
			}
			if !ok || got != a(tc.want) {
				t.Fatalf("nextFree = %v, %v; want %s", got, ok, tc.want)
			}
			if got == gateway(tc.prefix) || got == tc.prefix.Addr() || got == broadcast(tc.prefix) {
				t.Fatalf("nextFree gave a reserved address %v", got)
			}
		})
	}
}

// A pod's address comes back only after every other one was handed out.
func TestNextFreeRoundRobin(t *testing.T) {
	p := netip.MustParsePrefix("10.42.0.0/28") // pods: .2 .. .14
	used := map[netip.Addr]bool{}
	var last netip.Addr
	var order []netip.Addr
	for range 30 {
		ip, ok := nextFree(p, last, func(a netip.Addr) bool { return used[a] })
		if !ok {
			t.Fatal("no free address")
		}
		used[ip] = true
		last = ip
		order = append(order, ip)
		delete(used, ip) // freed at once
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("address %v handed out twice in a row", order[i])
		}
	}
	if order[0] != netip.MustParseAddr("10.42.0.2") || order[13] != order[0] {
		t.Fatalf("order %v: want .2 .. .14 then .2 again", order)
	}
}

func TestCheckPodCIDR(t *testing.T) {
	cluster := DefaultClusterCIDR
	for in, want := range map[string]string{
		"10.42.3.0/24": "",
		"10.42.0.0/16": "",
		"10.42.3.1/24": "host bits",
		"10.43.0.0/24": "not inside",
		"10.0.0.0/8":   "not inside",
		"10.42.3.0/31": "too small",
	} {
		err := checkPodCIDR(netip.MustParsePrefix(in), cluster)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("checkPodCIDR(%s) = %v; want %q", in, err, want)
		}
	}
	if err := checkPodCIDR(netip.Prefix{}, cluster); err == nil {
		t.Error("checkPodCIDR(zero): no error")
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{NodeIP: netip.MustParseAddr("192.168.1.10"), StateDir: "/var/lib/isle/podnet"}
	c, err := good.validate(true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bridge != "isle0" || c.ClusterCIDR != DefaultClusterCIDR || c.Logger == nil {
		t.Errorf("defaults not filled: %+v", c)
	}
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"no NodeIP":              {func(c *Config) { c.NodeIP = netip.Addr{} }, "NodeIP"},
		"IPv6 NodeIP":            {func(c *Config) { c.NodeIP = netip.MustParseAddr("fd00::1") }, "NodeIP"},
		"NodeIP in cluster":      {func(c *Config) { c.NodeIP = netip.MustParseAddr("10.42.0.9") }, "inside ClusterCIDR"},
		"relative StateDir":      {func(c *Config) { c.StateDir = "state" }, "StateDir"},
		"root StateDir":          {func(c *Config) { c.StateDir = "/" }, "StateDir"},
		"long bridge":            {func(c *Config) { c.Bridge = "averylongbridgename" }, "Bridge"},
		"relative Netns":         {func(c *Config) { c.Netns = "run/ns" }, "Netns"},
		"tiny MTU":               {func(c *Config) { c.MTU = 100 }, "MTU"},
		"cluster with host bits": {func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("10.42.1.0/16") }, "ClusterCIDR"},
	} {
		c := good
		tc.mod(&c)
		if _, err := c.validate(true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validate = %v; want an error about %s", name, err, tc.want)
		}
	}
	if _, err := (Config{StateDir: "/x"}).validate(false); err != nil {
		t.Errorf("validate without NodeIP for Uninstall: %v", err)
	}
}
