package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What the proxy programs, worked out from Services and EndpointSlices
// alone: no nftables here.

// svcPort is one port of a Service as the proxy programs it.
type svcPort struct {
	ns, svc string
	name    string // the port's name, "" if it has none
	// port is the port's name, or its number when it has none: the
	// metrics' port label and part of the chains' names.
	port        string
	proto       corev1.Protocol // TCP or UDP
	clusterIP   netip.Addr
	servicePort uint16
	nodePort    uint16       // 0: none
	externalIPs []netip.Addr // spec.externalIPs, programmed like node ports
	// internalLocal and externalLocal are the traffic policies Local.
	internalLocal, externalLocal bool
	// affinity is the ClientIP session affinity's timeout; 0: none.
	affinity time.Duration
	// all are the endpoints in use; local those of them on this board.
	all, local []endpoint
}

// endpoint is one address and port of a Service port.
type endpoint struct {
	addr  netip.AddrPort
	local bool // its nodeName is this board's
}

// internal are the endpoints of traffic to the cluster IP.
func (sp *svcPort) internal() []endpoint {
	if sp.internalLocal {
		return sp.local
	}
	return sp.all
}

// external reports whether the port is reached from outside the cluster IP
// too: by a node port or an external IP.
func (sp *svcPort) external() bool { return sp.nodePort != 0 || len(sp.externalIPs) > 0 }

// warning is an object, or a part of one, left out, and why.
type warning struct {
	object string // "Service default/web", "EndpointSlice default/web-x1"
	reason string
}

// plan is what a Sync programs: the service ports in a fixed order, and
// what was left out.
type plan struct {
	ports    []*svcPort
	warnings []warning
}

// sessionAffinityMax is the longest ClientIP affinity timeout the API
// accepts (a day).
const sessionAffinityMax = 86400

// makePlan works out the service ports to program from svcs and eps,
// for the board nodeName. dnsIP, if valid, is the cluster DNS Service IP,
// redirected elsewhere, so its Service is left out. Odd objects (bad
// addresses, port 0, unknown protocols, clashes with another Service) are
// left out with a warning; the rest is programmed.
func makePlan(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, nodeName string, dnsIP netip.Addr) plan {
	var p plan
	warn := func(object, format string, a ...any) {
		p.warnings = append(p.warnings, warning{object, fmt.Sprintf(format, a...)})
	}
	bySvc := slicesByService(eps, warn)

	svcs = slices.Clone(svcs)
	svcs = slices.DeleteFunc(svcs, func(s *corev1.Service) bool { return s == nil })
	slices.SortFunc(svcs, func(a, b *corev1.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	// Who holds what, so that a second claim is refused: destination keys
	// (cluster and external IPs), node ports, metric labels.
	dests := map[destKey]string{}
	nodePorts := map[nodePortKey]string{}
	labels := map[string]bool{}
	if dnsIP.IsValid() {
		for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			dests[destKey{dnsIP, proto, 53}] = "the cluster DNS redirect"
		}
	}
	for _, s := range svcs {
		object := "Service " + s.Namespace + "/" + s.Name
		clusterIP, ok := programmable(s, dnsIP, func(format string, a ...any) { warn(object, format, a...) })
		if !ok {
			continue
		}
		base := svcPort{ns: s.Namespace, svc: s.Name, clusterIP: clusterIP,
			internalLocal: s.Spec.InternalTrafficPolicy != nil && *s.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal,
			externalLocal: s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal}
		if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			secs := corev1.DefaultClientIPServiceAffinitySeconds
			if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				if t := *c.ClientIP.TimeoutSeconds; t >= 1 && t <= sessionAffinityMax {
					secs = t
				} else {
					warn(object, "sessionAffinityConfig.clientIP.timeoutSeconds %d is not in 1..%d: using %d", t, sessionAffinityMax, secs)
				}
			}
			base.affinity = time.Duration(secs) * time.Second
		}
		for _, e := range s.Spec.ExternalIPs {
			a, err := netip.ParseAddr(e)
			if err != nil || !a.Is4() {
				warn(object, "externalIP %q is not an IPv4 address: left out", e)
				continue
			}
			base.externalIPs = append(base.externalIPs, a)
		}
		for i := range s.Spec.Ports {
			sp, ok := makeSvcPort(base, s, i, func(format string, a ...any) { warn(object, format, a...) })
			if !ok {
				continue
			}
			label := sp.ns + "/" + sp.svc + "/" + sp.port
			if labels[label] {
				warn(object, "port %q: a second port of that name: left out", sp.port)
				continue
			}
			dk := destKey{sp.clusterIP, sp.proto, sp.servicePort}
			if other, taken := dests[dk]; taken {
				warn(object, "port %q: %v %s is %s's already: left out", sp.port, netip.AddrPortFrom(dk.addr, dk.port), dk.proto, other)
				continue
			}
			labels[label] = true
			dests[dk] = object
			sp.externalIPs = slices.DeleteFunc(slices.Clone(sp.externalIPs), func(a netip.Addr) bool {
				k := destKey{a, sp.proto, sp.servicePort}
				if other, taken := dests[k]; taken {
					warn(object, "port %q: external %v %s is %s's already: left out", sp.port, netip.AddrPortFrom(a, k.port), k.proto, other)
					return true
				}
				dests[k] = object
				return false
			})
			if sp.nodePort != 0 {
				k := nodePortKey{sp.proto, sp.nodePort}
				if other, taken := nodePorts[k]; taken {
					warn(object, "port %q: node port %d/%s is %s's already: left out", sp.port, k.port, k.proto, other)
					sp.nodePort = 0
				} else {
					nodePorts[k] = object
				}
			}
			sp.all, sp.local = endpointsOf(sp, bySvc[s.Namespace+"/"+s.Name], nodeName, warn)
			p.ports = append(p.ports, sp)
		}
	}
	return p
}

