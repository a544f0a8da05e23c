package dns

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

var quiet = slog.New(slog.DiscardHandler)

// startServer starts a server on a free port of 127.0.0.1 and returns it
// with its address.
func startServer(t testing.TB, upstreams ...string) (*Server, string) {
	t.Helper()
	return startServerWith(t, func(*Server) {}, upstreams...)
}

// startServerWith is startServer that lets prep change the server before
// it starts.
func startServerWith(t testing.TB, prep func(*Server), upstreams ...string) (*Server, string) {
	t.Helper()
	s, err := New(Config{Addrs: []string{"127.0.0.1:0"}, Upstreams: upstreams, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	prep(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, s.boundAddrs()[0]
}

func exchange(t testing.TB, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %v: %v", network, addr, m.Question, err)
	}
	if r.Id != m.Id {
		t.Fatalf("answer id %d, want %d", r.Id, m.Id)
	}
	return r
}

func ask(t testing.TB, network, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return exchange(t, network, addr, m)
}

// stub is an upstream resolver of the tests, on UDP and TCP, that counts
// the questions it gets:
//
//	example.org.      A 192.0.2.1, TTL 60
//	example.com.      A 192.0.2.7
//	big.example.org.  truncated over UDP; 50 A records over TCP
//	fail.example.org. SERVFAIL
//	anything else     NXDOMAIN with an SOA of minimum 30
type stub struct {
	addr    string
	queries atomic.Int32
	tcp     atomic.Int32
}

func startStub(t *testing.T) *stub {
	t.Helper()
	st := &stub{}
	pc, l, err := listenPair("127.0.0.1:0") // the same port on UDP and TCP
	if err != nil {
		t.Fatal(err)
	}
	st.addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc}, {Listener: l}} {
		var up sync.WaitGroup
		up.Add(1)
		srv.NotifyStartedFunc = up.Done
		srv.Handler = dns.HandlerFunc(st.serve)
		go srv.ActivateAndServe()
		up.Wait()
		t.Cleanup(func() { srv.Shutdown() })
	}
	return st
}

func (st *stub) serve(w dns.ResponseWriter, req *dns.Msg) {
	st.queries.Add(1)
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	if tcp {
		st.tcp.Add(1)
	}
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		return r
	}
	switch name := strings.ToLower(q.Name); {
	case name == "example.org." && q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{rr(q.Name + " 60 IN A 192.0.2.1")}
	case name == "example.com." && q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{rr(q.Name + " 60 IN A 192.0.2.7")}
	case name == "big.example.org." && !tcp:
		m.Truncated = true
	case name == "big.example.org.":
		for i := range 50 {
			m.Answer = append(m.Answer, rr(fmt.Sprintf("%s 60 IN A 192.0.2.%d", q.Name, i+1)))
		}
	case name == "fail.example.org.":
		m.Rcode = dns.RcodeServerFailure
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{rr("org. 600 IN SOA ns.org. h.org. 1 2 3 4 30")}
	}
	w.WriteMsg(m)
}

// deadAddr is a loopback UDP address nobody listens on: queries to it are
// refused at once.
func deadAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

func TestForward(t *testing.T) {
	st := startStub(t)
	s, addr := startServer(t, st.addr)

	t.Run("answer of the upstream", func(t *testing.T) {
		r := ask(t, "udp", addr, "ExAmple.ORG.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
			t.Fatalf("answer %v", r)
		}
		if r.Question[0].Name != "ExAmple.ORG." {
			t.Errorf("question %s, want the case of the client", r.Question[0].Name)
		}
		if !r.RecursionAvailable || r.Authoritative {
			t.Errorf("RA %v AA %v, want RA and not AA", r.RecursionAvailable, r.Authoritative)
		}
	})
	t.Run("cache hit", func(t *testing.T) {
		before := st.queries.Load()
		r := ask(t, "tcp", addr, "example.org.", dns.TypeA)
		if len(r.Answer) != 1 || r.Answer[0].Header().Ttl > 60 {
			t.Fatalf("answer %v", r)
		}
		if n := st.queries.Load() - before; n != 0 {
			t.Errorf("upstream asked %d times, want 0", n)
		}
		if n := testutil.ToFloat64(s.m.cacheHits); n != 1 {
			t.Errorf("cache hits %v, want 1", n)
		}
	})
	t.Run("NXDOMAIN passed through and cached", func(t *testing.T) {
		before := st.queries.Load()
		for range 2 {
			r := ask(t, "udp", addr, "nx.example.org.", dns.TypeA)
			if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
				t.Fatalf("answer %v, want NXDOMAIN with the SOA", r)
			}
		}
		if n := st.queries.Load() - before; n != 1 {
			t.Errorf("upstream asked %d times, want 1", n)
		}
	})
	t.Run("truncated upstream answer asked again over TCP", func(t *testing.T) {
		r := ask(t, "tcp", addr, "big.example.org.", dns.TypeA)
		if len(r.Answer) != 50 || r.Truncated {
			t.Fatalf("%d answers, truncated %v; want 50", len(r.Answer), r.Truncated)
		}
		if st.tcp.Load() != 1 {
			t.Errorf("upstream asked over TCP %d times, want 1", st.tcp.Load())
		}
	})
	t.Run("SERVFAIL of the upstream", func(t *testing.T) {
		if r := ask(t, "udp", addr, "fail.example.org.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode %s, want SERVFAIL", rcodeName(r.Rcode))
		}
	})
	t.Run("reverse name of an address the table does not hold", func(t *testing.T) {
		before := st.queries.Load()
		if r := ask(t, "udp", addr, "99.0.43.10.in-addr.arpa.", dns.TypePTR); r.Rcode != dns.RcodeNameError {
			t.Errorf("rcode %s, want the upstream's NXDOMAIN", rcodeName(r.Rcode))
		}
		if st.queries.Load() == before {
			t.Error("upstream not asked")
		}
	})
}

