package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/node/netns/nstest"
	"github.com/isle-cluster/isle/node/proxy"
)

// The Service rules measure, in a namespace of the test's own: the
// timings are there and the table holds an endpoint chain per endpoint
// (timeSyncs checks it against the kernel's table).
func TestTimeSyncs(t *testing.T) {
	ns := testNS(t)
	nstest.RequireNetfilter(t)
	cfg := proxy.Config{Netns: ns, NodeName: "bench", PodCIDR: rulesPodCIDR, Logger: slog.New(slog.DiscardHandler)}
	got, err := timeSyncs(context.Background(), cfg, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.change) != 3 || len(got.rewrite) != 2 {
		t.Fatalf("%d change and %d rewrite timings, want 3 and 2", len(got.change), len(got.rewrite))
	}
	for _, d := range append(got.change, got.rewrite...) {
		if d <= 0 {
			t.Errorf("a Sync took %v", d)
		}
	}
	// timeSyncs closed its Proxy: the table is gone.
	if err := checkEndpointChains(ns, 0); err != nil {
		t.Errorf("after timeSyncs: %v", err)
	}
	if _, err := timeSyncs(context.Background(), cfg, ruleEndpoints+1, 1); err == nil || !strings.Contains(err.Error(), "at most 100") {
		t.Errorf("more changes than endpoints: %v", err)
	}
}

func TestRuleObjects(t *testing.T) {
	eps := ruleEndpointList()
	if len(eps) != ruleEndpoints || eps[0].Addresses[0] != "10.42.1.10" || eps[99].Addresses[0] != "10.42.1.109" {
		t.Fatalf("endpoints %s .. %s, %d of them", eps[0].Addresses, eps[len(eps)-1].Addresses, len(eps))
	}
	s := ruleSlices(eps)[0]
	eps[0].Addresses = []string{"10.42.2.1"}
	if s.Endpoints[0].Addresses[0] != "10.42.1.10" {
		t.Error("the slice shares its endpoints with the caller's list")
	}
	if s.Labels["kubernetes.io/service-name"] != ruleService().Name || *s.Ports[0].Name != ruleService().Spec.Ports[0].Name {
		t.Errorf("the slice %v does not belong to the Service %s", s.ObjectMeta, ruleService().Name)
	}
}

// The NetworkPolicy rules measure: every update timed, every pod of the
// namespace isolated both ways (timePolicySyncs checks the kernel's
// table), the table gone with its Policies.
func TestTimePolicySyncs(t *testing.T) {
	ns := testNS(t)
	nstest.RequireNetfilter(t)
	cfg := proxy.Config{Netns: ns, NodeName: "bench", PodCIDR: rulesPodCIDR, Logger: slog.New(slog.DiscardHandler)}
	update, cpu, err := timePolicySyncs(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(update) != policyUpdates || len(cpu) != policyUpdates {
		t.Fatalf("%d update and %d CPU timings, want %d", len(update), len(cpu), policyUpdates)
	}
	if err := checkPolicyChains(ns, 0); err != nil {
		t.Errorf("after timePolicySyncs: %v", err)
	}
}
