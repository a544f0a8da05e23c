package ingress

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// builder makes a table from a Snapshot. Its problems name the objects
// and the parts of them that were skipped.
type builder struct {
	env   *proxyEnv
	pool  *pool
	certs *certCache

	services map[string]*corev1.Service              // by namespace/name
	slices   map[string][]*discoveryv1.EndpointSlice // by namespace/service name
	secrets  map[string]*corev1.Secret               // by namespace/name
	backends map[string]*backend                     // by namespace/service:port
	t        *table
	problems []string
}

// build makes the table of a Snapshot, taking endpoints from pool and
// certificates from certs, and returns it with the problems it skipped.
func build(s Snapshot, env *proxyEnv, pool *pool, certs *certCache) (*table, []string) {
	b := &builder{
		env: env, pool: pool, certs: certs,
		services: make(map[string]*corev1.Service, len(s.Services)),
		slices:   make(map[string][]*discoveryv1.EndpointSlice),
		secrets:  make(map[string]*corev1.Secret, len(s.Secrets)),
		backends: make(map[string]*backend),
		t: &table{
			exact:    make(map[string]*routes),
			wildcard: make(map[string]*routes),
			certs:    make(map[string]*tls.Certificate),
			wildcert: make(map[string]*tls.Certificate),
		},
	}
	for _, svc := range s.Services {
		if svc != nil {
			b.services[svc.Namespace+"/"+svc.Name] = svc
		}
	}
	for _, sl := range s.Slices {
		if sl == nil || sl.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		if name := sl.Labels[discoveryv1.LabelServiceName]; name != "" {
			key := sl.Namespace + "/" + name
			b.slices[key] = append(b.slices[key], sl)
		}
	}
	for _, sec := range s.Secrets {
		if sec != nil {
			b.secrets[sec.Namespace+"/"+sec.Name] = sec
		}
	}
	for _, ing := range servedIngresses(s.Ingresses, s.Classes) {
		b.addIngress(ing)
	}
	return b.t, b.problems
}

func (b *builder) problemf(ing *networkingv1.Ingress, format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf("ingress %s/%s: ", ing.Namespace, ing.Name)+fmt.Sprintf(format, args...))
}

// addIngress adds what ing defines where no older Ingress defined it.
func (b *builder) addIngress(ing *networkingv1.Ingress) {
	if d := ing.Spec.DefaultBackend; d != nil && b.t.fallback == nil {
		b.t.fallback = b.backend(ing, d, "defaultBackend")
	}
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		r := b.routesOf(ing, i, rule.Host)
		if r == nil {
			continue
		}
		for j, p := range rule.HTTP.Paths {
			exact, key, err := pathKey(p)
			if err != nil {
				b.problemf(ing, "rule %d path %d: %v", i, j, err)
				continue
			}
			m := r.prefix
			if exact {
				m = r.exact
			}
			if _, taken := m[key]; taken {
				continue
			}
			if be := b.backend(ing, &p.Backend, fmt.Sprintf("rule %d path %d", i, j)); be != nil {
				m[key] = be
			}
		}
	}
	for i, t := range ing.Spec.TLS {
		b.addTLS(ing, i, t)
	}
}

// routesOf returns the routes of a rule's host, nil if the host is bad.
func (b *builder) routesOf(ing *networkingv1.Ingress, rule int, host string) *routes {
	host = strings.ToLower(host)
	if host == "" {
		if b.t.anyHost == nil {
			b.t.anyHost = newRoutes()
		}
		return b.t.anyHost
	}
	m, key, err := hostKey(host, b.t.exact, b.t.wildcard)
	if err != nil {
		b.problemf(ing, "rule %d: %v", rule, err)
		return nil
	}
	if m[key] == nil {
		m[key] = newRoutes()
	}
	return m[key]
}

func newRoutes() *routes {
	return &routes{exact: make(map[string]*backend), prefix: make(map[string]*backend)}
}

// hostKey validates a lower-case host and returns the map it goes in
// (exact or, for "*.example.com", wildcard) and its key there.
func hostKey[V any](host string, exact, wildcard map[string]V) (map[string]V, string, error) {
	if strings.HasPrefix(host, "*.") {
		if errs := validation.IsWildcardDNS1123Subdomain(host); len(errs) > 0 {
			return nil, "", fmt.Errorf("host %q: %s", host, strings.Join(errs, "; "))
		}
		return wildcard, host[2:], nil
	}
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return nil, "", fmt.Errorf("host %q: %s", host, strings.Join(errs, "; "))
	}
	return exact, host, nil
}

