package proxy

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	netutils "k8s.io/utils/net"
)

// PolicyState is what a board's NetworkPolicy rules are made of: every
// NetworkPolicy, pod and Namespace of the cluster.
type PolicyState struct {
	Policies   []*networkingv1.NetworkPolicy
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
}

// policyPlan is what the policies ask of this board: the rules of each
// of its pods a policy isolates, and the sets of peers they name.
type policyPlan struct {
	pods []*isolatedPod // by address
	// peers are the address sets of the rules' peers, by set name: sorted
	// ranges that neither overlap nor touch.
	peers map[string][]addrRange
	// named are the destinations of egress rules with a named port, by
	// set name: the peers' addresses with their port of that name.
	named    map[string][]namedDest
	warnings []warning
}

// isolatedPod is a pod of the board that a policy isolates for ingress,
// egress or both: only what a rule allows passes, in that direction.
type isolatedPod struct {
	addr            netip.Addr
	name            string // namespace/name
	ingressIsolated bool
	egressIsolated  bool
	ingress, egress []allowRule
}

// allowRule lets through the traffic of one peer set and port range.
type allowRule struct {
	peers  string // the peer set; "" any address
	named  string // egress to a named port: the set of destinations; peers and ports unused
	proto  byte   // 0 any protocol (and any port)
	lo, hi uint16
}

// addrRange is an inclusive range of IPv4 addresses.
type addrRange struct{ lo, hi netip.Addr }

// namedDest is an address with the number of a named port.
type namedDest struct {
	addr  netip.Addr
	proto byte
	port  uint16
}

// policyPod is a pod a policy may select or name: one with an IPv4
// address on the pod network, not yet ended.
type policyPod struct {
	pod  *corev1.Pod
	addr netip.Addr
}

