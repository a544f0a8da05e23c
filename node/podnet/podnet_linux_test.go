package podnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
	"github.com/isle-cluster/isle/node/pods"
)

var _ pods.Network = (*Network)(nil)

func addrPort(ip netip.Addr, port int) string {
	return netip.AddrPortFrom(ip, uint16(port)).String()
}

func TestTraffic(t *testing.T) {
	l := newLAN(t)
	a, b := l.board(1), l.board(2)
	for _, x := range []*board{a, b} {
		if err := x.net.SetPeers([]Peer{a.peer(), b.peer()}); err != nil {
			t.Fatal(err)
		}
	}
	// Board a filters strictly by default: SetPodCIDR loosens its links.
	if err := netns.Do(a.ns, func() error { return writeSysctl("all", "rp_filter", "1") }); err != nil {
		t.Fatal(err)
	}
	if err := a.net.SetPodCIDR(a.cidr); err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(a.ns, func() error {
		for _, link := range []string{"eth0", "isle0"} {
			for key, want := range map[string]string{"forwarding": "1", "rp_filter": "2"} {
				if v, err := readSysctl(link, key); err != nil || v != want {
					t.Errorf("%s %s = %q, %v; want %s", link, key, v, err, want)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := a.attach("a1"), a.attach("a2"), b.attach("b1")
	for _, p := range []*pod{a1, a2, b1} {
		nstest.ServeTCP(t, p.ns, ":80", p.key)
		nstest.ServeUDP(t, p.ns, ":53", p.key)
	}
	nstest.ServeTCP(t, a.ns, addrPort(a.ip, 7000), a.name)
	nstest.ServeTCP(t, b.ns, addrPort(b.ip, 7000), b.name)

	saw := func(server string, ip netip.Addr) string { return server + " saw " + ip.String() }
	expect(t, "pod to pod across boards", a1.ns, "tcp", addrPort(b1.ip, 80), saw(b1.key, a1.ip))
	expect(t, "pod to pod across boards", a1.ns, "udp", addrPort(b1.ip, 53), saw(b1.key, a1.ip))
	expect(t, "pod to pod back", b1.ns, "tcp", addrPort(a2.ip, 80), saw(a2.key, b1.ip))
	expect(t, "pod to pod on one board", a1.ns, "tcp", addrPort(a2.ip, 80), saw(a2.key, a1.ip))
	expect(t, "pod to pod on one board", a2.ns, "udp", addrPort(a1.ip, 53), saw(a1.key, a2.ip))
	expect(t, "pod to its own board", a1.ns, "tcp", addrPort(a.ip, 7000), saw(a.name, a1.ip))
	expect(t, "pod to another board (masquerade)", a1.ns, "tcp", addrPort(b.ip, 7000), saw(b.name, a.ip))
	expect(t, "board to its pod", a.ns, "tcp", addrPort(a1.ip, 80), saw(a1.key, gateway(a.cidr)))
	expect(t, "board to a pod of another board", a.ns, "tcp", addrPort(b1.ip, 80), saw(b1.key, a.ip))
	expect(t, "board to a pod of another board", b.ns, "udp", addrPort(a2.ip, 53), saw(a2.key, b.ip))

	// The counters of a pod's veth: what it received and sent.
	rx0, tx0, ok := b.net.PodTraffic(b1.uid)
	if !ok || rx0 == 0 || tx0 == 0 {
		t.Fatalf("b1's traffic after the connections: rx %d tx %d ok %v", rx0, tx0, ok)
	}
	expect(t, "pod to pod across boards", a1.ns, "tcp", addrPort(b1.ip, 80), saw(b1.key, a1.ip))
	if rx, tx, _ := b.net.PodTraffic(b1.uid); rx <= rx0 || tx <= tx0 {
		t.Errorf("b1's traffic after another connection: rx %d→%d tx %d→%d", rx0, rx, tx0, tx)
	}
	if _, _, ok := b.net.PodTraffic("no-such-pod"); ok {
		t.Error("a pod without a veth has traffic")
	}

	// The pod's side: eth0 with the LAN's MTU, default route via the gateway.
	ph := nstest.Handle(t, a1.ns)
	eth0, err := ph.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if eth0.Attrs().MTU != 1500 {
		t.Errorf("pod eth0 MTU %d; want the LAN's 1500", eth0.Attrs().MTU)
	}
	routes, err := ph.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	def := false
	for _, r := range routes {
		def = def || prefixOf(r.Dst).Bits() == 0 && r.Gw.Equal(gateway(a.cidr).AsSlice())
	}
	if !def {
		t.Errorf("pod routes %v: no default route via %v", routes, gateway(a.cidr))
	}

	// Detach is idempotent, also once the namespace is gone.
	if err := a.net.Detach(t.Context(), a2.uid, a2.ns); err != nil {
		t.Fatal(err)
	}
	if !unreachable(a1.ns, "tcp", addrPort(a2.ip, 80)) {
		t.Error("a detached pod is still reachable")
	}
	if err := netns.Delete(a2.ns); err != nil {
		t.Fatal(err)
	}
	if err := a.net.Detach(t.Context(), a2.uid, a2.ns); err != nil {
		t.Errorf("second Detach: %v", err)
	}
	if l, err := linkOrNil(a.h, vethName(a2.uid)); err != nil || l != nil {
		t.Errorf("veth of a detached pod: %v, %v", l, err)
	}
}

func TestHostPort(t *testing.T) {
	l := newLAN(t)
	a, b := l.board(1), l.board(2)
	for _, x := range []*board{a, b} {
		if err := x.net.SetPeers([]Peer{a.peer(), b.peer()}); err != nil {
			t.Fatal(err)
		}
	}
	web := b.attach("web",
		corev1.ContainerPort{ContainerPort: 80, HostPort: 8080},
		corev1.ContainerPort{ContainerPort: 53, HostPort: 8053, Protocol: corev1.ProtocolUDP})
	nstest.ServeTCP(t, web.ns, ":80", "web")
	nstest.ServeUDP(t, web.ns, ":53", "web")
	only := b.attach("only", corev1.ContainerPort{ContainerPort: 80, HostPort: 9090, HostIP: b.ip.String()})
	nstest.ServeTCP(t, only.ns, ":80", "only")
	local := b.attach("local", corev1.ContainerPort{ContainerPort: 80, HostPort: 9191, HostIP: "127.0.0.1"})
	nstest.ServeTCP(t, local.ns, ":80", "local")
	a1, b2 := a.attach("a1"), b.attach("b2")

	bWeb := addrPort(b.ip, 8080)
	expect(t, "from another board", a.ns, "tcp", bWeb, "web saw "+a.ip.String())
	expect(t, "from another board", a.ns, "udp", addrPort(b.ip, 8053), "web saw "+a.ip.String())
	expect(t, "from the board itself", b.ns, "tcp", bWeb, "web saw "+b.ip.String())
	expect(t, "from a pod of another board", a1.ns, "tcp", bWeb, "web saw "+a.ip.String())
	expect(t, "from a pod of the same board", b2.ns, "tcp", bWeb, "web saw "+gateway(b.cidr).String())
	expect(t, "from the pod itself (hairpin)", web.ns, "tcp", bWeb, "web saw "+gateway(b.cidr).String())
	expect(t, "hostIP", a.ns, "tcp", addrPort(b.ip, 9090), "only saw "+a.ip.String())
	if !unreachable(b.ns, "tcp", addrPort(gateway(b.cidr), 9090)) {
		t.Error("hostPort with a hostIP answered on another address")
	}
	// hostIP 127.0.0.1, reached from the board with its LAN address as the
	// source (upstream's "no conflict between pods with same hostPort but
	// different hostIP" test: curl --interface).
	if got, err := askFrom(b.ns, b.ip, addrPort(netip.MustParseAddr("127.0.0.1"), 9191)); err != nil || got != "local saw "+b.ip.String() {
		t.Errorf("hostIP 127.0.0.1 from %v: %q, %v; want local saw %v", b.ip, got, err, b.ip)
	}
	if !unreachable(a.ns, "tcp", addrPort(b.ip, 9191)) {
		t.Error("hostPort with hostIP 127.0.0.1 answered on the LAN")
	}

	// Conflicts.
	p := newPod("clash", corev1.ContainerPort{ContainerPort: 80, HostPort: 8080})
	path := nstest.NS(t, t.TempDir(), "clash")
	_, err := b.net.Attach(t.Context(), p, path)
	if err == nil || !strings.Contains(err.Error(), "8080") || !strings.Contains(err.Error(), web.key) {
		t.Fatalf("Attach of a pod whose hostPort is taken = %v; want an error naming the port and %s", err, web.key)
	}
	if _, err := os.Stat(filepath.Join(b.cfg.StateDir, recordName(p.UID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Attach left a record: %v", err)
	}
	p.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP // 8080/UDP is free
	if _, err := b.net.Attach(t.Context(), p, path); err != nil {
		t.Errorf("Attach of 8080/UDP next to 8080/TCP: %v", err)
	}

	// Detach removes the mapping.
	if err := b.net.Detach(t.Context(), web.uid, web.ns); err != nil {
		t.Fatal(err)
	}
	if !unreachable(a.ns, "tcp", bWeb) {
		t.Error("hostPort of a detached pod answered")
	}
	p2 := newPod("next", corev1.ContainerPort{ContainerPort: 80, HostPort: 8080})
	if _, err := b.net.Attach(t.Context(), p2, nstest.NS(t, t.TempDir(), "next")); err != nil {
		t.Errorf("Attach of a freed hostPort: %v", err)
	}
}

func TestAllocator(t *testing.T) {
	l := newLAN(t)
	b := l.board(3)
	if _, err := b.net.Attach(t.Context(), newPod("hostnet"), "/nonexistent"); err == nil {
		t.Error("Attach to a missing namespace: no error")
	}

	var (
		mu    sync.Mutex
		live  = map[netip.Addr]string{}
		given []netip.Addr
	)
	take := func(name string, ip netip.Addr) {
		mu.Lock()
		defer mu.Unlock()
		if other, ok := live[ip]; ok {
			t.Errorf("%v handed to %s while %s holds it", ip, name, other)
		}
		live[ip] = name
		given = append(given, ip)
	}
	for i := range 3 { // pods that stay
		p := b.attach(fmt.Sprintf("stay%d", i))
		take(p.key, p.ip)
	}
	const workers, cycles = 4, 50
	var wg sync.WaitGroup
	for w := range workers {
		path := nstest.NS(t, t.TempDir(), fmt.Sprintf("w%d", w))
		wg.Go(func() {
			for c := range cycles {
				p := newPod(fmt.Sprintf("w%d-c%d", w, c))
				ips, err := b.net.Attach(t.Context(), p, path)
				if err != nil {
					t.Error(err)
					return
				}
				ip := netip.MustParseAddr(ips[0])
				take(p.Name, ip)
				mu.Lock()
				delete(live, ip)
				mu.Unlock()
				if err := b.net.Detach(t.Context(), p.UID, path); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// 203 addresses of 253: round robin never came back to one.
	seen := map[netip.Addr]bool{}
	for _, ip := range given {
		if seen[ip] {
			t.Errorf("%v handed out twice in %d Attaches", ip, len(given))
		}
		seen[ip] = true
	}
	if len(given) != 3+workers*cycles {
		t.Errorf("%d addresses given; want %d", len(given), 3+workers*cycles)
	}
	links, err := b.h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	veths := 0
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Alias, aliasPrefix+" pod") {
			veths++
		}
	}
	if veths != 3 {
		t.Errorf("%d veths of pods; want 3 (those that stay)", veths)
	}
	if recs, _ := filepath.Glob(filepath.Join(b.cfg.StateDir, "pod-*.json")); len(recs) != 3 {
		t.Errorf("%d records; want 3", len(recs))
	}
	if got := testutil.ToFloat64(b.net.Collector()); got != 3 {
		t.Errorf("addresses allocated gauge %v; want 3", got)
	}
}

func TestRestart(t *testing.T) {
	l := newLAN(t)
	b := l.board(4)
	kept := b.attach("kept", corev1.ContainerPort{ContainerPort: 80, HostPort: 8080})
	nstest.ServeTCP(t, kept.ns, ":80", "kept")
	gone := b.attach("gone")
	veth, err := b.h.LinkByName(vethName(kept.uid))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := b.h.LinkGetProtinfo(veth); err != nil || !p.Hairpin {
		t.Errorf("the pod's bridge port is not in hairpin mode (%+v, %v): a pod cannot reach itself through its Service", p, err)
	}

	// A new CIDR while pods hold addresses: refused, nothing changed.
	if err := b.net.SetPodCIDR(netip.MustParsePrefix("10.42.40.0/24")); err == nil || !strings.Contains(err.Error(), "2 attached pods") {
		t.Errorf("SetPodCIDR to another CIDR = %v; want an error naming a pod", err)
	}
	if br, err := b.h.LinkByName("isle0"); err != nil {
		t.Fatal(err)
	} else if addrs, err := b.h.AddrList(br, netlink.FAMILY_V4); err != nil || len(addrs) != 1 || prefixOf(addrs[0].IPNet) != netip.PrefixFrom(gateway(b.cidr), 24) {
		t.Errorf("bridge addresses after a refused SetPodCIDR: %v, %v; want %v alone", addrs, err, gateway(b.cidr))
	}

	// The agent stops; a pod's namespace goes meanwhile.
	b.net.Close()
	if err := netns.Delete(gone.ns); err != nil {
		t.Fatal(err)
	}
	b.start()
	if _, err := os.Stat(filepath.Join(b.cfg.StateDir, recordName(gone.uid))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of a pod whose namespace is gone was not released: %v", err)
	}
	if _, err := b.net.Attach(t.Context(), newPod("early"), kept.ns); !errors.Is(err, ErrNoPodCIDR) {
		t.Errorf("Attach before SetPodCIDR = %v; want ErrNoPodCIDR", err)
	}
	if err := b.net.SetPodCIDR(b.cidr); err != nil {
		t.Fatal(err)
	}
	expect(t, "hostPort after a restart", b.ns, "tcp", addrPort(b.ip, 8080), "kept saw "+b.ip.String())

	ips, err := b.net.Attach(t.Context(), newPod("kept", corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}), kept.ns)
	if err != nil {
		t.Fatal(err)
	}
	if ips[0] != kept.ip.String() {
		t.Errorf("Attach after a restart = %v; want the same %v", ips, kept.ip)
	}
	if v, err := b.h.LinkByName(vethName(kept.uid)); err != nil || v.Attrs().Index != veth.Attrs().Index {
		t.Errorf("Attach after a restart replaced the veth: %v, %v", v, err)
	}
	expect(t, "pod after a restart", b.ns, "tcp", addrPort(kept.ip, 80), "kept saw "+gateway(b.cidr).String())

	next := b.attach("next")
	if want := gone.ip.Next(); next.ip != want {
		t.Errorf("first address after a restart %v; want %v (after the last handed out, not the one freed)", next.ip, want)
	}

	// A pod whose eth0 is gone (half-made) is repaired.
	ph := nstest.Handle(t, next.ns)
	eth0, err := ph.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ph.LinkDel(eth0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.net.Attach(t.Context(), newPod("next"), next.ns); err != nil {
		t.Fatal(err)
	}
	nstest.ServeTCP(t, next.ns, ":80", "next")
	expect(t, "repaired pod", b.ns, "tcp", addrPort(next.ip, 80), "next saw "+gateway(b.cidr).String())
}

func TestBadState(t *testing.T) {
	nstest.RequireRoot(t, needsRoot)
	dir := t.TempDir()
	cfg := Config{NodeIP: netip.MustParseAddr("10.99.0.10"), StateDir: dir, Netns: nstest.NS(t, dir, "board")}
	bad := filepath.Join(dir, "pod-u-1.json")
	if err := os.WriteFile(bad, []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".pod-u-2.json.77.tmp")
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("New with a corrupt record = %v; want an error naming %s", err, bad)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a temporary file left by a crash is still there: %v", err)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Errorf("the corrupt record was dropped: %v", err)
	}
	cfg.Netns = filepath.Join(dir, "none")
	os.Remove(bad)
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("New in a missing namespace = %v; want an error", err)
	}
}

func TestPeers(t *testing.T) {
	l := newLAN(t)
	a := l.board(1)
	pf := netip.MustParsePrefix
	ad := netip.MustParseAddr
	eth0, err := a.h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	// Routes that are not ours: one to a CIDR no peer has, one to a
	// peer's.
	for _, dst := range []string{"10.42.200.0/24", "10.42.9.0/24"} {
		r := &netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: ipNet(pf(dst)), Gw: ad("10.99.0.99").AsSlice(), Protocol: 4}
		if err := a.h.RouteAdd(r); err != nil {
			t.Fatal(err)
		}
	}
	foreign := func() {
		t.Helper()
		routes, err := a.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: 4}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes) != 2 {
			t.Errorf("foreign routes %v; want both left alone", routes)
		}
	}
	b := Peer{"b", ad("10.99.0.12"), pf("10.42.2.0/24")}
	c := Peer{"c", ad("10.99.0.13"), pf("10.42.3.0/24")}
	invalid := []Peer{
		{"outside", ad("10.99.0.14"), pf("10.50.0.0/24")},
		{"ours", ad("10.99.0.15"), pf("10.42.1.128/25")},
		{"hostbits", ad("10.99.0.16"), pf("10.42.4.1/24")},
		{"far", ad("192.168.5.5"), pf("10.42.5.0/24")},
		{"taken", ad("10.99.0.17"), pf("10.42.9.0/24")},
	}
	check := func(what string, want map[string]string) {
		t.Helper()
		got := a.ourRoutes()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: routes %v; want %v", what, got, want)
		}
		foreign()
	}

	if err := a.net.SetPeers(append([]Peer{b, c, a.peer()}, invalid...)); err != nil {
		t.Fatal(err)
	}
	check("add", map[string]string{"10.42.2.0/24": "10.99.0.12", "10.42.3.0/24": "10.99.0.13"})
	for _, p := range invalid {
		if n := strings.Count(a.log.String(), "peer="+p.Name+" "); n != 1 {
			t.Errorf("peer %s skipped with %d warnings; want 1", p.Name, n)
		}
	}
	if err := a.net.SetPeers(append([]Peer{b, c}, invalid...)); err != nil {
		t.Fatal(err)
	}
	for _, p := range invalid {
		if n := strings.Count(a.log.String(), "peer="+p.Name+" "); n != 1 {
			t.Errorf("peer %s: %d warnings after the same peers again; want still 1", p.Name, n)
		}
	}

	c.Addr = ad("10.99.0.23")
	if err := a.net.SetPeers([]Peer{b, c}); err != nil {
		t.Fatal(err)
	}
	check("replace", map[string]string{"10.42.2.0/24": "10.99.0.12", "10.42.3.0/24": "10.99.0.23"})
	// The agent restarts: the routes stay while it does not know its
	// peers yet (its pods keep talking to the other boards' pods).
	a.net.Close()
	a.start()
	if err := a.net.SetPodCIDR(a.cidr); err != nil {
		t.Fatal(err)
	}
	check("restart, peers not known yet", map[string]string{"10.42.2.0/24": "10.99.0.12", "10.42.3.0/24": "10.99.0.23"})
	if err := a.net.SetPeers([]Peer{c}); err != nil {
		t.Fatal(err)
	}
	check("remove one", map[string]string{"10.42.3.0/24": "10.99.0.23"})
	if err := a.net.SetPeers(nil); err != nil {
		t.Fatal(err)
	}
	check("remove all", map[string]string{})
}

func TestUninstall(t *testing.T) {
	l := newLAN(t)
	a, b := l.board(1), l.board(2)
	if err := a.net.SetPeers([]Peer{b.peer()}); err != nil {
		t.Fatal(err)
	}
	p := a.attach("web", corev1.ContainerPort{ContainerPort: 80, HostPort: 8080})
	a.attach("db")
	if got := a.ourRoutes(); len(got) != 1 {
		t.Fatalf("routes before Uninstall: %v", got)
	}
	a.net.Close()
	if err := Uninstall(Config{StateDir: a.cfg.StateDir, Netns: a.ns}); err != nil {
		t.Fatal(err)
	}

	links, err := a.h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Name != "lo" && l.Attrs().Name != "eth0" {
			t.Errorf("link %s (%s, alias %q) left", l.Attrs().Name, l.Type(), l.Attrs().Alias)
		}
	}
	if got := a.ourRoutes(); len(got) != 0 {
		t.Errorf("routes left: %v", got)
	}
	tables, err := nstest.NFTables(t, a.ns).ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		t.Errorf("nftables table %s left", tb.Name)
	}
	if _, err := os.Stat(a.cfg.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state left: %v", err)
	}
	if err := netns.Do(a.ns, func() error {
		for _, key := range []string{"forwarding", "rp_filter"} {
			if v, err := readSysctl("eth0", key); err != nil || v != "0" {
				return fmt.Errorf("LAN link %s = %q, %v; want it restored to 0", key, v, err)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if l, err := nstest.Handle(t, p.ns).LinkByName("eth0"); err == nil {
		t.Errorf("pod eth0 left: %v", l.Attrs())
	}
	if err := Uninstall(Config{StateDir: a.cfg.StateDir, Netns: a.ns}); err != nil {
		t.Errorf("second Uninstall: %v", err)
	}
}