func TestForwardFailures(t *testing.T) {
	t.Run("upstream down", func(t *testing.T) {
		_, addr := startServer(t, deadAddr(t))
		if r := ask(t, "udp", addr, "example.org.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode %s, want SERVFAIL", rcodeName(r.Rcode))
		}
	})
	t.Run("no upstream", func(t *testing.T) {
		_, addr := startServer(t)
		if r := ask(t, "udp", addr, "example.org.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode %s, want SERVFAIL", rcodeName(r.Rcode))
		}
	})
	t.Run("next upstream after an error and a timeout", func(t *testing.T) {
		silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { silent.Close() })
		st := startStub(t)
		s, addr := startServerWith(t, func(s *Server) { s.fwd.udp.Timeout = 200 * time.Millisecond },
			deadAddr(t), silent.LocalAddr().String(), st.addr)
		r := ask(t, "udp", addr, "example.org.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("answer %v", r)
		}
		if n := testutil.ToFloat64(s.m.forwardErrors); n != 2 {
			t.Errorf("forward errors %v, want 2", n)
		}
	})
}

func TestCluster(t *testing.T) {
	st := startStub(t)
	s, addr := startServer(t, st.addr)
	s.Update(fixture())

	for _, network := range []string{"udp", "tcp"} {
		r := ask(t, network, addr, "Web.Default.svc.cluster.local.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.43.0.20" {
			t.Fatalf("%s: answer %v", network, r)
		}
		if r.Question[0].Name != "Web.Default.svc.cluster.local." || !r.Authoritative || !r.RecursionAvailable {
			t.Errorf("%s: question %s AA %v RA %v; want the client's case, AA and RA", network, r.Question[0].Name, r.Authoritative, r.RecursionAvailable)
		}
	}
	r := ask(t, "udp", addr, "web.default.svc.cluster.local.", dns.TypeAAAA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("AAAA: %v, want NODATA with the SOA", r)
	}
	r = ask(t, "udp", addr, "nope.default.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("unknown: %v, want NXDOMAIN with the SOA", r)
	}
	r = ask(t, "udp", addr, "_pg._tcp.db.default.svc.cluster.local.", dns.TypeSRV)
	if len(r.Answer) != 3 || len(r.Extra) != 3 {
		t.Errorf("headless SRV: %v, want 3 SRV with their A records", r)
	}

	before := st.queries.Load()
	r = ask(t, "udp", addr, "ext.default.svc.cluster.local.", dns.TypeA)
	if got := rrStrings(r.Answer); len(got) != 2 || got[0] != "ext.default.svc.cluster.local. 5 IN CNAME example.com." || !strings.HasSuffix(got[1], "IN A 192.0.2.7") {
		t.Errorf("ExternalName: %q, want the CNAME and the upstream's A", got)
	}
	if st.queries.Load() != before+1 {
		t.Error("upstream not asked for the ExternalName's target")
	}
	r = ask(t, "udp", addr, "alias.default.svc.cluster.local.", dns.TypeA)
	if got := rrStrings(r.Answer); len(got) != 2 || got[1] != "web.default.svc.cluster.local. 5 IN A 10.43.0.20" {
		t.Errorf("ExternalName in the cluster: %q, want the CNAME and the service's A", got)
	}
	if st.queries.Load() != before+1 {
		t.Error("upstream asked for a cluster name")
	}
	r = ask(t, "udp", addr, "ext.default.svc.cluster.local.", dns.TypeCNAME)
	if len(r.Answer) != 1 {
		t.Errorf("ExternalName asked for CNAME: %q, want the CNAME alone", rrStrings(r.Answer))
	}
}

func TestExternalNameWithoutUpstream(t *testing.T) {
	s, addr := startServer(t)
	s.Update(fixture())
	r := ask(t, "udp", addr, "ext.default.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("%v, want the CNAME alone", r)
	}
}

// bigHeadless is a headless service with n ready endpoints.
func bigHeadless(n int) ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	var eps []discoveryv1.Endpoint
	for i := range n {
		eps = append(eps, endpoint(fmt.Sprintf("10.42.%d.%d", i/200, i%200+2), "", fmt.Sprintf("big-%d", i)))
	}
	return []*corev1.Service{service("default", "big", "None")},
		[]*discoveryv1.EndpointSlice{endpointSlice("default", "big", "big-a", nil, eps...)}
}

