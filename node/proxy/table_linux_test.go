package proxy

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables/expr"
	corev1 "k8s.io/api/core/v1"
)

// The table model, without nftables: which chains, rules and map elements
// a plan makes.

var testCfg = Config{NodeName: "n1", ClusterCIDR: DefaultClusterCIDR, PodCIDR: netip.MustParsePrefix("10.42.1.0/24"),
	DNS: DNSRedirect{ServiceIP: netip.MustParseAddr("10.43.0.10"), Target: netip.MustParseAddr("10.42.1.1")}}

func testPort(name string, eps ...string) *svcPort {
	sp := &svcPort{ns: "default", svc: name, name: "http", port: "http", proto: corev1.ProtocolTCP,
		clusterIP: netip.MustParseAddr("10.43.0.20"), servicePort: 80}
	for _, e := range eps {
		local := strings.HasSuffix(e, "*")
		ep := endpoint{addr: netip.MustParseAddrPort(strings.TrimSuffix(e, "*")), local: local}
		sp.all = append(sp.all, ep)
		if local {
			sp.local = append(sp.local, ep)
		}
	}
	return sp
}

func (m *tableModel) chain(name string) *chainModel {
	for _, c := range m.chains {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (m *tableModel) set(name string) *setModel {
	for _, s := range m.sets {
		if s.name == name {
			return s
		}
	}
	return nil
}

// verdicts are the verdicts of a map's elements, in order: "goto CHAIN",
// "drop".
func (m *tableModel) verdicts(set string) []string {
	var out []string
	for _, e := range m.set(set).elems {
		out = append(out, verdictString(e.VerdictData))
	}
	return out
}

func verdictString(v *expr.Verdict) string {
	switch v.Kind {
	case expr.VerdictGoto:
		return "goto " + v.Chain
	case expr.VerdictJump:
		return "jump " + v.Chain
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictReturn:
		return "return"
	}
	return "?"
}

// lastVerdict is the verdict that ends a rule, or "" if none does.
func lastVerdict(r ruleModel) string {
	if v, ok := r.exprs[len(r.exprs)-1].(*expr.Verdict); ok {
		return verdictString(v)
	}
	if l, ok := r.exprs[len(r.exprs)-1].(*expr.Lookup); ok && l.IsDestRegSet {
		return "vmap " + l.SetName
	}
	return ""
}

func chainVerdicts(c *chainModel) []string {
	var out []string
	for _, r := range c.rules {
		out = append(out, lastVerdict(r))
	}
	return out
}

func TestBuildTable(t *testing.T) {
	t.Run("no endpoints: rejected", func(t *testing.T) {
		sp := testPort("web")
		sp.nodePort = 30080
		m := buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		name := portName(sp)
		if m.chain("svc-"+name) != nil || m.chain("ext-"+name) != nil {
			t.Error("a port without endpoints has a service chain")
		}
		if got := m.verdicts(setNoEndpointServices); !slices.Equal(got, []string{"goto reject"}) {
			t.Errorf("no-endpoint-services: %v; want the cluster IP rejected", got)
		}
		if got := m.verdicts(setNoEndpointNodePorts); !slices.Equal(got, []string{"goto reject"}) {
			t.Errorf("no-endpoint-nodeports: %v; want the node port rejected", got)
		}
		if m.chain("cnt-"+name) == nil || !slices.Contains(m.counters, name) {
			t.Error("the port has no counter: it must keep it while it has no endpoints")
		}
	})
	t.Run("internalTrafficPolicy Local without local endpoints: dropped", func(t *testing.T) {
		sp := testPort("web", "10.42.2.5:8080")
		sp.internalLocal = true
		m := buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		if got := m.verdicts(setNoEndpointServices); !slices.Equal(got, []string{"drop"}) {
			t.Errorf("no-endpoint-services: %v; want the cluster IP dropped", got)
		}
	})
	t.Run("externalTrafficPolicy Local", func(t *testing.T) {
		sp := testPort("web", "10.42.1.5:8080*", "10.42.2.5:8080", "10.42.1.6:8080*")
		sp.nodePort, sp.externalLocal = 30080, true
		m := buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		name := portName(sp)
		want := []string{"vmap all-" + name, "jump mark-for-masquerade", "vmap all-" + name, "vmap local-" + name}
		if got := chainVerdicts(m.chain("ext-" + name)); !slices.Equal(got, want) {
			t.Errorf("ext chain: %v; want %v", got, want)
		}
		if got := m.verdicts("local-" + name); len(got) != 2 {
			t.Errorf("local balancing map: %v; want the 2 local endpoints", got)
		}
		sp.local = nil
		m = buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		if got := chainVerdicts(m.chain("ext-" + name)); got[len(got)-1] != "drop" {
			t.Errorf("ext chain without local endpoints: %v; want it to end in drop", got)
		}
	})
	t.Run("one endpoint: no balancing map", func(t *testing.T) {
		sp := testPort("web", "10.42.1.5:8080*")
		m := buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		ep, _ := epNames(sp, sp.all[0])
		want := []string{"jump mark-for-masquerade", "goto " + ep}
		if got := chainVerdicts(m.chain("svc-" + portName(sp))); !slices.Equal(got, want) {
			t.Errorf("svc chain: %v; want %v", got, want)
		}
		if m.set("all-"+portName(sp)) != nil {
			t.Error("a balancing map for one endpoint")
		}
	})
	t.Run("session affinity", func(t *testing.T) {
		sp := testPort("web", "10.42.1.5:8080*", "10.42.2.5:8080")
		sp.affinity = time.Minute
		m := buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		var sets []string
		for _, ep := range sp.all {
			chain, aff := epNames(sp, ep)
			s := m.set(aff)
			if s == nil || s.kind.timeout != time.Minute {
				t.Fatalf("affinity set %s: %+v; want one with a timeout of a minute", aff, s)
			}
			sets = append(sets, aff)
			rules := m.chain(chain).rules
			if d, ok := rules[1].exprs[1].(*expr.Dynset); !ok || d.SetName != aff {
				t.Errorf("endpoint chain %s does not update %s", chain, aff)
			}
		}
		sp.affinity = time.Hour
		m = buildTable(testCfg, true, plan{ports: []*svcPort{sp}})
		for _, name := range sets {
			if m.set(name) != nil {
				t.Errorf("another timeout kept the set %s; want another set", name)
			}
		}
	})
	t.Run("hairpin, and no br_netfilter", func(t *testing.T) {
		sp := testPort("web", "10.42.1.5:8080*", "10.42.2.5:8080")
		for _, bridgeNF := range []bool{true, false} {
			m := buildTable(testCfg, bridgeNF, plan{ports: []*svcPort{sp}})
			for _, ep := range sp.all {
				chain, _ := epNames(sp, ep)
				first := m.chain(chain).rules[0]
				want := ep.addr.Addr()
				if !bridgeNF && testCfg.PodCIDR.Contains(want) {
					want = testCfg.PodCIDR.Addr() // the whole pod CIDR
				}
				cmp := first.exprs[len(first.exprs)-2].(*expr.Cmp)
				if got, _ := netip.AddrFromSlice(cmp.Data); got != want || lastVerdict(first) != "jump mark-for-masquerade" {
					t.Errorf("bridgeNF %v: endpoint %v masquerades sources %v; want %v", bridgeNF, ep.addr, got, want)
				}
			}
		}
	})
	t.Run("an endpoint of two services is counted for the first", func(t *testing.T) {
		a, b := testPort("a", "10.42.1.5:8080"), testPort("b", "10.42.1.5:8080", "10.42.1.6:8080")
		b.clusterIP = netip.MustParseAddr("10.43.0.21")
		m := buildTable(testCfg, true, plan{ports: []*svcPort{a, b}})
		want := []string{"goto cnt-" + portName(a), "goto cnt-" + portName(b)}
		if got := m.verdicts(setEndpointCounters); !slices.Equal(got, want) {
			t.Errorf("endpoint-counters: %v; want %v", got, want)
		}
	})
	t.Run("DNS redirect", func(t *testing.T) {
		m := buildTable(testCfg, true, plan{})
		if got := m.verdicts(setServiceIPs); !slices.Equal(got, []string{"goto cluster-dns", "goto cluster-dns"}) {
			t.Errorf("service-ips: %v; want the DNS IP's udp and tcp 53", got)
		}
		if len(m.chain(chainDNS).rules) != 2 || len(m.set(setClusterIPs).elems) != 1 {
			t.Error("no DNS chain, or its IP not among the cluster IPs")
		}
		cfg := testCfg
		cfg.DNS = DNSRedirect{}
		if m := buildTable(cfg, true, plan{}); m.chain(chainDNS) != nil || len(m.set(setServiceIPs).elems) != 0 {
			t.Error("a DNS redirect without Config.DNS")
		}
	})
}

// hashes are the hashes of the model's chains and sets, by name.
func hashes(m *tableModel) map[string]uint64 {
	h := map[string]uint64{}
	for _, c := range m.chains {
		h["chain "+c.name] = c.hash()
	}
	for _, s := range m.sets {
		h["set "+s.name] = s.hash()
	}
	return h
}

func TestHashesFollowChanges(t *testing.T) {
	web := testPort("web", "10.42.1.5:8080", "10.42.1.6:8080", "10.42.1.7:8080")
	api := testPort("api", "10.42.1.8:8080", "10.42.1.9:8080")
	api.clusterIP = netip.MustParseAddr("10.43.0.21")
	before := hashes(buildTable(testCfg, true, plan{ports: []*svcPort{web, api}}))
	if again := hashes(buildTable(testCfg, true, plan{ports: []*svcPort{web, api}})); !maps.Equal(again, before) {
		t.Fatal("the same plan made other hashes")
	}
	web2 := testPort("web", "10.42.1.5:8080", "10.42.1.6:8080", "10.42.1.10:8080")
	after := hashes(buildTable(testCfg, true, plan{ports: []*svcPort{web2, api}}))
	var changed []string
	for k, h := range after {
		if was, ok := before[k]; !ok || was != h {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k+" (gone)")
		}
	}
	slices.Sort(changed)
	gone, _ := epNames(web, web.all[2])
	added, _ := epNames(web2, web2.all[2])
	want := []string{"chain " + added, "chain " + gone + " (gone)", "set all-" + portName(web), "set " + setEndpointCounters}
	slices.Sort(want)
	if !slices.Equal(changed, want) {
		t.Errorf("replacing an endpoint of web changed:\n%s\nwant:\n%s", strings.Join(changed, "\n"), strings.Join(want, "\n"))
	}
}

func TestNamesFit(t *testing.T) {
	long := strings.Repeat("n", 63)
	sp := &svcPort{ns: long, svc: long, port: "abcdefghijklmno", proto: corev1.ProtocolUDP, affinity: time.Hour}
	chain, aff := epNames(sp, endpoint{addr: netip.MustParseAddrPort("255.255.255.255:65535")})
	for _, name := range []string{chain, aff, "local-" + portName(sp)} {
		if len(name) >= 256 {
			t.Errorf("name %q is %d bytes; nftables takes 255 at most", name, len(name))
		}
	}
	if got := portName(&svcPort{ns: "default", svc: "hello", port: "http", proto: corev1.ProtocolTCP}); !strings.HasPrefix(got, "default/hello/tcp/http-") || len(got) != len("default/hello/tcp/http-")+6 {
		t.Errorf("portName = %q; want default/hello/tcp/http- and 6 hex digits", got)
	}
}
