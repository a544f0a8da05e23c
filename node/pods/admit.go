package pods

import (
	corev1 "k8s.io/api/core/v1"
)

// A pod whose host ports another pod of the board holds is refused, as
// the kubelet's NodePorts admission does: it fails at once, and its
// controller makes another (a StatefulSet's, again and again, until the
// port is free).
const (
	hostPortReason  = "NodePorts"
	hostPortMessage = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
)

// hostPortTaken reports whether another live pod of the board holds one
// of pod's host ports: a pod that started, or one created before it (the
// kubelet admits pods in creation order).
func (m *Manager) hostPortTaken(pod *corev1.Pod) bool {
	want := hostPortsOf(pod)
	if len(want) == 0 || m.pods == nil {
		return false
	}
	for _, obj := range m.pods.List() {
		o := obj.(*corev1.Pod)
		if o.UID == pod.UID || isTerminal(o) || o.Status.StartTime == nil && !createdBefore(o, pod) {
			continue
		}
		for _, h := range hostPortsOf(o) {
			for _, w := range want {
				if h.HostPort == w.HostPort && h.Protocol == w.Protocol && (h.HostIP == w.HostIP || anyIP(h.HostIP) || anyIP(w.HostIP)) {
					return true
				}
			}
		}
	}
	return false
}

func anyIP(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

func createdBefore(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// hostPortsOf lists a pod's host ports, the protocol defaulted.
func hostPortsOf(pod *corev1.Pod) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				if p.Protocol == "" {
					p.Protocol = corev1.ProtocolTCP
				}
				out = append(out, p)
			}
		}
	}
	return out
}
