package proxy

import (
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// webPorts are the ports of the slices of the service "web": TCP "http"
// and UDP "echo", both 8080 on the pods.
var webPorts = []discoveryv1.EndpointPort{
	slicePortOf("http", corev1.ProtocolTCP, podPort),
	slicePortOf("echo", corev1.ProtocolUDP, podPort),
}

// web is the service "web": TCP 80 (http) and UDP 53 (echo).
func web() *corev1.Service {
	return service("web", serviceIP, tcpPort("http", 80), udpPort("echo", 53))
}

// webNodePort is web as a NodePort service, http on node port 30080.
func webNodePort(policy corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	s := web()
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Spec.ExternalTrafficPolicy = policy
	s.Spec.Ports[0].NodePort = 30080
	return s
}

var (
	webHTTP = netip.AddrPortFrom(serviceIP, 80)
	webEcho = netip.AddrPortFrom(serviceIP, 53)
	webNode = netip.AddrPortFrom(boardIP, 30080)
)

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// servers are the names of the servers that answered.
func servers(byServer map[string]int) map[string]bool {
	return set(slices.Collect(maps.Keys(byServer))...)
}

func TestClusterIP(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c, client := r.pods["a"], r.pods["b"], r.pods["c"], r.pods["client"]
	r.sync([]*corev1.Service{web()},
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName)),
		endpointSlice("web", "web-2", webPorts, ready(c.ip, nodeName)))

	got, saw := hits(t, 60, client.ns, "tcp", webHTTP)
	if !maps.Equal(servers(got), set("a", "b", "c")) {
		t.Errorf("60 connections to %v reached %v; want all of a, b, c", webHTTP, got)
	}
	if want := set(client.ip.String()); !maps.Equal(saw, want) {
		t.Errorf("the endpoints saw %v; want the client pod's own address %v", saw, want)
	}
	got, _ = hits(t, 30, client.ns, "udp", webEcho)
	if len(got) < 2 {
		t.Errorf("30 UDP exchanges with %v reached %v; want several endpoints", webEcho, got)
	}
	// The board's own processes: masqueraded, as their source is outside
	// the cluster CIDR.
	_, saw = hits(t, 5, r.board, "tcp", webHTTP)
	if want := set(bridgeIP.String()); !maps.Equal(saw, want) {
		t.Errorf("from the board, the endpoints saw %v; want %v", saw, want)
	}
}

func TestNotReadyEndpoints(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c, client := r.pods["a"], r.pods["b"], r.pods["c"], r.pods["client"]
	r.sync([]*corev1.Service{web()},
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName), ready(c.ip, nodeName)))
	r.sync([]*corev1.Service{web()},
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), notReady(b.ip, nodeName), terminating(c.ip, nodeName, true)))
	if got, _ := hits(t, 30, client.ns, "tcp", webHTTP); !maps.Equal(servers(got), set("a")) {
		t.Errorf("with b not ready and c terminating, 30 connections reached %v; want a alone", got)
	}
	// No ready endpoint left: the serving terminating ones take over.
	r.sync([]*corev1.Service{web()},
		endpointSlice("web", "web-1", webPorts, terminating(a.ip, nodeName, false), notReady(b.ip, nodeName), terminating(c.ip, nodeName, true)))
	if got, _ := hits(t, 10, client.ns, "tcp", webHTTP); !maps.Equal(servers(got), set("c")) {
		t.Errorf("with c the only serving (terminating) endpoint, 10 connections reached %v; want c alone", got)
	}
}

// refusedFast checks that a TCP connection to addr from ns is refused
// within a second.
func refusedFast(t *testing.T, what, ns string, addr netip.AddrPort) {
	t.Helper()
	start := time.Now()
	_, err := nstest.Ask(ns, "tcp", addr.String(), 2*time.Second)
	if took := time.Since(start); !errors.Is(err, syscall.ECONNREFUSED) || took > time.Second {
		t.Errorf("%s: connecting to %v: %v after %v; want ECONNREFUSED within a second", what, addr, err, took)
	}
}