func TestTruncation(t *testing.T) {
	s, addr := startServer(t)
	s.Update(bigHeadless(100))
	const name = "big.default.svc.cluster.local."

	plain := ask(t, "udp", addr, name, dns.TypeA)
	if !plain.Truncated || len(plain.Answer) == 0 || len(plain.Answer) >= 100 {
		t.Errorf("UDP: TC %v, %d answers; want TC and some", plain.Truncated, len(plain.Answer))
	}
	plain.Compress = true
	if n := plain.Len(); n > dns.MinMsgSize {
		t.Errorf("UDP: %d bytes, want at most %d", n, dns.MinMsgSize)
	}

	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(4096, false)
	edns := exchange(t, "udp", addr, m)
	if !edns.Truncated || len(edns.Answer) <= len(plain.Answer) || edns.IsEdns0() == nil {
		t.Errorf("UDP with EDNS0: TC %v, %d answers, OPT %v; want TC, more than %d, OPT", edns.Truncated, len(edns.Answer), edns.IsEdns0() != nil, len(plain.Answer))
	}
	edns.Compress = true
	if n := edns.Len(); n > ednsSize {
		t.Errorf("UDP with EDNS0: %d bytes, want at most %d", n, ednsSize)
	}

	full := ask(t, "tcp", addr, name, dns.TypeA)
	if full.Truncated || len(full.Answer) != 100 {
		t.Errorf("TCP: TC %v, %d answers; want 100", full.Truncated, len(full.Answer))
	}
}

func TestBadQueries(t *testing.T) {
	_, addr := startServer(t)
	q := dns.Question{Name: "web.default.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	for _, tc := range []struct {
		name  string
		edit  func(m *dns.Msg)
		rcode int
	}{
		{"no question", func(m *dns.Msg) { m.Question = nil }, dns.RcodeFormatError},
		{"two questions", func(m *dns.Msg) { m.Question = append(m.Question, q) }, dns.RcodeFormatError},
		{"an answer in the query", func(m *dns.Msg) {
			m.Answer = []dns.RR{&dns.A{Hdr: hdr(q.Name, dns.TypeA), A: net.IPv4(1, 2, 3, 4)}}
		}, dns.RcodeFormatError},
		{"opcode NOTIFY", func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }, dns.RcodeNotImplemented},
		{"opcode UPDATE", func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }, dns.RcodeNotImplemented},
		{"EDNS version 1", func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }, dns.RcodeBadVers},
		{"zone transfer", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAXFR }, dns.RcodeRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.Id = dns.Id()
			m.Question = []dns.Question{q}
			tc.edit(m)
			if r := exchange(t, "udp", addr, m); r.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", rcodeName(r.Rcode), rcodeName(tc.rcode))
			}
		})
	}
}

func TestUpdateWhileQuerying(t *testing.T) {
	s, addr := startServer(t)
	tables := [2][]*corev1.Service{
		{service("default", "web", "10.43.0.20")},
		{service("default", "web", "10.43.0.21")},
	}
	s.Update(tables[0], nil)
	var (
		wg   sync.WaitGroup
		stop atomic.Bool
	)
	for range 4 {
		wg.Go(func() {
			c := &dns.Client{Timeout: 5 * time.Second}
			for !stop.Load() {
				m := new(dns.Msg)
				m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
				r, _, err := c.Exchange(m, addr)
				if err != nil {
					t.Error(err)
					return
				}
				if len(r.Answer) != 1 {
					t.Errorf("answer %v, want one A", r)
					return
				}
				if ip := r.Answer[0].(*dns.A).A.String(); ip != "10.43.0.20" && ip != "10.43.0.21" {
					t.Errorf("A %s", ip)
					return
				}
			}
		})
	}
	for i := range 300 {
		s.Update(tables[i%2], nil)
	}
	stop.Store(true)
	wg.Wait()
	s.Update(tables[1], nil)
	if r := ask(t, "udp", addr, "web.default.svc.cluster.local.", dns.TypeA); r.Answer[0].(*dns.A).A.String() != "10.43.0.21" {
		t.Errorf("after the last Update: %v", r.Answer)
	}
}

