package dns

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SpecVersion is the version of the Kubernetes DNS specification this
// package answers by; it is the TXT record of dns-version.<domain>.
const SpecVersion = "1.1.0"

// table is the record table of the cluster domain, built whole by
// buildTable and never changed after: queries share it without locks.
type table struct {
	// domain is the cluster domain, lower case with a trailing dot.
	domain string
	// serial is the SOA serial: the build time in seconds.
	serial uint32
	// names holds every name of the domain that exists (empty
	// non-terminals too, as empty nodes), keyed by lower-case FQDN.
	names map[string]*node
	// ptr holds the names of the cluster IPs and headless endpoints.
	ptr map[netip.Addr][]string
	// podSuffix is "pod.<domain>"; names under it are made up on demand.
	podSuffix string
}

// node is what one name holds. Targets are lower-case FQDNs.
type node struct {
	addrs []netip.Addr // A and AAAA
	cname string       // ExternalName
	srvs  []srvRecord  // SRV, sorted by target then port
	txt   string       // TXT (dns-version only)
}

// srvRecord is one SRV record; the addresses of its target are the target
// node's.
type srvRecord struct {
	target string
	port   uint16
}

// builder collects the records of a table.
type builder struct {
	t   *table
	log *slog.Logger
}

// buildTable makes the table of domain (lower case, no trailing dot) from
// the services and endpoint slices; nsAddrs are the addresses of
// ns.dns.<domain>, the name server of the SOA. Objects with names that are
// no DNS labels, or addresses that do not parse, are skipped with a
// warning: the API server should have rejected them.
func buildTable(domain string, serial uint32, nsAddrs []netip.Addr, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, log *slog.Logger) *table {
	zone := domain + "."
	b := &builder{log: log, t: &table{
		domain:    zone,
		serial:    serial,
		names:     make(map[string]*node, 2*len(svcs)+8),
		ptr:       make(map[netip.Addr][]string, len(svcs)),
		podSuffix: "pod." + zone,
	}}
	b.node(b.t.podSuffix)
	b.node("svc." + zone)
	b.node("dns-version." + zone).txt = SpecVersion
	b.node("ns.dns." + zone).addrs = slices.Clone(nsAddrs)

	byService := make(map[string][]*discoveryv1.EndpointSlice)
	for _, es := range eps {
		if es == nil || es.Labels[discoveryv1.LabelServiceName] == "" {
			continue
		}
		k := es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]
		byService[k] = append(byService[k], es)
	}
	for _, svc := range svcs {
		if svc == nil {
			continue
		}
		if err := checkLabel(svc.Namespace); err != nil {
			b.log.Warn("dns: skipping a service with a bad namespace", "service", svc.Namespace+"/"+svc.Name, "err", err)
			continue
		}
		if err := checkLabel(svc.Name); err != nil {
			b.log.Warn("dns: skipping a service with a bad name", "service", svc.Namespace+"/"+svc.Name, "err", err)
			continue
		}
		name := strings.ToLower(svc.Name + "." + svc.Namespace + ".svc." + zone)
		switch {
		case svc.Spec.Type == corev1.ServiceTypeExternalName:
			b.externalName(name, svc)
		case svc.Spec.ClusterIP == corev1.ClusterIPNone:
			b.headless(name, svc, byService[svc.Namespace+"/"+svc.Name])
		default:
			b.clusterIP(name, svc)
		}
	}
	for _, n := range b.t.names {
		slices.SortFunc(n.addrs, netip.Addr.Compare)
		n.addrs = slices.Compact(n.addrs)
		slices.SortFunc(n.srvs, func(a, b srvRecord) int {
			return cmp.Or(strings.Compare(a.target, b.target), cmp.Compare(a.port, b.port))
		})
		n.srvs = slices.Compact(n.srvs)
	}
	for a, names := range b.t.ptr {
		slices.Sort(names)
		b.t.ptr[a] = slices.Compact(names)
	}
	return b.t
}