// dropped checks that a TCP connection to addr from ns gets no answer.
func dropped(t *testing.T, what, ns string, addr netip.AddrPort) {
	t.Helper()
	_, err := nstest.Ask(ns, "tcp", addr.String(), 700*time.Millisecond)
	if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: connecting to %v: %v; want no answer (a timeout)", what, addr, err)
	}
}

func TestNoEndpointsRefused(t *testing.T) {
	r := newRig(t, "a", "client")
	client := r.pods["client"]
	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyCluster)},
		endpointSlice("web", "web-1", webPorts, notReady(r.pods["a"].ip, nodeName)))
	refusedFast(t, "cluster IP without endpoints", client.ns, webHTTP)
	refusedFast(t, "node port without endpoints", r.client, webNode)
	refusedFast(t, "cluster IP without endpoints, from the board", r.board, webHTTP)
	refusedFast(t, "a port the cluster IP does not have", client.ns, netip.AddrPortFrom(serviceIP, 81))

	_, err := nstest.Ask(client.ns, "udp", webEcho.String(), time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("UDP to %v without endpoints: %v; want ECONNREFUSED", webEcho, err)
	}
	// Once there is an endpoint, it answers.
	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyCluster)},
		endpointSlice("web", "web-1", webPorts, ready(r.pods["a"].ip, nodeName)))
	if _, err := dial(client.ns, "tcp", webHTTP); err != nil {
		t.Errorf("with a ready endpoint: %v", err)
	}
}

func TestNodePort(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c := r.pods["a"], r.pods["b"], r.pods["c"]
	slice := endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName), ready(c.ip, otherNode))

	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyCluster)}, slice)
	got, saw := hits(t, 40, r.client, "tcp", webNode)
	if !maps.Equal(servers(got), set("a", "b", "c")) {
		t.Errorf("externalTrafficPolicy Cluster: 40 connections to %v reached %v; want a, b and c", webNode, got)
	}
	if want := set(bridgeIP.String()); !maps.Equal(saw, want) {
		t.Errorf("externalTrafficPolicy Cluster: the endpoints saw %v; want the board's %v (masqueraded)", saw, want)
	}

	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyLocal)}, slice)
	got, saw = hits(t, 40, r.client, "tcp", webNode)
	if !maps.Equal(servers(got), set("a", "b")) {
		t.Errorf("externalTrafficPolicy Local: 40 connections to %v reached %v; want a and b, the local ones", webNode, got)
	}
	if want := set(clientIP.String()); !maps.Equal(saw, want) {
		t.Errorf("externalTrafficPolicy Local: the endpoints saw %v; want the client's own %v", saw, want)
	}
	// An external IP, routed to the board, is served as the node port.
	ext := webNodePort(corev1.ServiceExternalTrafficPolicyCluster)
	extIP := netip.MustParseAddr("192.168.50.1")
	ext.Spec.ExternalIPs = []string{extIP.String()}
	r.sync([]*corev1.Service{ext}, slice)
	r.check(nstest.Handle(t, r.client).RouteAdd(&netlink.Route{Dst: &net.IPNet{IP: extIP.AsSlice(), Mask: net.CIDRMask(32, 32)}, Gw: boardIP.AsSlice()}))
	if got, saw := hits(t, 20, r.client, "tcp", netip.AddrPortFrom(extIP, 80)); len(got) < 2 || !maps.Equal(saw, set(bridgeIP.String())) {
		t.Errorf("the external IP: reached %v, seen as %v; want several endpoints seeing the board's %v", got, saw, bridgeIP)
	}
	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyLocal)}, slice)

	// The cluster IP of the service still uses every endpoint.
	if got, _ := hits(t, 40, r.pods["client"].ns, "tcp", webHTTP); !maps.Equal(servers(got), set("a", "b", "c")) {
		t.Errorf("externalTrafficPolicy Local: 40 connections to the cluster IP reached %v; want a, b and c", got)
	}

	// No local endpoint: traffic from outside is dropped; pods still get
	// through, to any endpoint.
	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyLocal)},
		endpointSlice("web", "web-1", webPorts, ready(c.ip, otherNode)))
	dropped(t, "externalTrafficPolicy Local without local endpoints", r.client, webNode)
	if line, err := dial(r.pods["client"].ns, "tcp", webNode); err != nil || line != "c saw "+r.pods["client"].ip.String() {
		t.Errorf("externalTrafficPolicy Local without local endpoints, from a pod: %q, %v; want c seeing the pod", line, err)
	}
}