func TestMetrics(t *testing.T) {
	s, addr := startServer(t)
	s.Update(fixture())
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	ask(t, "udp", addr, "web.default.svc.cluster.local.", dns.TypeA)
	ask(t, "udp", addr, "nope.default.svc.cluster.local.", dns.TypeA)
	ask(t, "udp", addr, "web.default.svc.cluster.local.", dns.TypeNSEC3PARAM)
	ask(t, "udp", addr, "example.org.", dns.TypeA) // no upstream
	m := new(dns.Msg)
	m.Id = dns.Id()
	exchange(t, "udp", addr, m) // no question

	for labels, want := range map[[2]string]float64{
		{"A", "NOERROR"}:     1,
		{"A", "NXDOMAIN"}:    1,
		{"other", "NOERROR"}: 1,
		{"A", "SERVFAIL"}:    1,
		{"none", "FORMERR"}:  1,
	} {
		if got := testutil.ToFloat64(s.m.queries.WithLabelValues(labels[0], labels[1])); got != want {
			t.Errorf("queries %v: %v, want %v", labels, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "isle_dns_request_duration_seconds"); err != nil || n != 2 {
		t.Errorf("duration series: %d (%v), want cluster and error", n, err)
	}
	if testutil.ToFloat64(s.m.cacheMisses) != 1 {
		t.Errorf("cache misses %v, want 1", testutil.ToFloat64(s.m.cacheMisses))
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"defaults", Config{Addrs: []string{"10.42.3.1:53"}}, ""},
		{"no address", Config{}, "Addrs: want at least one"},
		{"address without port", Config{Addrs: []string{"10.42.3.1"}}, `Addrs[0] "10.42.3.1"`},
		{"host name", Config{Addrs: []string{"localhost:53"}}, `Addrs[0] "localhost:53"`},
		{"bad domain", Config{Addrs: []string{"10.42.3.1:53"}, Domain: "a..b"}, `Domain "a..b"`},
		{"upstream without port", Config{Addrs: []string{"10.42.3.1:53"}, Upstreams: []string{"1.1.1.1"}}, `Upstreams[0] "1.1.1.1"`},
		{"upstream is ourselves", Config{Addrs: []string{"10.42.3.1:53"}, Upstreams: []string{"10.42.3.1:53"}}, "forward to itself"},
		{"negative cache", Config{Addrs: []string{"10.42.3.1:53"}, CacheSize: -1}, "CacheSize -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "":
				if s.cfg.Domain != "cluster.local" || s.cfg.CacheSize != 1000 || s.cfg.Logger == nil {
					t.Errorf("defaults not filled: %+v", s.cfg)
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
	s, err := New(Config{Addrs: []string{"10.42.3.1:53"}, Domain: "Isle.Example."})
	if err != nil || s.table.Load().domain != "isle.example." {
		t.Errorf("domain Isle.Example.: %v, table of %q", err, s.table.Load().domain)
	}
}

func TestStartAndClose(t *testing.T) {
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// The first address is a port found free (UDP), which another test
	// process may take (UDP or TCP) before the server binds it: then it
	// is tried again with another.
	for try := 1; ; try++ {
		free := deadAddr(t)
		s, err := New(Config{Addrs: []string{free, taken.LocalAddr().String()}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start()
		if err != nil && strings.Contains(err.Error(), free) && try < 5 {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), taken.LocalAddr().String()) {
			t.Fatalf("start with a taken address: %v, want an error naming it", err)
		}
		// The first address was released when the second failed.
		pc, err := net.ListenPacket("udp", free)
		if err != nil {
			t.Fatalf("first address still bound: %v", err)
		}
		pc.Close()
		break
	}

	s, addr := startServer(t)
	if err := s.Start(); err == nil {
		t.Error("second Start did not fail")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp", "tcp"} {
		var err error
		if network == "udp" {
			var pc net.PacketConn
			if pc, err = net.ListenPacket(network, addr); err == nil {
				pc.Close()
			}
		} else {
			var l net.Listener
			if l, err = net.Listen(network, addr); err == nil {
				l.Close()
			}
		}
		if err != nil {
			t.Errorf("%s %s still bound after Close: %v", network, addr, err)
		}
	}
}

// BenchmarkQuery measures a cluster A query over UDP on loopback, one
// client socket.
func BenchmarkQuery(b *testing.B) {
	s, addr := startServer(b)
	s.Update(fixture())
	c := &dns.Client{Timeout: 5 * time.Second}
	conn, err := c.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	b.ReportAllocs()
	for b.Loop() {
		m.Id = dns.Id()
		r, _, err := c.ExchangeWithConn(m, conn)
		if err != nil || len(r.Answer) != 1 {
			b.Fatalf("%v %v", r, err)
		}
	}
}
