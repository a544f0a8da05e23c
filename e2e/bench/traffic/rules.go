package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/nftables"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/proxy"
)

// The Service rules measure: a Service of ruleEndpoints endpoints, one of
// them replaced ruleChanges times (as in a rollout), and ruleRewrites
// first Syncs of a new Proxy, which write the whole table.
const (
	ruleEndpoints = 100
	ruleChanges   = 50
	ruleRewrites  = 5
)

// ruleTimes are the times of the Service rules' Syncs: wall clock, and
// the process's CPU time (the kernel's work on the transaction included;
// the bench does nothing else meanwhile), which the wait for the kernel's
// commit does not count.
type ruleTimes struct {
	change, changeCPU   []time.Duration // one endpoint replaced
	rewrite, rewriteCPU []time.Duration // the whole table written
	policy, policyCPU   []time.Duration // a NetworkPolicy update (policies.go)
}

// rulesPodCIDR is the scratch board's pod network.
var rulesPodCIDR = netip.MustParsePrefix("10.42.9.0/24")

// measureRules times the Syncs of node/proxy in a network namespace of
// its own, removed at the end.
func measureRules(ctx context.Context) (_ ruleTimes, err error) {
	dir, err := os.MkdirTemp("", "trafficbench-rules")
	if err != nil {
		return ruleTimes{}, fmt.Errorf("rules: %w", err)
	}
	defer os.RemoveAll(dir)
	ns := filepath.Join(dir, "netns")
	if err := netns.Create(ns); err != nil {
		return ruleTimes{}, fmt.Errorf("rules: %w", err)
	}
	defer func() {
		if derr := netns.Delete(ns); derr != nil {
			err = errors.Join(err, fmt.Errorf("rules: %w", derr))
		}
	}()
	cfg := proxy.Config{Netns: ns, NodeName: "bench", PodCIDR: rulesPodCIDR, Logger: slog.Default()}
	t, err := timeSyncs(ctx, cfg, ruleChanges, ruleRewrites)
	if err != nil {
		return t, err
	}
	t.policy, t.policyCPU, err = timePolicySyncs(ctx, cfg)
	return t, err
}

// timeSyncs syncs a Service of ruleEndpoints endpoints with a Proxy of
// cfg, then times changes (at most ruleEndpoints) Syncs that each replace
// one endpoint, then rewrites Syncs of a new Proxy. It checks the table's
// endpoint chains after the first Sync and the last.
func timeSyncs(ctx context.Context, cfg proxy.Config, changes, rewrites int) (_ ruleTimes, err error) {
	if changes > ruleEndpoints {
		return ruleTimes{}, fmt.Errorf("rules: %d changes: want at most %d, one per endpoint", changes, ruleEndpoints)
	}
	px, err := proxy.New(cfg)
	if err != nil {
		return ruleTimes{}, fmt.Errorf("rules: %w", err)
	}
	defer func() {
		if px == nil {
			return
		}
		if cerr := px.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("rules: %w", cerr)
		}
	}()
	svcs := []*corev1.Service{ruleService()}
	eps := ruleEndpointList()
	if err := px.Sync(svcs, ruleSlices(eps)); err != nil {
		return ruleTimes{}, fmt.Errorf("rules: %w", err)
	}
	if err := checkEndpointChains(cfg.Netns, ruleEndpoints); err != nil {
		return ruleTimes{}, err
	}
	var t ruleTimes
	for i := range changes {
		if err := ctx.Err(); err != nil {
			return ruleTimes{}, fmt.Errorf("rules: %w", err)
		}
		// Endpoint i gets a new address, 10.42.2.(i+1), that no endpoint
		// had.
		eps[i] = ruleEndpoint(netip.AddrFrom4([4]byte{10, 42, 2, byte(1 + i)}))
		slices := ruleSlices(eps)
		cpu, began := selfCPU(), time.Now()
		if err := px.Sync(svcs, slices); err != nil {
			return ruleTimes{}, fmt.Errorf("rules: change %d: %w", i+1, err)
		}
		t.change, t.changeCPU = append(t.change, time.Since(began)), append(t.changeCPU, selfCPU()-cpu)
	}
	if err := checkEndpointChains(cfg.Netns, ruleEndpoints); err != nil {
		return ruleTimes{}, err
	}
	slices := ruleSlices(eps)
	for i := range rewrites {
		if err := px.Close(); err != nil {
			return ruleTimes{}, fmt.Errorf("rules: %w", err)
		}
		next, err := proxy.New(cfg)
		if err != nil {
			px = nil // closed already
			return ruleTimes{}, fmt.Errorf("rules: %w", err)
		}
		px = next
		cpu, began := selfCPU(), time.Now()
		if err := px.Sync(svcs, slices); err != nil {
			return ruleTimes{}, fmt.Errorf("rules: rewrite %d: %w", i+1, err)
		}
		t.rewrite, t.rewriteCPU = append(t.rewrite, time.Since(began)), append(t.rewriteCPU, selfCPU()-cpu)
	}
	return t, checkEndpointChains(cfg.Netns, ruleEndpoints)
}

// selfCPU is the CPU time (user and system) the process has used.
func selfCPU() time.Duration {
	var u unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &u); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err)) // cannot fail with these arguments
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// ruleService is the measured Service: TCP port 80 (http) of cluster IP
// 10.43.0.100.
func ruleService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.100",
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

// ruleEndpointList is the Service's first endpoints: 10.42.1.10 up, on
// another board.
func ruleEndpointList() []discoveryv1.Endpoint {
	eps := make([]discoveryv1.Endpoint, ruleEndpoints)
	for i := range eps {
		eps[i] = ruleEndpoint(netip.AddrFrom4([4]byte{10, 42, 1, byte(10 + i)}))
	}
	return eps
}

// ruleEndpoint is a ready endpoint at addr on board "other".
func ruleEndpoint(addr netip.Addr) discoveryv1.Endpoint {
	yes, no, node := true, false, "other"
	return discoveryv1.Endpoint{Addresses: []string{addr.String()}, NodeName: &node,
		Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no}}
}

// ruleSlices is the Service's one EndpointSlice, of eps (copied) on port
// 8080.
func ruleSlices(eps []discoveryv1.Endpoint) []*discoveryv1.EndpointSlice {
	name, proto, port := "http", corev1.ProtocolTCP, int32(8080)
	return []*discoveryv1.EndpointSlice{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		Endpoints:   append([]discoveryv1.Endpoint(nil), eps...),
	}}
}

// checkEndpointChains checks that the proxy's table in the namespace at
// path holds want endpoint chains (ep-...), one per endpoint: the Syncs
// timed did the work.
func checkEndpointChains(path string, want int) error {
	h, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("rules: namespace %s: %w", path, err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return fmt.Errorf("rules: nftables: %w", err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("rules: nftables: list chains: %w", err)
	}
	n := 0
	for _, ch := range chains {
		if ch.Table.Name == proxy.TableName && strings.HasPrefix(ch.Name, "ep-") {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("rules: table %s holds %d endpoint chains, want %d", proxy.TableName, n, want)
	}
	return nil
}