// node returns the node of name, making it and its parents up to the
// domain.
func (b *builder) node(name string) *node {
	n := b.t.names[name]
	if n != nil {
		return n
	}
	n = &node{}
	b.t.names[name] = n
	for p := name; ; {
		i := strings.IndexByte(p, '.')
		p = p[i+1:]
		if len(p) <= len(b.t.domain) {
			return n
		}
		if _, ok := b.t.names[p]; ok {
			return n
		}
		b.t.names[p] = &node{}
	}
}

func (b *builder) externalName(name string, svc *corev1.Service) {
	target := strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, "."))
	if msgs := validation.IsDNS1123Subdomain(target); len(msgs) > 0 {
		b.log.Warn("dns: skipping a bad externalName", "service", svc.Namespace+"/"+svc.Name, "externalName", svc.Spec.ExternalName, "err", strings.Join(msgs, "; "))
		return
	}
	b.node(name).cname = target + "."
}

func (b *builder) clusterIP(name string, svc *corev1.Service) {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	n := b.node(name)
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			b.log.Warn("dns: skipping a bad cluster IP", "service", svc.Namespace+"/"+svc.Name, "ip", s)
			continue
		}
		n.addrs = append(n.addrs, a)
		b.t.ptr[a] = append(b.t.ptr[a], name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "" || p.Port <= 0 || p.Port > 65535 {
			continue
		}
		b.srv(name, p.Name, p.Protocol, srvRecord{target: name, port: uint16(p.Port)})
	}
}

// headless adds the ready endpoints of the slices of a headless service.
// Without any, the name does not exist (NXDOMAIN), as the Kubernetes DNS
// specification and CoreDNS have it.
func (b *builder) headless(name string, svc *corev1.Service, eps []*discoveryv1.EndpointSlice) {
	for _, es := range eps {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, ep := range es.Endpoints {
			if !svc.Spec.PublishNotReadyAddresses && ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			host := ""
			if ep.Hostname != nil && *ep.Hostname != "" {
				if err := checkLabel(*ep.Hostname); err != nil {
					b.log.Warn("dns: naming an endpoint with a bad hostname by its address", "endpointslice", es.Namespace+"/"+es.Name, "err", err)
				} else {
					host = strings.ToLower(*ep.Hostname)
				}
			}
			for _, s := range ep.Addresses {
				a, err := netip.ParseAddr(s)
				if err != nil || a.Zone() != "" || a.Is4() != (es.AddressType == discoveryv1.AddressTypeIPv4) {
					b.log.Warn("dns: skipping a bad endpoint address", "endpointslice", es.Namespace+"/"+es.Name, "address", s)
					continue
				}
				label := host
				if label == "" {
					label = dashed(a)
				}
				target := label + "." + name
				n := b.node(name)
				n.addrs = append(n.addrs, a)
				en := b.node(target)
				en.addrs = append(en.addrs, a)
				b.t.ptr[a] = append(b.t.ptr[a], target)
				for _, p := range es.Ports {
					if p.Name == nil || *p.Name == "" || p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
						continue
					}
					proto := corev1.ProtocolTCP
					if p.Protocol != nil {
						proto = *p.Protocol
					}
					b.srv(name, *p.Name, proto, srvRecord{target: target, port: uint16(*p.Port)})
				}
			}
		}
	}
}

// srv adds an SRV record of the port named port of the service name.
func (b *builder) srv(name, port string, proto corev1.Protocol, r srvRecord) {
	if err := checkLabel(port); err != nil {
		b.log.Warn("dns: skipping the SRV record of a bad port name", "name", name, "err", err)
		return
	}
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	n := b.node(strings.ToLower("_" + port + "._" + string(proto) + "." + name))
	n.srvs = append(n.srvs, r)
}

// checkLabel rejects what is no DNS label (RFC 1123).
func checkLabel(s string) error {
	if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
		return fmt.Errorf("%q: %s", s, strings.Join(msgs, "; "))
	}
	return nil
}

// dashed is the label of an address with dashes for its dots or colons,
// e.g. 10-42-3-7.
func dashed(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	return strings.ReplaceAll(a.String(), ":", "-")
}
