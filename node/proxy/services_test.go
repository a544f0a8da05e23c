package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Objects for the tests that need no root (the rig's helpers are Linux
// only).

func svcOf(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, Ports: ports},
	}
}

func portOf(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

func sliceOf(ns, svc, name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps,
	}
}

func epPort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port}
}

// ep is an endpoint at ip on node; conds is a string of r (ready), s
// (serving), t (terminating), or "nil" for no conditions at all.
func ep(ip, node, conds string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node}
	if conds != "nil" {
		e.Conditions = discoveryv1.EndpointConditions{
			Ready:       boolPtr(strings.Contains(conds, "r")),
			Serving:     boolPtr(strings.Contains(conds, "s")),
			Terminating: boolPtr(strings.Contains(conds, "t")),
		}
	}
	return e
}

func boolPtr(b bool) *bool { return &b }

// eps writes endpoints as "10.42.1.2:8080" (local ones with a "*").
func eps(es []endpoint) []string {
	var out []string
	for _, e := range es {
		s := e.addr.String()
		if e.local {
			s += "*"
		}
		out = append(out, s)
	}
	return out
}

func TestEndpointsOf(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	httpPorts := []discoveryv1.EndpointPort{epPort("http", tcp, 8080), epPort("http", udp, 9090), epPort("admin", tcp, 7070)}
	for _, tc := range []struct {
		name       string
		port       string // the service port's name
		proto      corev1.Protocol
		slices     []*discoveryv1.EndpointSlice
		all, local []string
		warnings   int
	}{
		{
			name: "ready ones, nil conditions being ready", port: "http", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-1", httpPorts,
				ep("10.42.1.3", "n1", "rs"), ep("10.42.1.2", "n2", "nil"), ep("10.42.1.4", "n1", ""))},
			all: []string{"10.42.1.2:8080", "10.42.1.3:8080*"}, local: []string{"10.42.1.3:8080*"},
		},
		{
			name: "the port of the same name and protocol", port: "http", proto: udp,
			slices: []*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-1", httpPorts, ep("10.42.1.2", "n1", "r"))},
			all:    []string{"10.42.1.2:9090*"}, local: []string{"10.42.1.2:9090*"},
		},
		{
			name: "an unnamed port", port: "", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-1",
				[]discoveryv1.EndpointPort{{Port: ptrTo[int32](80)}}, ep("10.42.1.2", "n2", "r"))},
			all: []string{"10.42.1.2:80"},
		},
		{
			name: "a slice without the port counts for nothing", port: "metrics", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-1", httpPorts, ep("10.42.1.2", "n1", "r"))},
		},
		{
			name: "an address in two slices counts once, ready if one says so", port: "http", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{
				sliceOf("default", "web", "web-1", httpPorts, ep("10.42.1.2", "n1", "")),
				sliceOf("default", "web", "web-2", httpPorts, ep("10.42.1.2", "n1", "rs"), ep("10.42.1.5", "n2", "rs")),
			},
			all: []string{"10.42.1.2:8080*", "10.42.1.5:8080"}, local: []string{"10.42.1.2:8080*"},
		},
		{
			name: "none ready: the serving terminating ones", port: "http", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-1", httpPorts,
				ep("10.42.1.2", "n1", "st"), ep("10.42.1.3", "n2", "t"), ep("10.42.1.4", "n2", "st"), ep("10.42.1.5", "n2", "s"))},
			all: []string{"10.42.1.2:8080*", "10.42.1.4:8080"}, local: []string{"10.42.1.2:8080*"},
		},
		{
			name: "the local ones fall back on their own", port: "http", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-1", httpPorts,
				ep("10.42.2.2", "n2", "rs"), ep("10.42.1.2", "n1", "st"))},
			all: []string{"10.42.2.2:8080"}, local: []string{"10.42.1.2:8080*"},
		},
		{
			name: "bad addresses and ports are left out", port: "http", proto: tcp,
			slices: []*discoveryv1.EndpointSlice{
				sliceOf("default", "web", "web-1", httpPorts, ep("10.42.1.256", "n1", "r"), ep("fd00::1", "n1", "r"), ep("10.42.1.2", "n1", "r")),
				sliceOf("default", "web", "web-2", []discoveryv1.EndpointPort{{Name: ptrTo("http")}}, ep("10.42.1.3", "n1", "r")),
			},
			all: []string{"10.42.1.2:8080*"}, local: []string{"10.42.1.2:8080*"}, warnings: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []string
			warn := func(object, format string, a ...any) {
				warnings = append(warnings, object+": "+fmt.Sprintf(format, a...))
			}
			sp := &svcPort{ns: "default", svc: "web", name: tc.port, port: tc.port, proto: tc.proto}
			all, local := endpointsOf(sp, slicesByService(tc.slices, warn)["default/web"], "n1", warn)
			if got := eps(all); !slices.Equal(got, tc.all) {
				t.Errorf("all = %v; want %v", got, tc.all)
			}
			if got := eps(local); !slices.Equal(got, tc.local) {
				t.Errorf("local = %v; want %v", got, tc.local)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q; want %d", warnings, tc.warnings)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// planOf is the plan's ports as "ns/svc/port proto clusterIP:port
// [node N] [ext A,B] [iLocal] [eLocal] [affinity D] all=[...]".
func planOf(p plan) []string {
	var out []string
	for _, sp := range p.ports {
		s := fmt.Sprintf("%s/%s/%s %s %v", sp.ns, sp.svc, sp.port, sp.proto, netip.AddrPortFrom(sp.clusterIP, sp.servicePort))
		if sp.nodePort != 0 {
			s += fmt.Sprintf(" node %d", sp.nodePort)
		}
		if len(sp.externalIPs) > 0 {
			s += fmt.Sprintf(" ext %v", sp.externalIPs)
		}
		if sp.internalLocal {
			s += " iLocal"
		}
		if sp.externalLocal {
			s += " eLocal"
		}
		if sp.affinity > 0 {
			s += " affinity " + sp.affinity.String()
		}
		out = append(out, s+fmt.Sprintf(" all=%v", eps(sp.all)))
	}
	return out
}

func TestMakePlan(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	dns := netip.MustParseAddr("10.43.0.10")
	mod := func(s *corev1.Service, f func(*corev1.Service)) *corev1.Service { f(s); return s }
	for _, tc := range []struct {
		name     string
		svcs     []*corev1.Service
		slices   []*discoveryv1.EndpointSlice
		want     []string
		warnings []string // parts of the warnings, in order
	}{
		{
			name: "types",
			svcs: []*corev1.Service{
				svcOf("default", "plain", "10.43.0.1", portOf("http", tcp, 80)),
				svcOf("default", "headless", "None", portOf("http", tcp, 80)),
				mod(svcOf("default", "external", "", portOf("http", tcp, 80)), func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }),
				mod(svcOf("default", "np", "10.43.0.2", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeNodePort
					s.Spec.Ports[0].NodePort = 30080
				}),
				mod(svcOf("default", "lb", "10.43.0.3", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeLoadBalancer
					s.Spec.Ports[0].NodePort = 30081
				}),
				mod(svcOf("default", "cip", "10.43.0.4", portOf("http", tcp, 80)), func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30082 }),
				svcOf("kube-system", "kube-dns", "10.43.0.10", portOf("dns", udp, 53)),
			},
			want: []string{
				"default/cip/http TCP 10.43.0.4:80 all=[]",
				"default/lb/http TCP 10.43.0.3:80 node 30081 all=[]",
				"default/np/http TCP 10.43.0.2:80 node 30080 all=[]",
				"default/plain/http TCP 10.43.0.1:80 all=[]",
			},
		},
		{
			name: "odd services and ports are left out",
			svcs: []*corev1.Service{
				svcOf("default", "badip", "10.43.0.300", portOf("http", tcp, 80)),
				svcOf("default", "v6", "fd00::1", portOf("http", tcp, 80)),
				svcOf("default", "Bad_Name", "10.43.0.5", portOf("http", tcp, 80)),
				svcOf("default", "ports", "10.43.0.6", portOf("sctp", corev1.ProtocolSCTP, 80), portOf("icmp", "ICMP", 1),
					portOf("zero", tcp, 0), portOf("", "", 8080), portOf("http", tcp, 81), portOf("http", udp, 82)),
				mod(svcOf("default", "ext", "10.43.0.7", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.ExternalIPs = []string{"192.168.1.50", "bad", "fd00::2"}
				}),
			},
			want: []string{
				"default/ext/http TCP 10.43.0.7:80 ext [192.168.1.50] all=[]",
				"default/ports/8080 TCP 10.43.0.6:8080 all=[]",
				"default/ports/http TCP 10.43.0.6:81 all=[]",
			},
			warnings: []string{"namespace or name", "clusterIP \"10.43.0.300\"", "externalIP \"bad\"", "externalIP \"fd00::2\"",
				"SCTP", "protocol \"ICMP\"", "port 0", "a second port of that name", "not IPv4"},
		},
		{
			name: "a destination or node port held by another service",
			svcs: []*corev1.Service{
				mod(svcOf("a", "first", "10.43.0.8", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeNodePort
					s.Spec.Ports[0].NodePort = 30090
				}),
				svcOf("b", "same-ip", "10.43.0.8", portOf("http", tcp, 80), portOf("dns", udp, 53)),
				mod(svcOf("b", "same-nodeport", "10.43.0.9", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeNodePort
					s.Spec.Ports[0].NodePort = 30090
				}),
				svcOf("c", "dns-clash", "10.43.0.11", portOf("dns", udp, 53)),
				mod(svcOf("c", "ext-on-dns", "10.43.0.12", portOf("dns", udp, 53)), func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.43.0.10"} }),
			},
			want: []string{
				"a/first/http TCP 10.43.0.8:80 node 30090 all=[]",
				"b/same-ip/dns UDP 10.43.0.8:53 all=[]",
				"b/same-nodeport/http TCP 10.43.0.9:80 all=[]",
				"c/dns-clash/dns UDP 10.43.0.11:53 all=[]",
				"c/ext-on-dns/dns UDP 10.43.0.12:53 all=[]",
			},
			warnings: []string{"is Service a/first's already", "node port 30090/TCP is Service a/first's already",
				"external 10.43.0.10:53 UDP is the cluster DNS redirect's already"},
		},
		{
			name: "policies and affinity",
			svcs: []*corev1.Service{
				mod(svcOf("default", "local", "10.43.0.13", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeNodePort
					s.Spec.Ports[0].NodePort = 30091
					s.Spec.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicyLocal)
					s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				}),
				mod(svcOf("default", "sticky", "10.43.0.14", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				}),
				mod(svcOf("default", "sticky-short", "10.43.0.15", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
					s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo[int32](60)}}
				}),
				mod(svcOf("default", "sticky-odd", "10.43.0.16", portOf("http", tcp, 80)), func(s *corev1.Service) {
					s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
					s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo[int32](0)}}
				}),
			},
			want: []string{
				"default/local/http TCP 10.43.0.13:80 node 30091 iLocal eLocal all=[]",
				"default/sticky/http TCP 10.43.0.14:80 affinity " + (10800 * time.Second).String() + " all=[]",
				"default/sticky-odd/http TCP 10.43.0.16:80 affinity " + (10800 * time.Second).String() + " all=[]",
				"default/sticky-short/http TCP 10.43.0.15:80 affinity 1m0s all=[]",
			},
			warnings: []string{"timeoutSeconds 0"},
		},
		{
			name: "slices by namespace and label",
			svcs: []*corev1.Service{svcOf("default", "web", "10.43.0.17", portOf("http", tcp, 80))},
			slices: []*discoveryv1.EndpointSlice{
				sliceOf("default", "web", "web-1", []discoveryv1.EndpointPort{epPort("http", tcp, 8080)}, ep("10.42.1.2", "n1", "r")),
				sliceOf("other", "web", "web-1", []discoveryv1.EndpointPort{epPort("http", tcp, 8080)}, ep("10.42.1.3", "n1", "r")),
				sliceOf("default", "api", "api-1", []discoveryv1.EndpointPort{epPort("http", tcp, 8080)}, ep("10.42.1.4", "n1", "r")),
				mod2(sliceOf("default", "web", "web-v6", []discoveryv1.EndpointPort{epPort("http", tcp, 8080)}, ep("fd00::5", "n1", "r")),
					func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 }),
				mod2(sliceOf("default", "", "stray", nil), func(s *discoveryv1.EndpointSlice) { s.Labels = nil }),
				nil,
			},
			want:     []string{"default/web/http TCP 10.43.0.17:80 all=[10.42.1.2:8080*]"},
			warnings: []string{"EndpointSlice default/stray: no label"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := makePlan(append(tc.svcs, nil), tc.slices, "n1", dns)
			if got := planOf(p); !slices.Equal(got, tc.want) {
				t.Errorf("ports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			var got []string
			for _, w := range p.warnings {
				got = append(got, w.object+": "+w.reason)
			}
			if len(got) != len(tc.warnings) {
				t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: %q; want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func mod2(s *discoveryv1.EndpointSlice, f func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	f(s)
	return s
}

func TestConfigValidate(t *testing.T) {
	good := Config{NodeName: "n1", PodCIDR: netip.MustParsePrefix("10.42.1.0/24")}
	c, err := good.validate()
	if err != nil || c.ClusterCIDR != DefaultClusterCIDR || c.Logger == nil {
		t.Errorf("validate(%+v) = %+v, %v; want the defaults filled", good, c, err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"relative netns", func(c *Config) { c.Netns = "run/ns" }, "Netns"},
		{"no node name", func(c *Config) { c.NodeName = "" }, "NodeName"},
		{"no pod CIDR", func(c *Config) { c.PodCIDR = netip.Prefix{} }, "PodCIDR: required"},
		{"pod CIDR with host bits", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.42.1.1/24") }, "no host bits"},
		{"pod CIDR outside", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.50.1.0/24") }, "outside ClusterCIDR"},
		{"IPv6 cluster CIDR", func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("fd00::/64") }, "ClusterCIDR"},
		{"half a DNS redirect", func(c *Config) { c.DNS.ServiceIP = netip.MustParseAddr("10.43.0.10") }, "DNS"},
		{"IPv6 DNS target", func(c *Config) {
			c.DNS = DNSRedirect{ServiceIP: netip.MustParseAddr("10.43.0.10"), Target: netip.MustParseAddr("fd00::1")}
		}, "DNS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			if _, err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate: %v; want an error about %s", err, tc.want)
			}
		})
	}
}
