package pods

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// safeSysctls are the sysctls a pod may set without the node's leave, as
// the kubelet's default allowlist has them: each is namespaced, so it
// changes the pod's own namespaces only.
var safeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ping_group_range",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.tcp_wmem",
}

// sysctlReason is the reason of a pod refused for its sysctls.
const sysctlReason = "SysctlForbidden"

// dottedSysctl writes a sysctl name with dots between its parts: a name
// whose first separator is a slash ("net/ipv4/conf/eth0.100/forwarding")
// has its slashes and dots swapped, as the kubelet reads it.
func dottedSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, name)
}

// forbiddenSysctl says why the board refuses pod's sysctls ("" if it
// does not): one not on the allowlist, or a network one for a pod on the
// board's network.
func forbiddenSysctl(pod *corev1.Pod) string {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return ""
	}
	for _, s := range sc.Sysctls {
		name := dottedSysctl(s.Name)
		switch {
		case !slices.Contains(safeSysctls, name):
			return fmt.Sprintf("forbidden sysctl: %q not allowlisted", name)
		case pod.Spec.HostNetwork && strings.HasPrefix(name, "net."):
			return fmt.Sprintf("forbidden sysctl: %q not allowed with host net enabled", name)
		}
	}
	return ""
}

// podSysctls are the sysctls of pod's containers, by dotted name.
func podSysctls(pod *corev1.Pod) map[string]string {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(sc.Sysctls))
	for _, s := range sc.Sysctls {
		out[dottedSysctl(s.Name)] = s.Value
	}
	return out
}
