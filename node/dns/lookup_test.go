package dns

import (
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func fixtureTable(t *testing.T) *table {
	t.Helper()
	svcs, eps := fixture()
	return buildTable("cluster.local", 42, []netip.Addr{netip.MustParseAddr("10.42.3.1")}, svcs, eps, slog.New(slog.DiscardHandler))
}

const soa = "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 7200 1800 86400 5"

func TestLookup(t *testing.T) {
	tab := fixtureTable(t)
	for _, tc := range []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string
		extra  []string
		noSOA  bool // a positive answer, or a reverse name: no SOA in authority
	}{
		{name: "cluster IP", qname: "web.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.default.svc.cluster.local. 5 IN A 10.43.0.20"}, noSOA: true},
		{name: "case of the question kept", qname: "WEB.Default.SVC.cluster.LOCAL.", qtype: dns.TypeA,
			answer: []string{"WEB.Default.SVC.cluster.LOCAL. 5 IN A 10.43.0.20"}, noSOA: true},
		{name: "AAAA of an IPv4 service is NODATA", qname: "web.default.svc.cluster.local.", qtype: dns.TypeAAAA},
		{name: "MX of a service is NODATA", qname: "web.default.svc.cluster.local.", qtype: dns.TypeMX},
		{name: "headless: only ready endpoints", qname: "db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{
				"db.default.svc.cluster.local. 5 IN A 10.42.1.5",
				"db.default.svc.cluster.local. 5 IN A 10.42.1.8",
				"db.default.svc.cluster.local. 5 IN A 10.42.2.6",
			}, noSOA: true},
		{name: "headless hostname", qname: "db-0.db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"db-0.db.default.svc.cluster.local. 5 IN A 10.42.1.5"}, noSOA: true},
		{name: "headless endpoint without hostname", qname: "10-42-2-6.db.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-42-2-6.db.default.svc.cluster.local. 5 IN A 10.42.2.6"}, noSOA: true},
		{name: "hostname of a not ready endpoint", qname: "db-2.db.default.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError},
		{name: "headless without ready endpoints is NXDOMAIN", qname: "empty.default.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError},
		{name: "SRV of a cluster IP service", qname: "_http._tcp.web.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local."},
			extra:  []string{"web.default.svc.cluster.local. 5 IN A 10.43.0.20"}, noSOA: true},
		{name: "SRV by protocol", qname: "_dns._udp.kube-dns.kube-system.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_dns._udp.kube-dns.kube-system.svc.cluster.local. 5 IN SRV 0 100 53 kube-dns.kube-system.svc.cluster.local."},
			extra:  []string{"kube-dns.kube-system.svc.cluster.local. 5 IN A 10.43.0.10"}, noSOA: true},
		{name: "SRV of the wrong protocol", qname: "_dns._tcp.kube-dns.kube-system.svc.cluster.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError},
		{name: "SRV of a headless service: the slice's port, per endpoint", qname: "_pg._tcp.db.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 33 5432 10-42-1-8.db.default.svc.cluster.local.",
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 33 5432 10-42-2-6.db.default.svc.cluster.local.",
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 33 5432 db-0.db.default.svc.cluster.local.",
			},
			extra: []string{
				"10-42-1-8.db.default.svc.cluster.local. 5 IN A 10.42.1.8",
				"10-42-2-6.db.default.svc.cluster.local. 5 IN A 10.42.2.6",
				"db-0.db.default.svc.cluster.local. 5 IN A 10.42.1.5",
			}, noSOA: true},
		{name: "A of an SRV name is NODATA", qname: "_pg._tcp.db.default.svc.cluster.local.", qtype: dns.TypeA},
		{name: "empty non-terminal _tcp is NODATA", qname: "_tcp.db.default.svc.cluster.local.", qtype: dns.TypeA},
		{name: "namespace is NODATA", qname: "default.svc.cluster.local.", qtype: dns.TypeA},
		{name: "ExternalName", qname: "ext.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"ext.default.svc.cluster.local. 5 IN CNAME example.com."}, noSOA: true},
		{name: "ExternalName asked for CNAME", qname: "ext.default.svc.cluster.local.", qtype: dns.TypeCNAME,
			answer: []string{"ext.default.svc.cluster.local. 5 IN CNAME example.com."}, noSOA: true},
		{name: "unknown service", qname: "nope.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "unknown namespace", qname: "web.nope.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "name under a service that does not exist", qname: "x.web.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "unknown name of the domain", qname: "foo.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "pod name", qname: "10-42-3-9.default.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-42-3-9.default.pod.cluster.local. 5 IN A 10.42.3.9"}, noSOA: true},
		{name: "pod name AAAA is NODATA", qname: "10-42-3-9.default.pod.cluster.local.", qtype: dns.TypeAAAA},
		{name: "pod name, IPv6", qname: "fd00--9.default.pod.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"fd00--9.default.pod.cluster.local. 5 IN AAAA fd00::9"}, noSOA: true},
		{name: "pod name out of range", qname: "10-42-3-256.default.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "pod name with too few parts", qname: "10-42-3.default.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "pod name not an address", qname: "web.default.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "pod name too deep", qname: "10-42-3-9.a.default.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "pod namespace is NODATA", qname: "default.pod.cluster.local.", qtype: dns.TypeA},
		{name: "SOA of the domain", qname: "cluster.local.", qtype: dns.TypeSOA, answer: []string{soa}, noSOA: true},
		{name: "NS of the domain", qname: "Cluster.Local.", qtype: dns.TypeNS,
			answer: []string{"Cluster.Local. 5 IN NS ns.dns.cluster.local."},
			extra:  []string{"ns.dns.cluster.local. 5 IN A 10.42.3.1"}, noSOA: true},
		{name: "A of the domain is NODATA", qname: "cluster.local.", qtype: dns.TypeA},
		{name: "dns-version", qname: "dns-version.cluster.local.", qtype: dns.TypeTXT,
			answer: []string{`dns-version.cluster.local. 5 IN TXT "1.1.0"`}, noSOA: true},
		{name: "PTR of a cluster IP", qname: "20.0.43.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"20.0.43.10.in-addr.arpa. 5 IN PTR web.default.svc.cluster.local."}, noSOA: true},
		{name: "PTR of a headless endpoint with a hostname", qname: "5.1.42.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"5.1.42.10.in-addr.arpa. 5 IN PTR db-0.db.default.svc.cluster.local."}, noSOA: true},
		{name: "PTR of a headless endpoint without", qname: "6.2.42.10.IN-ADDR.ARPA.", qtype: dns.TypePTR,
			answer: []string{"6.2.42.10.IN-ADDR.ARPA. 5 IN PTR 10-42-2-6.db.default.svc.cluster.local."}, noSOA: true},
		{name: "A of a known reverse name is NODATA", qname: "20.0.43.10.in-addr.arpa.", qtype: dns.TypeA, noSOA: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := tab.lookup(dns.Question{Name: tc.qname, Qtype: tc.qtype, Qclass: dns.ClassINET}, 0)
			if !ok {
				t.Fatalf("lookup %s: not the table's", tc.qname)
			}
			if r.rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", rcodeName(r.rcode), rcodeName(tc.rcode))
			}
			if got := rrStrings(r.answer); !slices.Equal(got, tc.answer) {
				t.Errorf("answer\n%q\nwant\n%q", got, tc.answer)
			}
			if got := rrStrings(r.extra); !slices.Equal(got, tc.extra) {
				t.Errorf("extra\n%q\nwant\n%q", got, tc.extra)
			}
			var wantNs []string
			if !tc.noSOA {
				wantNs = []string{soa}
			}
			if got := rrStrings(r.ns); !slices.Equal(got, wantNs) {
				t.Errorf("authority %q, want %q", got, wantNs)
			}
			if !r.auth {
				t.Error("AA not set")
			}
		})
	}
}