// destKey is a destination of the service-ips map.
type destKey struct {
	addr  netip.Addr
	proto corev1.Protocol
	port  uint16
}

// nodePortKey is a key of the service-nodeports map.
type nodePortKey struct {
	proto corev1.Protocol
	port  uint16
}

// programmable reports whether s is a Service the proxy programs, and its
// cluster IP. ExternalName and headless Services, and the cluster DNS
// Service when it is redirected, are left out quietly.
func programmable(s *corev1.Service, dnsIP netip.Addr, warn func(string, ...any)) (netip.Addr, bool) {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, "":
	case corev1.ServiceTypeExternalName:
		return netip.Addr{}, false
	default:
		warn("type %q is not one of ClusterIP, NodePort, LoadBalancer, ExternalName: left out", s.Spec.Type)
		return netip.Addr{}, false
	}
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		return netip.Addr{}, false
	}
	if len(validation.IsDNS1123Label(s.Namespace)) > 0 || len(validation.IsDNS1035Label(s.Name)) > 0 {
		warn("namespace or name is not a DNS label: left out")
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	switch {
	case err != nil:
		warn("clusterIP %q is not an address: left out", s.Spec.ClusterIP)
		return netip.Addr{}, false
	case !ip.Is4():
		warn("clusterIP %v is not IPv4 (the proxy is IPv4 only): left out", ip)
		return netip.Addr{}, false
	case ip == dnsIP:
		return netip.Addr{}, false
	}
	return ip, true
}

// makeSvcPort is port i of s on top of base, or false if it cannot be
// programmed.
func makeSvcPort(base svcPort, s *corev1.Service, i int, warn func(string, ...any)) (*svcPort, bool) {
	p := s.Spec.Ports[i]
	sp := base
	sp.name, sp.port = p.Name, p.Name
	if sp.port == "" {
		sp.port = strconv.Itoa(int(p.Port))
	} else if len(validation.IsValidPortName(p.Name)) > 0 {
		warn("port %q: not a valid port name: left out", p.Name)
		return nil, false
	}
	switch sp.proto = p.Protocol; sp.proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP:
	case "":
		sp.proto = corev1.ProtocolTCP
	case corev1.ProtocolSCTP:
		warn("port %q: SCTP is not supported: left out", sp.port)
		return nil, false
	default:
		warn("port %q: protocol %q is not TCP or UDP: left out", sp.port, p.Protocol)
		return nil, false
	}
	if p.Port < 1 || p.Port > 65535 {
		warn("port %q: port %d is not in 1..65535: left out", sp.port, p.Port)
		return nil, false
	}
	sp.servicePort = uint16(p.Port)
	if s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		switch {
		case p.NodePort == 0: // a LoadBalancer without node ports
		case p.NodePort < 1 || p.NodePort > 65535:
			warn("port %q: nodePort %d is not in 1..65535: no node port", sp.port, p.NodePort)
		default:
			sp.nodePort = uint16(p.NodePort)
		}
	}
	return &sp, true
}

// slicesByService groups the IPv4 EndpointSlices by "namespace/service"
// (their label kubernetes.io/service-name), each group in name order.
func slicesByService(all []*discoveryv1.EndpointSlice, warn func(string, string, ...any)) map[string][]*discoveryv1.EndpointSlice {
	m := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range all {
		if s == nil || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue // IPv6 and FQDN slices are not the proxy's
		}
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			warn("EndpointSlice "+s.Namespace+"/"+s.Name, "no label %s: left out", discoveryv1.LabelServiceName)
			continue
		}
		k := s.Namespace + "/" + svc
		m[k] = append(m[k], s)
	}
	for _, group := range m {
		slices.SortFunc(group, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	}
	return m
}