func TestHairpin(t *testing.T) {
	r := newRig(t, "a")
	a := r.pods["a"]
	r.sync([]*corev1.Service{web()}, endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName)))
	line, err := dial(a.ns, "tcp", webHTTP)
	if want := "a saw " + bridgeIP.String(); err != nil || line != want {
		t.Errorf("a pod reaching itself through its service: %q, %v; want %q", line, err, want)
	}
	line, err = dial(a.ns, "udp", webEcho)
	if want := "a saw " + bridgeIP.String(); err != nil || line != want {
		t.Errorf("a pod reaching itself through its service over UDP: %q, %v; want %q", line, err, want)
	}
}

func TestSessionAffinity(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c, client := r.pods["a"], r.pods["b"], r.pods["c"], r.pods["client"]
	sticky := web()
	sticky.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	r.sync([]*corev1.Service{sticky},
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName), ready(c.ip, nodeName)))
	got, _ := hits(t, 20, client.ns, "tcp", webHTTP)
	if len(got) != 1 {
		t.Fatalf("with ClientIP affinity, 20 connections from one client reached %v; want one endpoint", got)
	}
	var first string
	for first = range got {
	}
	// Another endpoint goes and another Service comes: the client still
	// sticks to its endpoint.
	var keep []discoveryv1.Endpoint
	for _, p := range []*pod{a, b, c} {
		if p.name == first || len(keep) == 0 {
			keep = append(keep, ready(p.ip, nodeName))
		}
	}
	other := service("other", netip.MustParseAddr("10.43.0.30"), tcpPort("http", 80))
	r.sync([]*corev1.Service{sticky, other},
		endpointSlice("web", "web-1", webPorts, keep...),
		endpointSlice("other", "other-1", webPorts, ready(a.ip, nodeName)))
	if got, _ := hits(t, 10, client.ns, "tcp", webHTTP); !maps.Equal(servers(got), set(first)) {
		t.Errorf("after an update, 10 connections reached %v; want %s still", got, first)
	}
	// The client that stuck is the only one: another client may land elsewhere.
	if got, _ := hits(t, 20, a.ns, "tcp", webHTTP); len(got) != 1 {
		t.Errorf("20 connections from pod a reached %v; want one endpoint", got)
	}
}

func TestInternalTrafficPolicyLocal(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c, client := r.pods["a"], r.pods["b"], r.pods["c"], r.pods["client"]
	local := web()
	local.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	r.sync([]*corev1.Service{local},
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, otherNode), ready(c.ip, otherNode)))
	if got, _ := hits(t, 30, client.ns, "tcp", webHTTP); !maps.Equal(servers(got), set("a")) {
		t.Errorf("internalTrafficPolicy Local: 30 connections reached %v; want a, the local one", got)
	}
	r.sync([]*corev1.Service{local},
		endpointSlice("web", "web-1", webPorts, ready(b.ip, otherNode), ready(c.ip, otherNode)))
	dropped(t, "internalTrafficPolicy Local without local endpoints", client.ns, webHTTP)
}

// chains of the service web on the rig, by role.
func webChains(r *rig) (svc, epA, epB, epC string) {
	sp := &svcPort{ns: "default", svc: "web", port: "http", proto: corev1.ProtocolTCP}
	ep := func(name string) string {
		chain, _ := epNames(sp, endpoint{addr: netip.AddrPortFrom(r.pods[name].ip, podPort)})
		return chain
	}
	return "svc-" + portName(sp), ep("a"), ep("b"), ep("c")
}