// makePolicyPlan works out the rules of the pods of node.
func makePolicyPlan(st PolicyState, node string) policyPlan {
	pl := policyPlan{peers: map[string][]addrRange{}, named: map[string][]namedDest{}}
	nsLabels := make(map[string]labels.Set, len(st.Namespaces))
	for _, ns := range st.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	var all []policyPod
	byNS := map[string][]policyPod{}
	local := map[string][]policyPod{}
	for _, p := range st.Pods {
		a, ok := policyPodAddr(p)
		if !ok {
			continue
		}
		pp := policyPod{pod: p, addr: a}
		all = append(all, pp)
		byNS[p.Namespace] = append(byNS[p.Namespace], pp)
		if p.Spec.NodeName == node {
			local[p.Namespace] = append(local[p.Namespace], pp)
		}
	}
	pols := slices.Clone(st.Policies)
	slices.SortFunc(pols, func(a, b *networkingv1.NetworkPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	isolated := map[netip.Addr]*isolatedPod{}
	for _, pol := range pols {
		sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
		if err != nil {
			pl.warnings = append(pl.warnings, warning{policyName(pol), "spec.podSelector: " + err.Error()})
			continue
		}
		var selected []policyPod
		for _, pp := range local[pol.Namespace] {
			if sel.Matches(labels.Set(pp.pod.Labels)) {
				selected = append(selected, pp)
			}
		}
		if len(selected) == 0 {
			continue
		}
		c := &policyCompiler{pl: &pl, pol: pol, nsLabels: nsLabels, all: all, byNS: byNS}
		ingress, egress := policyDirections(pol)
		for _, pp := range selected {
			ip := isolated[pp.addr]
			if ip == nil {
				ip = &isolatedPod{addr: pp.addr, name: pp.pod.Namespace + "/" + pp.pod.Name}
				isolated[pp.addr] = ip
			}
			if ingress {
				ip.ingressIsolated = true
				for i := range pol.Spec.Ingress {
					r := &pol.Spec.Ingress[i]
					ip.ingress = append(ip.ingress, c.ingressRules(i, r.From, r.Ports, pp.pod)...)
				}
			}
			if egress {
				ip.egressIsolated = true
				for i := range pol.Spec.Egress {
					r := &pol.Spec.Egress[i]
					ip.egress = append(ip.egress, c.egressRules(i, r.To, r.Ports)...)
				}
			}
		}
	}
	for _, ip := range isolated {
		pl.pods = append(pl.pods, ip)
	}
	slices.SortFunc(pl.pods, func(a, b *isolatedPod) int { return a.addr.Compare(b.addr) })
	return pl
}

// policyPodAddr is the IPv4 address of a pod policies apply to: not on
// the host's network, not ended.
func policyPodAddr(p *corev1.Pod) (netip.Addr, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return netip.Addr{}, false
	}
	ips := []string{p.Status.PodIP}
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// policyDirections are the directions a policy isolates its pods in: its
// policyTypes, or as the API defaults them when they are missing.
func policyDirections(pol *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(pol.Spec.PolicyTypes) == 0 {
		return true, len(pol.Spec.Egress) > 0
	}
	for _, t := range pol.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func policyName(pol *networkingv1.NetworkPolicy) string {
	return "NetworkPolicy " + pol.Namespace + "/" + pol.Name
}

// policyCompiler makes the rules of one policy; the peer sets of its
// rules are made once, for all the pods it selects.
type policyCompiler struct {
	pl       *policyPlan
	pol      *networkingv1.NetworkPolicy
	nsLabels map[string]labels.Set
	all      []policyPod
	byNS     map[string][]policyPod
	// done are the peer sets made, by name; their pods, for named ports.
	done map[string][]policyPod
}

// ingressRules are the rules of ingress rule i for the pod it protects,
// whose named ports are resolved here.
func (c *policyCompiler) ingressRules(i int, from []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, pod *corev1.Pod) []allowRule {
	set := ""
	if len(from) > 0 {
		var ok bool
		if set, _, ok = c.peerSet(fmt.Sprintf("in/%d", i), from, false); !ok {
			return nil
		}
	}
	if len(ports) == 0 {
		return []allowRule{{peers: set}}
	}
	var out []allowRule
	for _, p := range ports {
		proto := policyProto(p.Protocol)
		switch {
		case p.Port == nil:
			out = append(out, allowRule{peers: set, proto: proto})
		case p.Port.Type == intstr.String:
			if n, ok := namedPort(pod, p.Port.StrVal, proto); ok {
				out = append(out, allowRule{peers: set, proto: proto, lo: n, hi: n})
			}
		default:
			out = append(out, allowRule{peers: set, proto: proto, lo: uint16(p.Port.IntVal), hi: endPort(p)})
		}
	}
	return out
}

// egressRules are the rules of egress rule i; a named port is resolved on
// each destination pod.
func (c *policyCompiler) egressRules(i int, to []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) []allowRule {
	set, peerPods := "", c.all
	if len(to) > 0 {
		var ok bool
		if set, peerPods, ok = c.peerSet(fmt.Sprintf("out/%d", i), to, slices.ContainsFunc(ports, namedPolicyPort)); !ok {
			return nil
		}
	}
	if len(ports) == 0 {
		return []allowRule{{peers: set}}
	}
	var out []allowRule
	for j, p := range ports {
		proto := policyProto(p.Protocol)
		switch {
		case p.Port == nil:
			out = append(out, allowRule{peers: set, proto: proto})
		case p.Port.Type == intstr.String:
			name := "named-" + hashed(fmt.Sprintf("%s/%s/out/%d/%d", c.pol.Namespace, c.pol.Name, i, j))
			if _, made := c.pl.named[name]; !made {
				var dests []namedDest
				for _, pp := range peerPods {
					if n, ok := namedPort(pp.pod, p.Port.StrVal, proto); ok {
						dests = append(dests, namedDest{addr: pp.addr, proto: proto, port: n})
					}
				}
				slices.SortFunc(dests, func(a, b namedDest) int {
					return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port))
				})
				c.pl.named[name] = slices.Compact(dests)
			}
			if len(c.pl.named[name]) > 0 {
				out = append(out, allowRule{named: name})
			}
		default:
			out = append(out, allowRule{peers: set, proto: proto, lo: uint16(p.Port.IntVal), hi: endPort(p)})
		}
	}
	return out
}

// peerSet makes the address set of a rule's peers (once per policy and
// rule). With pods, it also reports the pods in it, for named ports: the
// pods the selectors choose, and those whose address an ipBlock holds. ok
// is false when the set is empty: the rule allows nothing.
func (c *policyCompiler) peerSet(key string, peers []networkingv1.NetworkPolicyPeer, pods bool) (name string, in []policyPod, ok bool) {
	name = "peers-" + hashed(c.pol.Namespace+"/"+c.pol.Name+"/"+key)
	if c.done == nil {
		c.done = map[string][]policyPod{}
	}
	if in, made := c.done[name]; made && (!pods || in != nil) {
		return name, in, len(c.pl.peers[name]) > 0
	}
	var ranges, blocks []addrRange
	for _, peer := range peers {
		if b := peer.IPBlock; b != nil {
			r, err := blockRanges(b)
			if err != nil {
				c.pl.warnings = append(c.pl.warnings, warning{policyName(c.pol), err.Error()})
				continue
			}
			blocks = append(blocks, r...)
			continue
		}
		for _, pp := range c.selectPeers(peer) {
			ranges = append(ranges, addrRange{pp.addr, pp.addr})
			if pods {
				in = append(in, pp)
			}
		}
	}
	if pods {
		for _, pp := range c.all {
			if inRanges(blocks, pp.addr) {
				in = append(in, pp)
			}
		}
		if in == nil {
			in = []policyPod{} // made with the pods, none
		}
	}
	c.pl.peers[name] = mergeRanges(append(ranges, blocks...))
	c.done[name] = in
	return name, in, len(c.pl.peers[name]) > 0
}

// selectPeers are the pods a peer's selectors choose: the podSelector's
// in the policy's namespace, or in the namespaces the namespaceSelector
// chooses (all their pods without a podSelector).
func (c *policyCompiler) selectPeers(peer networkingv1.NetworkPolicyPeer) []policyPod {
	podSel, nsSel := labels.Everything(), labels.Selector(nil)
	var err error
	if peer.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
			c.pl.warnings = append(c.pl.warnings, warning{policyName(c.pol), "podSelector: " + err.Error()})
			return nil
		}
	}
	if peer.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
			c.pl.warnings = append(c.pl.warnings, warning{policyName(c.pol), "namespaceSelector: " + err.Error()})
			return nil
		}
	}
	var out []policyPod
	pick := func(pods []policyPod) {
		for _, pp := range pods {
			if podSel.Matches(labels.Set(pp.pod.Labels)) {
				out = append(out, pp)
			}
		}
	}
	if nsSel == nil {
		pick(c.byNS[c.pol.Namespace])
		return out
	}
	for ns, l := range c.nsLabels {
		if nsSel.Matches(l) {
			pick(c.byNS[ns])
		}
	}
	return out
}

