package printers

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Printers of services and the configuration objects of core/v1.

func printService(svc *corev1.Service, now time.Time) []interface{} {
	clusterIP := none
	switch {
	case len(svc.Spec.ClusterIPs) > 0:
		clusterIP = svc.Spec.ClusterIPs[0]
	case svc.Spec.ClusterIP != "":
		// Not yet defaulted into clusterIPs.
		clusterIP = svc.Spec.ClusterIP
	}
	return []interface{}{
		svc.Name,
		string(svc.Spec.Type),
		clusterIP,
		serviceExternalIP(svc),
		orNone(servicePorts(svc.Spec.Ports)),
		since(svc.CreationTimestamp, now),
		labels.FormatLabels(svc.Spec.Selector),
	}
}

// serviceExternalIP is the EXTERNAL-IP cell: the external IPs, for a load
// balancer its ingress points first ("<pending>" while it has none), for an
// ExternalName service the name.
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return none
	case corev1.ServiceTypeLoadBalancer:
		ingress := svc.Status.LoadBalancer.Ingress
		ips := make([]string, len(ingress))
		hostnames := make([]string, len(ingress))
		for i := range ingress {
			ips[i], hostnames[i] = ingress[i].IP, ingress[i].Hostname
		}
		lb := loadBalancerAddresses(ips, hostnames)
		if len(svc.Spec.ExternalIPs) > 0 {
			var all []string
			if lb != "" {
				all = strings.Split(lb, ",")
			}
			return strings.Join(append(all, svc.Spec.ExternalIPs...), ",")
		}
		if lb != "" {
			return lb
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return unknown
}

// servicePorts is "port/protocol" or "port:nodePort/protocol" for each port,
// comma-separated.
func servicePorts(ports []corev1.ServicePort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			parts[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			parts[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(parts, ",")
}

func printEndpoints(ep *corev1.Endpoints, now time.Time) []interface{} {
	return []interface{}{ep.Name, endpointsList(ep), since(ep.CreationTimestamp, now)}
}

// endpointsList shows up to three addresses ("ip:port", or "ip" in a subset
// without ports), one per address and port, then how many more there are.
func endpointsList(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return none
	}
	l := shortList{limit: 3}
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				l.add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				l.add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	if l.total == 0 {
		return ""
	}
	return l.String()
}

func printConfigMap(cm *corev1.ConfigMap, now time.Time) []interface{} {
	return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), since(cm.CreationTimestamp, now)}
}

func printPodTemplate(t *corev1.PodTemplate, _ time.Time) []interface{} {
	names, images := containerCells(t.Template.Spec.Containers)
	return []interface{}{t.Name, names, images, labels.FormatLabels(t.Template.Labels)}
}

func printSecret(s *corev1.Secret, now time.Time) []interface{} {
	// stringData is write-only: Kubernetes merges it into data on the way in.
	keys := len(s.Data)
	for k := range s.StringData {
		if _, ok := s.Data[k]; !ok {
			keys++
		}
	}
	return []interface{}{s.Name, string(s.Type), int64(keys), since(s.CreationTimestamp, now)}
}

func printServiceAccount(sa *corev1.ServiceAccount, now time.Time) []interface{} {
	return []interface{}{sa.Name, int64(len(sa.Secrets)), since(sa.CreationTimestamp, now)}
}