func TestIncrementalSync(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c := r.pods["a"], r.pods["b"], r.pods["c"]
	other := service("other", netip.MustParseAddr("10.43.0.30"), tcpPort("http", 80))
	otherSlice := endpointSlice("other", "other-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName))
	otherSP := &svcPort{ns: "default", svc: "other", port: "http", proto: corev1.ProtocolTCP}
	otherEP, _ := epNames(otherSP, endpoint{addr: netip.AddrPortFrom(a.ip, podPort)})
	otherChains := []string{"svc-" + portName(otherSP), "cnt-" + portName(otherSP), otherEP}
	svc, epA, epB, epC := webChains(r)

	r.sync([]*corev1.Service{web(), other}, otherSlice,
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName), ready(c.ip, nodeName)))
	before := map[string][]uint64{}
	for _, ch := range append(otherChains, svc, epA, epB, epC, chainServices) {
		before[ch] = r.rules(ch)
		if len(before[ch]) == 0 {
			t.Fatalf("chain %s has no rules", ch)
		}
	}
	// Nothing changes: nothing is written.
	r.sync([]*corev1.Service{web(), other}, otherSlice,
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName), ready(c.ip, nodeName)))
	for ch, hs := range before {
		if got := r.rules(ch); !slices.Equal(got, hs) {
			t.Errorf("a Sync without changes rewrote chain %s: rule handles %v, were %v", ch, got, hs)
		}
	}
	// web loses c: its service chain is rewritten and c's chain goes;
	// the rest stays as it was.
	r.sync([]*corev1.Service{web(), other}, otherSlice,
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName)))
	for _, ch := range append(otherChains, epA, epB, chainServices) {
		if got := r.rules(ch); !slices.Equal(got, before[ch]) {
			t.Errorf("a change of web rewrote chain %s: rule handles %v, were %v", ch, got, before[ch])
		}
	}
	if got := r.rules(svc); slices.Equal(got, before[svc]) {
		t.Errorf("chain %s kept its rules %v; want them rewritten (2 endpoints, not 3)", svc, got)
	}
	chains, err := nstest.NFTables(t, r.board).ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	r.check(err)
	for _, ch := range chains {
		if ch.Name == epC {
			t.Errorf("chain %s of the endpoint gone is still there", epC)
		}
	}
	if got, _ := hits(t, 30, r.pods["client"].ns, "tcp", webHTTP); !maps.Equal(servers(got), set("a", "b")) {
		t.Errorf("after the change, 30 connections reached %v; want a and b", got)
	}
}

func TestFailedSyncRewritesAll(t *testing.T) {
	r := newRig(t, "a", "b", "client")
	a, b, client := r.pods["a"], r.pods["b"], r.pods["client"]
	other := service("other", netip.MustParseAddr("10.43.0.30"), tcpPort("http", 80))
	otherSlice := endpointSlice("other", "other-1", webPorts, ready(b.ip, nodeName))
	r.sync([]*corev1.Service{web(), other}, otherSlice, endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName)))

	// Someone removes the table: the next change fails, as the chains it
	// would change are gone...
	r.check(deleteTable(nstest.NFTables(t, r.board), TableName))
	if err := r.px.Sync([]*corev1.Service{web(), other}, []*discoveryv1.EndpointSlice{otherSlice,
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName))}); err == nil {
		t.Fatal("Sync of a change to a table that is gone succeeded; want an error")
	}
	// ...and the one after it writes the whole table again.
	r.sync([]*corev1.Service{web(), other}, otherSlice, endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName)))
	if line, err := dial(client.ns, "tcp", netip.AddrPortFrom(netip.MustParseAddr("10.43.0.30"), 80)); err != nil || !strings.HasPrefix(line, "b saw") {
		t.Errorf("the service that did not change, after the rewrite: %q, %v; want b answering", line, err)
	}
	if got, _ := hits(t, 30, client.ns, "tcp", webHTTP); !maps.Equal(servers(got), set("a", "b")) {
		t.Errorf("after the rewrite, 30 connections reached %v; want a and b", got)
	}
	if got := gather(t, r.px)["isle_proxy_sync_errors_total"]; got != 1 {
		t.Errorf("isle_proxy_sync_errors_total = %v; want 1", got)
	}
}

