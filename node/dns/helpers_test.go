package dns

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// service is a ClusterIP service (headless with "None", ExternalName with
// a clusterIP starting "ext:").
func service(ns, name, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, Ports: ports},
	}
	if target, ok := strings.CutPrefix(clusterIP, "ext:"); ok {
		s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target}
	} else if clusterIP != corev1.ClusterIPNone {
		s.Spec.ClusterIPs = []string{clusterIP}
	}
	return s
}

func port(name string, proto corev1.Protocol, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: n}
}

func slicePort(name string, proto corev1.Protocol, n int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &n}
}

// endpoint is an endpoint; ready is "yes", "no" or "" (unset, ready).
func endpoint(addr, ready, hostname string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{addr}}
	switch ready {
	case "yes":
		ep.Conditions.Ready = ptr.To(true)
	case "no":
		ep.Conditions.Ready = ptr.To(false)
	}
	if hostname != "" {
		ep.Hostname = &hostname
	}
	return ep
}

func endpointSlice(ns, svc, name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       ports,
	}
}

// fixture is a small cluster:
//
//	default/web     10.43.0.20, ports http 80/TCP and an unnamed one
//	default/db      headless: db-0 10.42.1.5, 10.42.2.6, 10.42.1.8 ready;
//	                db-2 10.42.3.7 not ready; port pg 5432/TCP (two slices)
//	default/empty   headless, no endpoints
//	default/ext     ExternalName example.com
//	default/alias   ExternalName web.default.svc.cluster.local
//	kube-system/kube-dns 10.43.0.10, ports dns 53/UDP, dns-tcp 53/TCP
func fixture() ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	pg := []discoveryv1.EndpointPort{slicePort("pg", corev1.ProtocolTCP, 5432)}
	svcs := []*corev1.Service{
		service("default", "web", "10.43.0.20", port("http", corev1.ProtocolTCP, 80), port("", corev1.ProtocolTCP, 8080)),
		service("default", "db", "None", port("pg", corev1.ProtocolTCP, 15432)),
		service("default", "empty", "None", port("x", corev1.ProtocolTCP, 1)),
		service("default", "ext", "ext:Example.com"),
		service("default", "alias", "ext:web.default.svc.cluster.local"),
		service("kube-system", "kube-dns", "10.43.0.10", port("dns", corev1.ProtocolUDP, 53), port("dns-tcp", corev1.ProtocolTCP, 53)),
	}
	slices := []*discoveryv1.EndpointSlice{
		endpointSlice("default", "db", "db-a", pg,
			endpoint("10.42.1.5", "yes", "db-0"),
			endpoint("10.42.3.7", "no", "db-2"),
		),
		endpointSlice("default", "db", "db-b", pg,
			endpoint("10.42.2.6", "", ""),
			endpoint("10.42.1.8", "yes", ""),
		),
		// Same name in another namespace: not db's.
		endpointSlice("other", "db", "db-c", pg, endpoint("10.42.9.9", "", "")),
		// Endpoints of a normal service are not in its records.
		endpointSlice("default", "web", "web-a", nil, endpoint("10.42.4.4", "", "")),
	}
	return svcs, slices
}

// rrStrings are the records in presentation format with single spaces.
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, strings.Join(strings.Fields(rr.String()), " "))
	}
	return out
}

func rcodeName(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return fmt.Sprint(rc)
}

// boundAddrs are the addresses the server listens on, for Config.Addrs
// with port 0.
func (s *Server) boundAddrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var addrs []string
	for _, srv := range s.servers {
		if srv.PacketConn != nil {
			addrs = append(addrs, srv.PacketConn.LocalAddr().String())
		}
	}
	return addrs
}