// pathKey says whether p is an Exact path (else a prefix one) and returns
// its key in the routes' map.
func pathKey(p networkingv1.HTTPIngressPath) (exact bool, key string, err error) {
	typ := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		typ = *p.PathType
	}
	path := p.Path
	switch typ {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
	case networkingv1.PathTypeImplementationSpecific:
		if path == "" {
			path = "/"
		}
	default:
		return false, "", fmt.Errorf("pathType %q: want Exact, Prefix or ImplementationSpecific", typ)
	}
	if !strings.HasPrefix(path, "/") {
		return false, "", fmt.Errorf("path %q of type %s: must start with /", p.Path, typ)
	}
	if typ == networkingv1.PathTypeExact {
		return true, path, nil
	}
	return false, strings.TrimRight(path, "/"), nil
}

// backend returns the backend an IngressBackend of ing names, nil (and a
// problem) if it names none.
func (b *builder) backend(ing *networkingv1.Ingress, ib *networkingv1.IngressBackend, where string) *backend {
	if ib.Resource != nil {
		const key = "resource"
		if b.backends[key] == nil {
			b.backends[key] = &backend{name: key, unavailable: "503 Service Unavailable: resource backends are not supported"}
		}
		return b.backends[key]
	}
	sb := ib.Service
	if sb == nil || sb.Name == "" {
		b.problemf(ing, "%s: backend names no service", where)
		return nil
	}
	var port string
	switch {
	case sb.Port.Number > 0:
		port = strconv.Itoa(int(sb.Port.Number))
	case sb.Port.Name != "":
		port = sb.Port.Name
	default:
		b.problemf(ing, "%s: backend service %q names no port", where, sb.Name)
		return nil
	}
	svcKey := ing.Namespace + "/" + sb.Name
	name := svcKey + ":" + port
	if be := b.backends[name]; be != nil {
		return be
	}
	be := b.resolve(svcKey, sb.Port, name)
	b.backends[name] = be
	return be
}

// resolve makes the backend of a service port from the Service and its
// EndpointSlices.
func (b *builder) resolve(svcKey string, port networkingv1.ServiceBackendPort, name string) *backend {
	unavailable := func(format string, args ...any) *backend {
		return &backend{name: name, unavailable: "503 Service Unavailable: " + fmt.Sprintf(format, args...)}
	}
	svc := b.services[svcKey]
	if svc == nil {
		return unavailable("service %s not found", svcKey)
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
		return port.Number > 0 && sp.Port == port.Number || port.Number == 0 && sp.Name == port.Name
	})
	if i < 0 {
		if port.Number > 0 {
			return unavailable("service %s has no port %d", svcKey, port.Number)
		}
		return unavailable("service %s has no port named %q", svcKey, port.Name)
	}
	sp := svc.Spec.Ports[i]
	if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
		return unavailable("port %d of service %s is %s, not TCP", sp.Port, svcKey, sp.Protocol)
	}
	eps := b.endpoints(svcKey, sp.Name)
	if len(eps) == 0 {
		return unavailable("no ready endpoints for service %s", svcKey)
	}
	return b.env.newBackend(name, eps)
}

// endpoints returns the ready endpoints of a service port, sorted by
// address.
func (b *builder) endpoints(svcKey, portName string) []*endpoint {
	var addrs []string
	for _, sl := range b.slices[svcKey] {
		i := slices.IndexFunc(sl.Ports, func(p discoveryv1.EndpointPort) bool {
			return p.Port != nil && (p.Name == nil && portName == "" || p.Name != nil && *p.Name == portName) &&
				(p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP)
		})
		if i < 0 {
			continue
		}
		port := *sl.Ports[i].Port
		if port <= 0 || port > 65535 {
			b.problems = append(b.problems, fmt.Sprintf("endpointslice %s/%s: port %d out of range", sl.Namespace, sl.Name, port))
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil || !ip.Is4() {
				b.problems = append(b.problems, fmt.Sprintf("endpointslice %s/%s: address %q is not IPv4", sl.Namespace, sl.Name, ep.Addresses[0]))
				continue
			}
			addrs = append(addrs, netip.AddrPortFrom(ip, uint16(port)).String())
		}
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	eps := make([]*endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = b.pool.get(a)
	}
	return eps
}

// addTLS adds the certificate of ing's i-th TLS entry for the hosts that
// have none yet.
func (b *builder) addTLS(ing *networkingv1.Ingress, i int, t networkingv1.IngressTLS) {
	if t.SecretName == "" {
		b.problemf(ing, "tls %d: no secretName", i)
		return
	}
	hosts := t.Hosts
	if len(hosts) == 0 {
		for _, r := range ing.Spec.Rules {
			if r.Host != "" {
				hosts = append(hosts, r.Host)
			}
		}
	}
	key := ing.Namespace + "/" + t.SecretName
	cert, err := b.certs.get(key, b.secrets[key])
	if err != nil {
		b.problemf(ing, "tls %d: secret %s: %v", i, key, err)
		return
	}
	for _, h := range hosts {
		m, k, err := hostKey(strings.ToLower(h), b.t.certs, b.t.wildcert)
		if err != nil {
			b.problemf(ing, "tls %d: %v", i, err)
			continue
		}
		if m[k] == nil {
			m[k] = cert
		}
	}
}