func TestNewReplacesStaleTable(t *testing.T) {
	r := newRig(t, "a", "client")
	r.check(r.px.Close())
	// A table a previous run left, with something of its own.
	c := nstest.NFTables(t, r.board)
	tb := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName})
	c.AddChain(&nftables.Chain{Table: tb, Name: "stale"})
	r.check(c.Flush())

	r.start()
	chains, err := nstest.NFTables(t, r.board).ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	r.check(err)
	var names []string
	for _, ch := range chains {
		if ch.Table.Name == TableName {
			names = append(names, ch.Name)
		}
	}
	if slices.Contains(names, "stale") || !slices.Contains(names, chainServices) {
		t.Errorf("after New, the table's chains are %v; want ours, without the stale one", names)
	}
	r.sync([]*corev1.Service{web()}, endpointSlice("web", "web-1", webPorts, ready(r.pods["a"].ip, nodeName)))
	if _, err := dial(r.pods["client"].ns, "tcp", webHTTP); err != nil {
		t.Error(err)
	}
}

// gather collects the proxy's metrics: "name{label=value,...}" → value
// (counters, gauges; a histogram's sample count under its name).
func gather(t *testing.T, px *Proxy) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(px.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			if ls := m.GetLabel(); len(ls) > 0 {
				var parts []string
				for _, l := range ls {
					parts = append(parts, l.GetName()+"="+l.GetValue())
				}
				key += "{" + strings.Join(parts, ",") + "}"
			}
			// A metric is one of these; the others' getters give 0.
			out[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

func TestCounters(t *testing.T) {
	r := newRig(t, "a", "b", "c", "client")
	a, b, c := r.pods["a"], r.pods["b"], r.pods["c"]
	r.sync([]*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyCluster)},
		endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName), ready(b.ip, nodeName), ready(c.ip, nodeName)))
	const http = "{namespace=default,port=http,service=web}"
	m := gather(t, r.px)
	if m["isle_proxy_service_packets_total"+http] != 0 || m["isle_proxy_service_endpoints"+http] != 3 {
		t.Errorf("before traffic: packets %v, endpoints %v; want 0 and 3",
			m["isle_proxy_service_packets_total"+http], m["isle_proxy_service_endpoints"+http])
	}
	hits(t, 10, r.pods["client"].ns, "tcp", webHTTP)
	hits(t, 10, r.client, "tcp", webNode)
	m = gather(t, r.px)
	// A connection is at least SYN, SYN-ACK, ACK, the answer, and two FINs.
	packets, bytes := m["isle_proxy_service_packets_total"+http], m["isle_proxy_service_bytes_total"+http]
	if packets < 20*6 || bytes < packets*40 {
		t.Errorf("after 20 connections: packets %v, bytes %v; want at least %d packets of 40 bytes or more", packets, bytes, 20*6)
	}
	if got := m["isle_proxy_service_packets_total{namespace=default,port=echo,service=web}"]; got != 0 {
		t.Errorf("packets of the echo port, which had no traffic: %v; want 0", got)
	}
	if m["isle_proxy_sync_duration_seconds"] < 1 {
		t.Errorf("isle_proxy_sync_duration_seconds has %v samples; want the Syncs", m["isle_proxy_sync_duration_seconds"])
	}
}

func TestDNSRedirect(t *testing.T) {
	r := newRig(t, "client")
	client := r.pods["client"]
	nstest.ServeUDP(t, r.board, netip.AddrPortFrom(bridgeIP, 53).String(), "dns")
	nstest.ServeTCP(t, r.board, netip.AddrPortFrom(bridgeIP, 53).String(), "dns")
	// The cluster DNS Service has no selector and no endpoints: it is not
	// programmed as a Service (else it would be rejected).
	kubeDNS := service("kube-dns", dnsIP, udpPort("dns", 53), tcpPort("dns-tcp", 53))
	kubeDNS.Namespace = "kube-system"
	r.sync([]*corev1.Service{kubeDNS})
	want := "dns saw " + client.ip.String()
	for _, network := range []string{"udp", "tcp"} {
		if line, err := dial(client.ns, network, netip.AddrPortFrom(dnsIP, 53)); err != nil || line != want {
			t.Errorf("%s to the cluster DNS: %q, %v; want %q", network, line, err, want)
		}
	}
}