// namedPolicyPort reports whether a policy port is a name.
func namedPolicyPort(p networkingv1.NetworkPolicyPort) bool {
	return p.Port != nil && p.Port.Type == intstr.String
}

// namedPort is the number of pod's container port of that name and
// protocol.
func namedPort(pod *corev1.Pod, name string, proto byte) (uint16, bool) {
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			if p.Name == name && policyProto(&p.Protocol) == proto && p.ContainerPort > 0 {
				return uint16(p.ContainerPort), true
			}
		}
	}
	return 0, false
}

// policyProto is the IP protocol number of a policy's or container's
// port protocol (TCP when unset).
func policyProto(p *corev1.Protocol) byte {
	if p == nil {
		return ipprotoTCP
	}
	switch *p {
	case corev1.ProtocolUDP:
		return ipprotoUDP
	case corev1.ProtocolSCTP:
		return ipprotoSCTP
	}
	return ipprotoTCP
}

// IP protocol numbers.
const (
	ipprotoTCP  = 6
	ipprotoUDP  = 17
	ipprotoSCTP = 132
)

// endPort is the last port of a numeric policy port.
func endPort(p networkingv1.NetworkPolicyPort) uint16 {
	if p.EndPort != nil && *p.EndPort > p.Port.IntVal {
		return uint16(*p.EndPort)
	}
	return uint16(p.Port.IntVal)
}

// blockRanges are the IPv4 addresses of an ipBlock: its CIDR without its
// exceptions. An IPv6 block holds none of the pod network's addresses.
func blockRanges(b *networkingv1.IPBlock) ([]addrRange, error) {
	cidr, err := parseLegacyCIDR(b.CIDR)
	if err != nil {
		return nil, fmt.Errorf("ipBlock.cidr %q: %w", b.CIDR, err)
	}
	if !cidr.Addr().Is4() {
		return nil, nil
	}
	out := []addrRange{prefixRange(cidr)}
	for _, e := range b.Except {
		ex, err := parseLegacyCIDR(e)
		if err != nil {
			return nil, fmt.Errorf("ipBlock.except %q: %w", e, err)
		}
		if ex.Addr().Is4() {
			out = subtractRange(out, prefixRange(ex))
		}
	}
	return out, nil
}

// parseLegacyCIDR parses a CIDR as the API takes it (leading zeros in
// the address allowed), masked.
func parseLegacyCIDR(s string) (netip.Prefix, error) {
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	bits, _ := n.Mask.Size()
	a, _ := netip.AddrFromSlice(n.IP)
	return netip.PrefixFrom(a.Unmap(), bits), nil
}

func prefixRange(p netip.Prefix) addrRange {
	lo := u32(p.Addr())
	return addrRange{p.Addr(), a32(lo | (1<<(32-p.Bits()) - 1))}
}

// subtractRange removes x from each range of rs.
func subtractRange(rs []addrRange, x addrRange) []addrRange {
	var out []addrRange
	for _, r := range rs {
		if x.hi.Less(r.lo) || r.hi.Less(x.lo) {
			out = append(out, r)
			continue
		}
		if r.lo.Less(x.lo) {
			out = append(out, addrRange{r.lo, x.lo.Prev()})
		}
		if x.hi.Less(r.hi) {
			out = append(out, addrRange{x.hi.Next(), r.hi})
		}
	}
	return out
}

// mergeRanges sorts rs and joins those that overlap or touch, as an
// interval set must hold them.
func mergeRanges(rs []addrRange) []addrRange {
	slices.SortFunc(rs, func(a, b addrRange) int { return a.lo.Compare(b.lo) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].hi.Next() == r.lo || !out[n-1].hi.Less(r.lo)) {
			if out[n-1].hi.Less(r.hi) {
				out[n-1].hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func inRanges(rs []addrRange, a netip.Addr) bool {
	for _, r := range rs {
		if !a.Less(r.lo) && !r.hi.Less(a) {
			return true
		}
	}
	return false
}

func u32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

func a32(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}
