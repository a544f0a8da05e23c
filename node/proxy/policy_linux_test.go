package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// Objects of the API for the policy tests.

func npPod(ns, name, node, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func netpol(ns, name string, sel map[string]string, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: types}}
}

func podsWith(labels map[string]string) *networkingv1.NetworkPolicyPeer {
	return &networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: labels}}
}

func npPort(proto corev1.Protocol, port intstr.IntOrString, end ...int32) networkingv1.NetworkPolicyPort {
	p := networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port}
	if len(end) > 0 {
		p.EndPort = &end[0]
	}
	return p
}

var (
	ingress = networkingv1.PolicyTypeIngress
	egress  = networkingv1.PolicyTypeEgress
)

func TestPolicyPlan(t *testing.T) {
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}
	st := PolicyState{
		Namespaces: []*corev1.Namespace{namespace("a", map[string]string{"team": "x"}), namespace("b", map[string]string{"team": "y"})},
		Pods: []*corev1.Pod{
			npPod("a", "web", nodeName, "10.42.1.2", map[string]string{"app": "web"}, http),
			npPod("a", "db", nodeName, "10.42.1.3", map[string]string{"app": "db"}),
			npPod("a", "client", otherNode, "10.42.2.2", map[string]string{"role": "client"}),
			npPod("b", "client", otherNode, "10.42.2.3", map[string]string{"role": "client"},
				corev1.ContainerPort{Name: "http", ContainerPort: 9090}),
			npPod("b", "other", otherNode, "10.42.2.4", nil),
		},
	}
	hostNet := npPod("a", "host", nodeName, "10.99.0.11", map[string]string{"app": "web"})
	hostNet.Spec.HostNetwork = true
	done := npPod("a", "done", nodeName, "10.42.1.9", map[string]string{"app": "web"})
	done.Status.Phase = corev1.PodSucceeded
	st.Pods = append(st.Pods, hostNet, done)

	t.Run("no policy: nothing isolated", func(t *testing.T) {
		if pl := makePolicyPlan(st, nodeName); len(pl.pods) != 0 {
			t.Fatalf("isolated %v", pl.pods)
		}
	})
	t.Run("peers, namespaces, ipBlock and named ports", func(t *testing.T) {
		p := netpol("a", "web", map[string]string{"app": "web"}, ingress, egress)
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{*podsWith(map[string]string{"role": "client"})}, Ports: []networkingv1.NetworkPolicyPort{npPort("TCP", intstr.FromString("http"))}},
			{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}},
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}},
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24", "192.168.255.0/24"}}}},
				Ports: []networkingv1.NetworkPolicyPort{npPort("UDP", intstr.FromInt32(5000), 5010), npPort("TCP", intstr.FromString("nope"))}},
		}
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{
			{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}, Ports: []networkingv1.NetworkPolicyPort{npPort("TCP", intstr.FromString("http"))}},
			{To: []networkingv1.NetworkPolicyPeer{*podsWith(map[string]string{"app": "nothing"})}},
		}
		pl := makePolicyPlan(PolicyState{Policies: []*networkingv1.NetworkPolicy{p}, Pods: st.Pods, Namespaces: st.Namespaces}, nodeName)
		if len(pl.pods) != 1 || pl.pods[0].name != "a/web" || !pl.pods[0].ingressIsolated || !pl.pods[0].egressIsolated {
			t.Fatalf("isolated: %+v, want a/web alone, both ways (not the host-network or succeeded pods)", pl.pods)
		}
		web := pl.pods[0]
		peers := func(set string) string {
			var s []string
			for _, r := range pl.peers[set] {
				s = append(s, r.lo.String()+"-"+r.hi.String())
			}
			return strings.Join(s, ",")
		}
		if len(web.ingress) != 3 {
			t.Fatalf("ingress rules %+v, want 3 (the unknown named port allows nothing)", web.ingress)
		}
		if r := web.ingress[0]; peers(r.peers) != "10.42.2.2-10.42.2.2" || r.proto != ipprotoTCP || r.lo != 8080 || r.hi != 8080 {
			t.Errorf("rule 0 %+v peers %s: want a's client on web's http port, 8080", r, peers(r.peers))
		}
		if r := web.ingress[1]; peers(r.peers) != "10.42.2.3-10.42.2.3" || r.proto != 0 {
			t.Errorf("rule 1 %+v peers %s: want b's client, every port", r, peers(r.peers))
		}
		want := "192.168.0.0-192.168.0.255,192.168.2.0-192.168.254.255"
		if r := web.ingress[2]; peers(r.peers) != want || r.proto != ipprotoUDP || r.lo != 5000 || r.hi != 5010 {
			t.Errorf("rule 2 %+v peers %s: want %s UDP 5000-5010", r, peers(r.peers), want)
		}
		if len(web.egress) != 1 || web.egress[0].named == "" {
			t.Fatalf("egress rules %+v: want the named port's alone (no pod is app=nothing)", web.egress)
		}
		got := pl.named[web.egress[0].named]
		wantNamed := []namedDest{{netip.MustParseAddr("10.42.1.2"), ipprotoTCP, 8080}, {netip.MustParseAddr("10.42.2.3"), ipprotoTCP, 9090}}
		if !slices.Equal(got, wantNamed) {
			t.Errorf("http destinations %v, want %v (each pod's own number)", got, wantNamed)
		}
	})
	t.Run("default policyTypes and other nodes' pods", func(t *testing.T) {
		p := netpol("a", "all", nil)
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		pl := makePolicyPlan(PolicyState{Policies: []*networkingv1.NetworkPolicy{p}, Pods: st.Pods, Namespaces: st.Namespaces}, nodeName)
		if len(pl.pods) != 2 {
			t.Fatalf("isolated %+v: want a's two pods of this node", pl.pods)
		}
		for _, ip := range pl.pods {
			if !ip.ingressIsolated || len(ip.ingress) != 0 || !ip.egressIsolated || len(ip.egress) != 1 || ip.egress[0] != (allowRule{}) {
				t.Errorf("%s: %+v, want ingress denied and egress open", ip.name, ip)
			}
		}
	})
	t.Run("ranges", func(t *testing.T) {
		r, err := blockRanges(&networkingv1.IPBlock{CIDR: "010.0.0.0/8", Except: []string{"10.0.0.0/9", "10.255.255.255/32"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r) != 1 || r[0].lo.String() != "10.128.0.0" || r[0].hi.String() != "10.255.255.254" {
			t.Errorf("ranges %v", r)
		}
		m := mergeRanges([]addrRange{{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("10.0.0.5")},
			{netip.MustParseAddr("10.0.0.0"), netip.MustParseAddr("10.0.0.4")}, {netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.9")}})
		if len(m) != 2 || m[0].hi.String() != "10.0.0.5" {
			t.Errorf("merged %v: want 10.0.0.0-10.0.0.5 and 10.0.0.7-10.0.0.9", m)
		}
		all, _ := blockRanges(&networkingv1.IPBlock{CIDR: "0.0.0.0/0"})
		if e := rangeElems(all); len(e) != 1 {
			t.Errorf("elements of 0.0.0.0/0: %v, want a start alone", e)
		}
	})
}

// policyRig is the rig with the NetworkPolicy rules beside the proxy.
type policyRig struct {
	*rig
	pol *Policies
	st  PolicyState
}

func newPolicyRig(t *testing.T, pods ...string) *policyRig {
	r := newRig(t, pods...)
	pol, err := NewPolicies(Config{Netns: r.board, NodeName: nodeName, PodCIDR: podCIDR})
	r.check(err)
	t.Cleanup(func() { pol.Close() })
	// The LAN client reaches the pods through the board.
	dst := &net.IPNet{IP: podCIDR.Addr().AsSlice(), Mask: net.CIDRMask(podCIDR.Bits(), 32)}
	r.check(nstest.Handle(t, r.client).RouteAdd(&netlink.Route{Dst: dst, Gw: boardIP.AsSlice()}))
	pr := &policyRig{rig: r, pol: pol}
	pr.st.Namespaces = []*corev1.Namespace{namespace("default", nil), namespace("other", map[string]string{"trust": "yes"})}
	for _, name := range pods {
		p := r.pods[name]
		pr.st.Pods = append(pr.st.Pods, npPod("default", name, nodeName, p.ip.String(), map[string]string{"app": name},
			corev1.ContainerPort{Name: "http", ContainerPort: podPort}, corev1.ContainerPort{Name: "dns", ContainerPort: podPort, Protocol: corev1.ProtocolUDP}))
	}
	return pr
}

func (r *policyRig) apply(pols ...*networkingv1.NetworkPolicy) {
	r.t.Helper()
	r.st.Policies = pols
	r.check(r.pol.Sync(r.st))
}

// reach reports whether the server of a pod answers from ns.
func reach(ns, network string, to netip.Addr) bool {
	_, err := nstest.Ask(ns, network, netip.AddrPortFrom(to, podPort).String(), 400*time.Millisecond)
	return err == nil
}

// expect checks a matrix of connections: "from->to" (pod names or
// "client" for the LAN client) that must or must not connect over TCP.
func (r *policyRig) expect(network string, want map[string]bool) {
	r.t.Helper()
	var bad []string
	for path, ok := range want {
		from, to, _ := strings.Cut(path, "->")
		ns := r.client
		if from != "client" {
			ns = r.pods[from].ns
		}
		if got := reach(ns, network, r.pods[to].ip); got != ok {
			bad = append(bad, fmt.Sprintf("%s %s: connects %v, want %v", network, path, got, ok))
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		r.t.Errorf("%s", strings.Join(bad, "\n"))
	}
}

func TestPolicies(t *testing.T) {
	r := newPolicyRig(t, "a", "b", "c")
	open := map[string]bool{"b->a": true, "c->a": true, "client->a": true, "a->b": true, "a->c": true}
	r.apply()
	r.expect("tcp", open)

	t.Run("default deny of ingress", func(t *testing.T) {
		r.apply(netpol("default", "deny", map[string]string{"app": "a"}, ingress))
		r.expect("tcp", map[string]bool{"b->a": false, "c->a": false, "client->a": false, "a->b": true, "a->c": true, "b->c": true})
		r.expect("udp", map[string]bool{"b->a": false, "a->b": true})
	})
	t.Run("ingress from pods, a namespace's pods, an ipBlock", func(t *testing.T) {
		p := netpol("default", "some", map[string]string{"app": "a"}, ingress)
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{*podsWith(map[string]string{"app": "b"})}}}
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": true, "c->a": false, "client->a": false})
		// c moved to a namespace the rule chooses by its labels.
		r.st.Pods[2].Namespace = "other"
		p.Spec.Ingress[0].From = append(p.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"trust": "yes"}}})
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": true, "c->a": true, "client->a": false})
		r.st.Pods[2].Namespace = "default"
		p.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{clientIP.String() + "/32", "10.42.1.3/32"}}}}
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": false, "c->a": true, "client->a": false})
		p.Spec.Ingress[0].From[0].IPBlock.Except = []string{"10.42.1.0/24"}
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": false, "c->a": false, "client->a": true})
	})
	t.Run("ports: numbers, ranges, names and protocols", func(t *testing.T) {
		p := netpol("default", "ports", map[string]string{"app": "a"}, ingress)
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{npPort("TCP", intstr.FromInt32(podPort))}}}
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": true, "client->a": true})
		r.expect("udp", map[string]bool{"b->a": false})
		p.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{npPort("UDP", intstr.FromInt32(8000), 8090)}
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": false})
		r.expect("udp", map[string]bool{"b->a": true})
		p.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{npPort("TCP", intstr.FromString("http"))}
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": true})
		r.expect("udp", map[string]bool{"b->a": false})
		p.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{npPort("TCP", intstr.FromString("dns"))} // a UDP port's name
		r.apply(p)
		r.expect("tcp", map[string]bool{"b->a": false})
	})
	t.Run("egress, to an endpoint behind a Service too", func(t *testing.T) {
		p := netpol("default", "out", map[string]string{"app": "a"}, egress)
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{*podsWith(map[string]string{"app": "b"})},
			Ports: []networkingv1.NetworkPolicyPort{npPort("TCP", intstr.FromString("http"))}}}
		r.apply(p)
		r.expect("tcp", map[string]bool{"a->b": true, "a->c": false, "b->a": true, "c->a": true})
		r.sync([]*corev1.Service{service("web", serviceIP, tcpPort("http", 80))},
			endpointSlice("web", "web-1", []discoveryv1.EndpointPort{slicePortOf("http", corev1.ProtocolTCP, podPort)}, ready(r.pods["c"].ip, nodeName)))
		if _, err := nstest.Ask(r.pods["a"].ns, "tcp", netip.AddrPortFrom(serviceIP, 80).String(), 400*time.Millisecond); err == nil {
			t.Error("a reached c through the Service's cluster IP, which its egress does not allow")
		}
		if _, err := dial(r.pods["b"].ns, "tcp", netip.AddrPortFrom(serviceIP, 80)); err != nil {
			t.Errorf("b, not isolated, through the cluster IP: %v", err)
		}
		r.sync(nil)
	})
	t.Run("an established connection stays across a policy change", func(t *testing.T) {
		r.apply()
		l := nstest.Listen(t, r.pods["a"].ns, "tcp4", ":9000")
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { // echo lines
					defer c.Close()
					s := bufio.NewScanner(c)
					for s.Scan() {
						fmt.Fprintln(c, s.Text())
					}
				}()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := netns.Dialer(r.pods["b"].ns)(ctx, "tcp", netip.AddrPortFrom(r.pods["a"].ip, 9000).String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rd := bufio.NewReader(c)
		say := func(s string) error {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := fmt.Fprintln(c, s); err != nil {
				return err
			}
			got, err := rd.ReadString('\n')
			if err == nil && strings.TrimSpace(got) != s {
				err = fmt.Errorf("echoed %q, want %q", got, s)
			}
			return err
		}
		if err := say("before"); err != nil {
			t.Fatal(err)
		}
		r.apply(netpol("default", "deny", map[string]string{"app": "a"}, ingress, egress))
		if err := say("after"); err != nil {
			t.Errorf("the connection established before the policy: %v", err)
		}
		if reach(r.pods["b"].ns, "tcp", r.pods["a"].ip) {
			t.Error("a new connection passed the policy")
		}
	})
	t.Run("every policy gone: open again", func(t *testing.T) {
		r.apply()
		r.expect("tcp", open)
	})
}
