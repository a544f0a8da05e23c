package printers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Printers of networking objects: ingresses, ingress classes, endpoint
// slices.

func printIngress(ing *networkingv1.Ingress, now time.Time) []interface{} {
	class := stringOr(ing.Spec.IngressClassName, none)
	ingress := ing.Status.LoadBalancer.Ingress
	ips := make([]string, len(ingress))
	hostnames := make([]string, len(ingress))
	for i := range ingress {
		ips[i], hostnames[i] = ingress[i].IP, ingress[i].Hostname
	}
	ports := "80"
	if len(ing.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	return []interface{}{
		ing.Name,
		class,
		ingressHosts(ing.Spec.Rules),
		loadBalancerAddresses(ips, hostnames),
		ports,
		since(ing.CreationTimestamp, now),
	}
}

// ingressHosts lists the rules' hosts up to three ("*" when no rule names
// one); when a rule follows the third host, it adds how many rules there
// are beyond three.
func ingressHosts(rules []networkingv1.IngressRule) string {
	const limit = 3
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == limit {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	s := strings.Join(hosts, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", s, len(rules)-limit)
	}
	return s
}

func printIngressClass(ic *networkingv1.IngressClass, now time.Time) []interface{} {
	params := none
	if p := ic.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []interface{}{ic.Name, ic.Spec.Controller, params, since(ic.CreationTimestamp, now)}
}

func printNetworkPolicy(np *networkingv1.NetworkPolicy, now time.Time) []interface{} {
	return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), since(np.CreationTimestamp, now)}
}

func printEndpointSlice(es *discoveryv1.EndpointSlice, now time.Time) []interface{} {
	ports := shortList{limit: 3}
	for _, p := range es.Ports {
		switch {
		case p.Port != nil:
			ports.add(strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			ports.add(*p.Name)
		default:
			ports.add("*")
		}
	}
	endpoints := shortList{limit: 3}
	for _, ep := range es.Endpoints {
		for _, a := range ep.Addresses {
			endpoints.add(a)
		}
	}
	return []interface{}{es.Name, string(es.AddressType), ports.String(), endpoints.String(), since(es.CreationTimestamp, now)}
}
