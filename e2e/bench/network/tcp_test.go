package main

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/node/netns"
)

// The measures over the loopback of a namespace of the test's own (as
// client and server both), against the real listener and dialer.
func TestMeasure(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "" {
			t.Skip("needs root to make a network namespace")
		}
		t.Fatal("needs root to make a network namespace")
	}
	ns := filepath.Join(t.TempDir(), "ns")
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(ns) })
	p := pathPair{name: "loopback", clientNS: ns, serverNS: ns, server: netip.MustParseAddrPort("127.0.0.1:5201")}
	res, err := measure(context.Background(), []pathPair{p}, 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.name != "loopback" || len(r.gbits) != 2 || len(r.rtts) != roundTrips {
		t.Fatalf("got %s: %d throughput runs and %d round trips, want loopback: 2 and %d", r.name, len(r.gbits), len(r.rtts), roundTrips)
	}
	for _, g := range r.gbits {
		if g < 0.01 {
			t.Errorf("throughput %.3f Gbit/s over loopback", g)
		}
	}
	if q := benchkit.Quantile(r.rtts, 0.5); q <= 0 || q > 100*time.Millisecond {
		t.Errorf("median round trip %v over loopback", q)
	}
}
