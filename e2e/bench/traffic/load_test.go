package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// testNS is a network namespace of the test's own, with only its loopback.
func testNS(t *testing.T) string {
	t.Helper()
	nstest.RequireRoot(t, "makes a network namespace")
	return nstest.NS(t, t.TempDir(), "ns")
}

// cpuMeasured says whether this process's CPU time can be read: qemu-user
// answers /proc/PID/stat for its guest with zeros (the native run of the
// tests reads the real one).
func cpuMeasured() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] >= "A"
}

// The HTTP load over the loopback of a namespace of the test's own, with
// the real dialer and a hello-like server in that namespace.
func TestMeasureHTTP(t *testing.T) {
	ns := testNS(t)
	var l net.Listener
	if err := netns.Do(ns, func() (err error) {
		l, err = net.Listen("tcp", "127.0.0.1:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wrong" {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello from test\n")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	paths := []path{
		// The CPU time of this process, client and server.
		{name: "direct", ns: ns, url: "http://127.0.0.1:8080/hello", body: "hello from test\n", cpu: procCPU(os.Getpid())},
		{name: "wrong", ns: ns, url: "http://127.0.0.1:8080/wrong", body: "hello from test\n"},
	}
	const d = 200 * time.Millisecond
	res, err := measureHTTP(context.Background(), paths, 2, 3, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].name != "direct" || res[1].name != "wrong" || len(res[0].trials) != 2 || len(res[1].trials) != 2 {
		t.Fatalf("results %+v, want two paths of two rounds each", res)
	}
	for _, tr := range res[0].trials {
		if tr.errors != 0 || tr.ok < 10 || tr.took < d || tr.p50 <= 0 || tr.p99 < tr.p50 || tr.p99 > time.Second || tr.cpu <= 0 && cpuMeasured() {
			t.Errorf("a round over loopback: %+v", tr)
		}
	}
	for _, tr := range res[1].trials {
		// The three connections' untimed first requests count too.
		if tr.ok != 0 || tr.errors < 3 || !errors.Is(tr.firstErr, errWrongAnswer) || !strings.Contains(tr.firstErr.Error(), "503") || tr.cpu != 0 {
			t.Errorf("a round of wrong answers: %+v", tr)
		}
	}
	r := results{paths: res}
	if err := r.failures(); err == nil || !strings.Contains(err.Error(), "the wrong path") {
		t.Errorf("failures: %v, want the wrong path's", err)
	}
}

func TestProcCPU(t *testing.T) {
	if d, err := procCPU(os.Getpid())(); err != nil || d < 0 {
		t.Errorf("this process's CPU time: %v, %v", d, err)
	}
	if _, err := procCPU(-1)(); err == nil {
		t.Error("the CPU time of process -1: no error")
	}
}

func TestLoadEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := load(ctx, 2, time.Hour, func() (client, error) { return stuck{}, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("load with an ended context: %v, want context.Canceled", err)
	}
	if _, err := load(context.Background(), 2, time.Second, func() (client, error) { return nil, errors.New("no client") }); err == nil {
		t.Fatal("load whose clients cannot be made succeeded")
	}
}

// stuck is a client whose requests fail with the context's error.
type stuck struct{}

func (stuck) do(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (stuck) close()                       {}

// The DNS load against a server in a namespace of the test's own.
func TestDNSClient(t *testing.T) {
	ns := testNS(t)
	var pc net.PacketConn
	if err := netns.Do(ns, func() (err error) {
		pc, err = net.ListenPacket("udp", "127.0.0.1:53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	svc := netip.MustParseAddr("10.43.0.57")
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Name == serviceName {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: serviceName, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: svc.AsSlice()}}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })

	server := netip.MustParseAddrPort("127.0.0.1:53")
	for _, c := range []struct {
		name    string
		qname   string
		want    netip.Addr
		wantErr string
	}{
		{"the Service's address", serviceName, svc, ""},
		{"another address", serviceName, netip.MustParseAddr("10.43.0.58"), "want A 10.43.0.58"},
		{"a name the server does not know", "nothing.default.svc.cluster.local.", svc, "NXDOMAIN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := load(context.Background(), 2, 100*time.Millisecond, func() (client, error) {
				return newDNSClient(context.Background(), ns, server, c.qname, c.want)
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.wantErr == "" {
				if tr.errors != 0 || tr.ok < 10 || tr.p50 <= 0 {
					t.Fatalf("queries: %+v (%v)", tr, tr.firstErr)
				}
				return
			}
			if tr.ok != 0 || tr.firstErr == nil || !strings.Contains(tr.firstErr.Error(), c.wantErr) {
				t.Fatalf("queries: %d ok, first error %v; want none ok and %q", tr.ok, tr.firstErr, c.wantErr)
			}
		})
	}
}