func TestWithoutBridgeNetfilter(t *testing.T) {
	r := newRig(t, "a", "client")
	client := r.pods["client"]
	slice := endpointSlice("web", "web-1", webPorts, ready(r.pods["a"].ip, nodeName))
	r.check(netns.Do(r.board, func() error { return os.WriteFile(bridgeNFSysctl, []byte("0"), 0o644) }))
	t.Cleanup(func() {
		netns.Do(r.board, func() error { return os.WriteFile(bridgeNFSysctl, []byte("1"), 0o644) })
	})
	resync := func(bridgeNF bool) {
		r.px.mu.Lock()
		r.px.bridgeNF, r.px.rec = bridgeNF, nil
		r.px.mu.Unlock()
		r.sync([]*corev1.Service{web()}, slice)
	}
	// The rig is sound: without br_netfilter and without the fallback,
	// the endpoint's reply skips conntrack and the connection fails.
	resync(true)
	if line, err := nstest.Ask(client.ns, "tcp", webHTTP.String(), time.Second); err == nil {
		t.Fatalf("bridged replies without br_netfilter: %q; want the connection to fail", line)
	}
	// The fallback: masquerade, so that the reply comes back through the board.
	resync(false)
	if line, err := dial(client.ns, "tcp", webHTTP); err != nil || line != "a saw "+bridgeIP.String() {
		t.Errorf("without br_netfilter: %q, %v; want a answering the board's %v", line, err, bridgeIP)
	}
}

func TestNewTurnsBridgeNetfilterOn(t *testing.T) {
	r := newRig(t)
	read := func() string {
		var b []byte
		r.check(netns.Do(r.board, func() (err error) {
			b, err = os.ReadFile(bridgeNFSysctl)
			return err
		}))
		return strings.TrimSpace(string(b))
	}
	r.check(netns.Do(r.board, func() error { return os.WriteFile(bridgeNFSysctl, []byte("0"), 0o644) }))
	r.start()
	if got := read(); got != "1" || !r.px.bridgeNF {
		t.Errorf("after New, %s = %s and bridgeNF %v; want 1 and true", bridgeNFSysctl, got, r.px.bridgeNF)
	}
}

func TestCloseAndUninstall(t *testing.T) {
	r := newRig(t)
	hasTable := func() bool {
		_, err := nstest.NFTables(t, r.board).ListTableOfFamily(TableName, nftables.TableFamilyIPv4)
		return err == nil
	}
	if !hasTable() {
		t.Fatal("no table after New")
	}
	r.check(r.px.Close())
	if hasTable() {
		t.Error("Close left the table")
	}
	if err := r.px.Sync(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v; want ErrClosed", err)
	}
	r.start()
	r.check(Uninstall(r.board))
	if hasTable() {
		t.Error("Uninstall left the table")
	}
	r.check(Uninstall(r.board)) // nothing to remove
	if err := Uninstall(r.dir + "/gone"); err != nil {
		t.Errorf("Uninstall of a namespace that is gone: %v", err)
	}
}

// manyEndpoints is a slice of web with n ready endpoints from 10.42.1.10 on.
func manyEndpoints(n int) *discoveryv1.EndpointSlice {
	var eps []discoveryv1.Endpoint
	for i := range n {
		eps = append(eps, ready(netip.AddrFrom4([4]byte{10, 42, 1 + byte((10+i)/250), byte((10 + i) % 250)}), nodeName))
	}
	return endpointSlice("web", "web-1", webPorts, eps...)
}