// candidate is what the slices say of one endpoint address.
type candidate struct {
	ready, servingTerminating, local bool
}

// endpointsOf are the endpoints of sp in the slices of its Service: all
// are the ready ones, or if none is ready the serving and terminating ones
// (kube-proxy's fallback, so that a rollout's last pods still answer while
// they drain); local are those of them on nodeName, chosen the same way
// among the local ones alone. The target port is the slice port with the
// service port's name and protocol; an endpoint's first address counts;
// an address listed in several slices counts once, ready if any says so.
func endpointsOf(sp *svcPort, group []*discoveryv1.EndpointSlice, nodeName string, warn func(string, string, ...any)) (all, local []endpoint) {
	name := sp.name
	cands := map[netip.AddrPort]*candidate{}
	for _, s := range group {
		object := "EndpointSlice " + s.Namespace + "/" + s.Name
		port, ok := slicePort(s, name, sp.proto)
		if !ok {
			continue
		}
		if port == 0 {
			warn(object, "port %q has no number in 1..65535: left out", name)
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			a, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !a.Is4() {
				warn(object, "endpoint address %q is not IPv4: left out", e.Addresses[0])
				continue
			}
			c := e.Conditions
			ready := c.Ready == nil || *c.Ready
			serving := ready
			if c.Serving != nil {
				serving = *c.Serving
			}
			terminating := c.Terminating != nil && *c.Terminating
			ap := netip.AddrPortFrom(a, port)
			cand := cands[ap]
			if cand == nil {
				cand = &candidate{}
				cands[ap] = cand
			}
			cand.ready = cand.ready || ready
			cand.servingTerminating = cand.servingTerminating || (serving && terminating)
			cand.local = cand.local || (e.NodeName != nil && *e.NodeName == nodeName)
		}
	}
	pick := func(onlyLocal bool) []endpoint {
		var ready, fallback []endpoint
		for ap, c := range cands {
			if onlyLocal && !c.local {
				continue
			}
			switch {
			case c.ready:
				ready = append(ready, endpoint{ap, c.local})
			case c.servingTerminating:
				fallback = append(fallback, endpoint{ap, c.local})
			}
		}
		out := ready
		if len(out) == 0 {
			out = fallback
		}
		slices.SortFunc(out, func(a, b endpoint) int { return a.addr.Compare(b.addr) })
		return out
	}
	return pick(false), pick(true)
}

// slicePort is the number of the port of s named name with protocol proto
// (0 if it has none usable), and whether s has such a port.
func slicePort(s *discoveryv1.EndpointSlice, name string, proto corev1.Protocol) (uint16, bool) {
	for _, p := range s.Ports {
		pname, pproto := "", corev1.ProtocolTCP
		if p.Name != nil {
			pname = *p.Name
		}
		if p.Protocol != nil {
			pproto = *p.Protocol
		}
		if pname != name || pproto != proto {
			continue
		}
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			return 0, true
		}
		return uint16(*p.Port), true
	}
	return 0, false
}

// udpRoute is one way the proxy's DNAT takes UDP to an endpoint: sent to
// dst (a cluster IP or an external IP, and the service port), or to a
// node port on any of the board's addresses (dst not valid).
type udpRoute struct {
	ep       netip.AddrPort
	dst      netip.AddrPort
	nodePort uint16
}

// udpRoutes are the plan's UDP routes to endpoints. Both kinds of traffic
// count every endpoint in use, a superset of those a traffic policy Local
// leaves it.
func (p plan) udpRoutes() map[udpRoute]bool {
	routes := map[udpRoute]bool{}
	for _, sp := range p.ports {
		if sp.proto != corev1.ProtocolUDP {
			continue
		}
		for _, ep := range sp.all {
			routes[udpRoute{ep: ep.addr, dst: netip.AddrPortFrom(sp.clusterIP, sp.servicePort)}] = true
			if sp.nodePort != 0 {
				routes[udpRoute{ep: ep.addr, nodePort: sp.nodePort}] = true
			}
			for _, ip := range sp.externalIPs {
				routes[udpRoute{ep: ep.addr, dst: netip.AddrPortFrom(ip, sp.servicePort)}] = true
			}
		}
	}
	return routes
}

// goneUDPRoutes are the routes of before that now lacks.
func goneUDPRoutes(before, now map[udpRoute]bool) map[udpRoute]bool {
	gone := map[udpRoute]bool{}
	for r := range before {
		if !now[r] {
			gone[r] = true
		}
	}
	return gone
}
