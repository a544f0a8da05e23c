package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIngressRows(t *testing.T) {
	tls := tlsIngress()
	plain := plainIngress()

	manyHosts := networkingv1.Ingress{
		ObjectMeta: meta("many", time.Hour),
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
			{}, {Host: "a.example.com"}, {Host: "b.example.com"}, {Host: "c.example.com"}, {Host: "d.example.com"},
		}},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
			{Hostname: "lb.example.com"}, {IP: "192.168.1.241"}, {IP: "192.168.1.240"},
		}}},
	}
	hostlessTail := networkingv1.Ingress{
		ObjectMeta: meta("tail", time.Hour),
		Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "a.example.com"}, {}, {}, {}, {}}},
	}
	exactlyThree := networkingv1.Ingress{
		ObjectMeta: meta("three", time.Hour),
		Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "a.example.com"}, {Host: "b.example.com"}, {Host: "c.example.com"}}},
	}

	tests := []struct {
		name string
		ing  *networkingv1.Ingress
		want []interface{}
	}{
		{"tls with class and address", &tls, []interface{}{"shop", "nginx", "shop.example.com,www.shop.example.com", "192.168.1.240", "80, 443", "6h"}},
		{"default backend only", &plain, []interface{}{"catch-all", "<none>", "*", "", "80", "45s"}},
		{"more than three hosts", &manyHosts, []interface{}{"many", "<none>", "a.example.com,b.example.com,c.example.com + 2 more...", "192.168.1.240,192.168.1.241,lb.example.com", "80", "60m"}},
		{"hostless rules after a host", &hostlessTail, []interface{}{"tail", "<none>", "a.example.com", "", "80", "60m"}},
		{"exactly three hosts", &exactlyThree, []interface{}{"three", "<none>", "a.example.com,b.example.com,c.example.com", "", "80", "60m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("networking.k8s.io", "ingresses"), tt.ing, tt.want)
		})
	}
}

func TestIngressClassRows(t *testing.T) {
	withParams := ingressClass()
	coreParams := ingressClass()
	coreParams.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "traefik-config", Scope: ptr("Namespace"), Namespace: ptr("kube-system")}
	bare := networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "isle", CreationTimestamp: ago(time.Minute)}, Spec: networkingv1.IngressClassSpec{Controller: "isle.dev/ingress"}}

	tests := []struct {
		name string
		ic   *networkingv1.IngressClass
		want []interface{}
	}{
		{"parameters with group", &withParams, []interface{}{"nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb", "7d"}},
		{"parameters in core", &coreParams, []interface{}{"nginx", "k8s.io/ingress-nginx", "ConfigMap/traefik-config", "7d"}},
		{"no parameters", &bare, []interface{}{"isle", "isle.dev/ingress", "<none>", "60s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("networking.k8s.io", "ingressclasses"), tt.ic, tt.want)
		})
	}
}

func TestEndpointSliceRows(t *testing.T) {
	web := endpointSlice()
	big := discoveryv1.EndpointSlice{
		ObjectMeta:  meta("big-x1", time.Hour),
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports: []discoveryv1.EndpointPort{
			{Port: ptr(int32(80))}, {Name: ptr("named")}, {}, {Port: ptr(int32(443)), Protocol: ptr(corev1.ProtocolTCP)},
		},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"fd00::1", "fd00::2"}}, {Addresses: []string{"fd00::3"}}, {Addresses: []string{"fd00::4"}},
		},
	}
	empty := discoveryv1.EndpointSlice{ObjectMeta: meta("empty-z9", time.Minute), AddressType: discoveryv1.AddressTypeFQDN}

	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  []interface{}
	}{
		{"two endpoints", &web, []interface{}{"web-abc12", "IPv4", "8080", "10.244.1.5,10.244.2.7", "2d"}},
		{"more than three", &big, []interface{}{"big-x1", "IPv6", "80,named,* + 1 more...", "fd00::1,fd00::2,fd00::3 + 1 more...", "60m"}},
		{"empty", &empty, []interface{}{"empty-z9", "FQDN", "<unset>", "<unset>", "60s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("discovery.k8s.io", "endpointslices"), tt.slice, tt.want)
		})
	}
}