func TestLargeTransaction(t *testing.T) {
	// 2 ports of 300 endpoints, with affinity: some 3,000 parts in one
	// transaction, far more acknowledgements than a default socket holds.
	r := newRig(t)
	svc := webNodePort(corev1.ServiceExternalTrafficPolicyCluster)
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	r.sync([]*corev1.Service{svc}, manyEndpoints(300))
	svcChain := "svc-" + portName(&svcPort{ns: "default", svc: "web", port: "http", proto: corev1.ProtocolTCP})
	if got := len(r.rules(svcChain)); got != 302 {
		t.Errorf("chain %s has %d rules; want 302 (masquerade, 300 affinity lookups, balance)", svcChain, got)
	}
}

// BenchmarkSync100Endpoints times a Sync that changes a Service of 100
// endpoints (one of them replaced, as in a rollout), one that changes
// nothing (the agent syncs at every change of any Service or slice), and
// one that rewrites the table (as after New).
func BenchmarkSync100Endpoints(b *testing.B) {
	r := newRig(b)
	r.px.log = discardLogger()
	// Two versions of the endpoints: 10.42.1.200 or .201, and .10 to .108.
	versions := make([]*discoveryv1.EndpointSlice, 2)
	for i := range versions {
		eps := []discoveryv1.Endpoint{ready(netip.AddrFrom4([4]byte{10, 42, 1, byte(200 + i)}), nodeName)}
		for j := range 99 {
			eps = append(eps, ready(netip.AddrFrom4([4]byte{10, 42, 1, byte(10 + j)}), nodeName))
		}
		versions[i] = endpointSlice("web", "web-1", webPorts, eps...)
	}
	svcs := []*corev1.Service{webNodePort(corev1.ServiceExternalTrafficPolicyCluster)}
	r.sync(svcs, versions[0])
	// cpu reports the process's CPU time (user and system, the kernel's
	// work on the transaction included) per Sync: much of a Sync's time
	// is spent waiting for the kernel's commit.
	cpu := func(b *testing.B, f func()) {
		start := cpuTime(b)
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
	i := 0
	b.Run("change", func(b *testing.B) {
		cpu(b, func() {
			i++
			r.sync(svcs, versions[i%2])
		})
	})
	b.Run("unchanged", func(b *testing.B) {
		cpu(b, func() { r.sync(svcs, versions[i%2]) })
	})
	b.Run("rewrite", func(b *testing.B) {
		cpu(b, func() {
			r.px.mu.Lock()
			r.px.rec = nil
			r.px.mu.Unlock()
			r.sync(svcs, versions[0])
		})
	})
}

// cpuTime is the CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var u unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A client that keeps sending from one UDP port follows the Service when
// its endpoint leaves: conntrack would keep DNATing the flow to the old
// endpoint (still answering here) for as long as the datagrams come.
func TestUDPFlowFollowsEndpoints(t *testing.T) {
	r := newRig(t, "a", "b", "client")
	a, b, client := r.pods["a"], r.pods["b"], r.pods["client"]
	r.sync([]*corev1.Service{web()}, endpointSlice("web", "web-1", webPorts, ready(a.ip, nodeName)))
	var c *net.UDPConn
	r.check(netns.Do(client.ns, func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{Port: 40053}, net.UDPAddrFromAddrPort(webEcho))
		return err
	}))
	defer c.Close()
	ask := func() string {
		t.Helper()
		buf := make([]byte, 64)
		for range 10 { // the first datagram may be lost while ARP resolves
			if _, err := c.Write([]byte("?")); err != nil {
				t.Fatal(err)
			}
			r.check(c.SetReadDeadline(time.Now().Add(500 * time.Millisecond)))
			if n, err := c.Read(buf); err == nil {
				server, _, _ := strings.Cut(string(buf[:n]), " saw ")
				return server
			}
		}
		t.Fatalf("no answer from %v", webEcho)
		return ""
	}
	for range 3 {
		if got := ask(); got != "a" {
			t.Fatalf("the flow reached %q, want a, the only endpoint", got)
		}
	}
	r.sync([]*corev1.Service{web()}, endpointSlice("web", "web-1", webPorts, ready(b.ip, nodeName)))
	for i := range 3 {
		if got := ask(); got != "b" {
			t.Fatalf("datagram %d after a left the Service reached %q, want b", i+1, got)
		}
	}
}