func TestLookupNotOurs(t *testing.T) {
	tab := fixtureTable(t)
	for _, q := range []dns.Question{
		{Name: "example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET},
		{Name: "local.", Qtype: dns.TypeSOA, Qclass: dns.ClassINET},
		{Name: "xcluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET},
		{Name: "9.9.43.10.in-addr.arpa.", Qtype: dns.TypePTR, Qclass: dns.ClassINET},       // a cluster IP nobody holds
		{Name: "7.3.42.10.in-addr.arpa.", Qtype: dns.TypePTR, Qclass: dns.ClassINET},       // an endpoint not ready
		{Name: "4.4.42.10.in-addr.arpa.", Qtype: dns.TypePTR, Qclass: dns.ClassINET},       // an endpoint of a normal service
		{Name: "web.default.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassCHAOS}, // another class
	} {
		if r, ok := tab.lookup(q, 0); ok {
			t.Errorf("lookup %s %s: answered %s %q, want it forwarded", q.Name, dns.TypeToString[q.Qtype], rcodeName(r.rcode), rrStrings(r.answer))
		}
	}
}

func TestLookupRotates(t *testing.T) {
	tab := fixtureTable(t)
	q := dns.Question{Name: "db.default.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	first := map[string]bool{}
	for rot := range uint32(3) {
		r, _ := tab.lookup(q, rot+1<<31) // past the int32 range of arm
		if len(r.answer) != 3 {
			t.Fatalf("rot %d: %d answers, want 3", rot, len(r.answer))
		}
		first[r.answer[0].(*dns.A).A.String()] = true
	}
	if len(first) != 3 {
		t.Errorf("first addresses over three rotations: %v, want all three", first)
	}
}

func TestBuildTableSkipsBadInput(t *testing.T) {
	bad := service("default", "Bad_Name", "10.43.0.30")
	badIP := service("default", "badip", "10.43.0.300")
	badHost := service("default", "badhost", "None")
	ports := service("default", "ports", "10.43.0.31", port("a-port-name-longer-than-fifteen", corev1.ProtocolTCP, 1), port("Bad_Port", corev1.ProtocolTCP, 2))
	pns := service("default", "pns", "None")
	pns.Spec.PublishNotReadyAddresses = true
	slicesIn := []*discoveryv1.EndpointSlice{
		endpointSlice("default", "badhost", "bh", nil, endpoint("10.42.1.1", "", "Not_A_Label"), endpoint("not-an-ip", "", "")),
		endpointSlice("default", "pns", "p", nil, endpoint("10.42.1.2", "no", "")),
		nil,
	}
	fqdn := endpointSlice("default", "badhost", "fq", nil, endpoint("example.com", "", ""))
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	slicesIn = append(slicesIn, fqdn)
	tab := buildTable("cluster.local", 1, nil, []*corev1.Service{bad, badIP, badHost, pns, ports, nil}, slicesIn, slog.New(slog.DiscardHandler))

	if _, ok := tab.names["bad_name.default.svc.cluster.local."]; ok {
		t.Error("a service with a bad name has records")
	}
	if n := tab.names["badip.default.svc.cluster.local."]; n == nil || len(n.addrs) != 0 {
		t.Errorf("service with a bad cluster IP: node %+v, want one with no address", n)
	}
	if n := tab.names["badhost.default.svc.cluster.local."]; n == nil || !slices.Equal(n.addrs, []netip.Addr{netip.MustParseAddr("10.42.1.1")}) {
		t.Errorf("headless with a bad hostname and a bad address: node %+v, want 10.42.1.1 alone", n)
	}
	if _, ok := tab.names["10-42-1-1.badhost.default.svc.cluster.local."]; !ok {
		t.Error("endpoint with a bad hostname is not named by its address")
	}
	if n := tab.names["_a-port-name-longer-than-fifteen._tcp.ports.default.svc.cluster.local."]; n == nil || len(n.srvs) != 1 {
		t.Errorf("port with a long name (a DNS label, as the API takes it): node %+v, want an SRV record", n)
	}
	if _, ok := tab.names["_bad_port._tcp.ports.default.svc.cluster.local."]; ok {
		t.Error("port with a bad name has an SRV record")
	}
	if n := tab.names["pns.default.svc.cluster.local."]; n == nil || len(n.addrs) != 1 {
		t.Errorf("publishNotReadyAddresses: node %+v, want the not ready endpoint", n)
	}
}

func TestReverseAddr(t *testing.T) {
	for name, want := range map[string]string{
		"4.3.2.1.in-addr.arpa.": "1.2.3.4",
		"b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa.": "4321:0:1:2:3:4:567:89ab",
		"04.3.2.1.in-addr.arpa.":  "",
		"256.3.2.1.in-addr.arpa.": "",
		"3.2.1.in-addr.arpa.":     "",
		"1.0.ip6.arpa.":           "",
		"example.com.":            "",
	} {
		a, ok := reverseAddr(name)
		if got := a.String(); ok != (want != "") || ok && got != want {
			t.Errorf("reverseAddr(%s) = %s, %v; want %q", name, got, ok, want)
		}
	}
}
